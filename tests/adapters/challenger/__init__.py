"""Tests of the twinkle Challenger adapter, with doubles of twinkle's Challenger."""

"""Tests of the framework adapters, one package per host."""

"""Tests of the adapters, one package per host (the host doubles live beside their tests)."""

"""Tests of the framework adapters, one package per host (the host doubles live beside their tests)."""

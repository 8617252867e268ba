"""CPU stand-in for DeepSpeed: the names OpenRLHF 0.11.2's trainer modules import."""

from __future__ import annotations

from _stub_support import placeholder, submodules

submodules(__name__, "runtime.zero.partition_parameters", "ops.adam", "accelerator")
__getattr__ = placeholder

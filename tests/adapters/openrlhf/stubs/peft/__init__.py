"""Stand-in for peft (not installed in the lane): the names OpenRLHF 0.11.2's model modules import."""

from __future__ import annotations

from _stub_support import placeholder, submodules

submodules(__name__, "tuners.lora")
__getattr__ = placeholder

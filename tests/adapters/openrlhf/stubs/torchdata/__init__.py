"""Stand-in for torchdata (not installed in the lane): the names OpenRLHF 0.11.2 imports."""

from __future__ import annotations

from _stub_support import placeholder, submodules

submodules(__name__, "stateful_dataloader")
__getattr__ = placeholder

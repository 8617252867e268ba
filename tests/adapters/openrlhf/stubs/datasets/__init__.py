"""Stand-in for datasets (not installed in the lane): the names OpenRLHF 0.11.2 imports."""

from __future__ import annotations

from _stub_support import placeholder

__getattr__ = placeholder

"""CPU stand-in for vLLM: the names OpenRLHF 0.11.2 imports. No engine is ever built from it."""

from __future__ import annotations

import sys
from typing import Any

from _stub_support import placeholder, submodules

__version__ = "0.0.0+stub"


class SamplingParams:
    """Holds the sampling arguments the generator passes, as vLLM's class does."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


submodules(__name__, "inputs", "utils")
sys.modules[f"{__name__}.inputs"].TokensPrompt = dict
sys.modules[f"{__name__}.utils"].random_uuid = lambda: "stub-request"
__getattr__ = placeholder

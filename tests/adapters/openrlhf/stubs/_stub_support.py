"""
Helpers for the CPU stand-ins of OpenRLHF's GPU-only imports (vllm, deepspeed, flash_attn) and of
packages the lane does not install (peft, torchdata, datasets).

Every name a stand-in does not define is a placeholder class: importing OpenRLHF's modules works,
building their GPU objects does not (the tests never do).
"""

from __future__ import annotations

import sys
import types
from typing import Any


class Placeholder:
    """Any name the real package would provide; it accepts any arguments and does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs


def placeholder(name: str) -> type:
    if name.startswith("__"):
        raise AttributeError(name)
    return type(name, (Placeholder,), {})


def submodules(parent: str, *names: str) -> None:
    """Register ``parent.<name>`` (dotted names too) as placeholder modules in ``sys.modules``."""
    for dotted in names:
        parts = dotted.split(".")
        for depth in range(1, len(parts) + 1):
            full = ".".join([parent, *parts[:depth]])
            if full not in sys.modules:
                module = types.ModuleType(full)
                module.__getattr__ = placeholder  # type: ignore[method-assign]
                module.__path__ = []
                sys.modules[full] = module
                setattr(sys.modules[full.rsplit(".", 1)[0]], parts[depth - 1], module)

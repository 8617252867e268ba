"""CPU stand-in for flash-attn: the names OpenRLHF 0.11.2's model modules import."""

from __future__ import annotations

from _stub_support import placeholder, submodules

submodules(__name__, "bert_padding", "utils.distributed")
__getattr__ = placeholder

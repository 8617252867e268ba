"""The TRL versions this adapter was written and tested against, as data."""

from __future__ import annotations

from .._kit import host_versions

__all__ = ["SUPPORTED_VERSIONS"]

#: The supported range of TRL. The adapter overrides private ``GRPOTrainer`` methods, which
#: drift between minor releases; the tests pin ``trl==1.16.0``.
SUPPORTED_VERSIONS = host_versions({"trl": ">=1.16,<1.17"})

"""The verl versions the adapter is tested against, as data (checked from metadata when verl is imported)."""

from __future__ import annotations

from .._kit import host_versions

__all__ = ["SUPPORTED_VERSIONS"]

#: Distributions and ranges the adapter is tested with (``.ci/verl`` installs the lower ends).
#: It overrides private ``ReplayBuffer`` methods, which change between verl releases.
SUPPORTED_VERSIONS = host_versions({"verl": ">=0.9.1,<0.10", "TransferQueue": ">=0.1.10"})

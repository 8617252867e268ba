"""The AReaL versions the adapter is tested against, as data."""

from __future__ import annotations

from .._kit import host_versions

__all__ = ["ADAPTER", "INSTALL_HINT", "SUPPORTED_VERSIONS"]

#: The adapter's name in messages and in the once-per-adapter version check.
ADAPTER = "group_admission.adapters.areal"
#: The supported range of AReaL: the adapter reads the trajectories of its workflow executor
#: (``should_accept_fn``) and wraps its ``RolloutWorkflow``; ``.ci/areal`` installs 1.0.4.
SUPPORTED_VERSIONS = host_versions({"areal": ">=1.0.4,<1.1"})
#: How to get AReaL where the adapter runs (AReaL's own install; torch pinned beside it).
INSTALL_HINT = "pip install areal==1.0.4 (in the same pip command as your torch pin)"

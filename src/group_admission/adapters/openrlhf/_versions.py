"""The OpenRLHF versions the adapter is tested against, as data, checked from metadata only."""

from __future__ import annotations

import warnings
from importlib.metadata import PackageNotFoundError, version

__all__ = ["INSTALL_HINT", "SUPPORTED_VERSIONS", "check_installed_version"]

#: Distribution requirements the adapter is tested with (``.ci/openrlhf`` installs the lower end).
SUPPORTED_VERSIONS: tuple[str, ...] = ("openrlhf>=0.11.2,<0.12",)

#: How to get OpenRLHF where the adapter runs (OpenRLHF's own install; torch pinned beside it).
INSTALL_HINT = (
    "install it with: pip install 'openrlhf[vllm]==0.11.2' "
    "(in the same pip command as your torch pin, e.g. torch==2.13.0)"
)

_LOWEST = (0, 11, 2)


def _release(text: str) -> tuple[int, ...] | None:
    """``(major, minor, patch)`` of a plain release (``0.11.2``, ``0.11.2.post1``), else ``None``."""
    try:
        return tuple(int(part) for part in text.split("+", maxsplit=1)[0].split(".")[:3])
    except ValueError:
        return None


def check_installed_version() -> None:
    """Warn when the installed OpenRLHF is outside :data:`SUPPORTED_VERSIONS` (overridden code drifts)."""
    try:
        installed = version("openrlhf")
    except PackageNotFoundError:
        return
    release = _release(installed)
    if release is None or release[:2] != _LOWEST[:2] or release < _LOWEST:
        warnings.warn(
            f"group_admission.adapters.openrlhf is tested with {SUPPORTED_VERSIONS[0]}, not openrlhf "
            f"{installed}: it overrides SamplesGenerator._generate_vllm, which changes between releases",
            RuntimeWarning,
            stacklevel=2,
        )

"""The verl versions the adapter is tested against, as data, checked from metadata only."""

from __future__ import annotations

import warnings
from importlib.metadata import PackageNotFoundError, version

from ..._loading import install_line

__all__ = ["INSTALL_HINT", "SUPPORTED_VERSIONS", "check_installed_version"]

#: Distribution requirements this adapter is tested with (``.ci/verl`` installs the lower ends).
SUPPORTED_VERSIONS: tuple[str, ...] = ("verl>=0.9.1,<0.10", "TransferQueue>=0.1.10")

#: The install line for the adapter's dependencies (with the advice to pin torch beside it).
INSTALL_HINT = f"install it with: {install_line('verl')}"

_SUPPORTED_MINOR = (0, 9)


def check_installed_version() -> None:
    """Warn when the installed verl is outside :data:`SUPPORTED_VERSIONS` (private methods drift)."""
    try:
        installed = version("verl")
    except PackageNotFoundError:
        return
    parts = installed.split(".")
    try:
        minor = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        return
    if minor != _SUPPORTED_MINOR:
        warnings.warn(
            f"group_admission.adapters.verl is tested with {SUPPORTED_VERSIONS[0]}, not verl {installed}: "
            "it overrides private ReplayBuffer methods that change between releases",
            RuntimeWarning,
            stacklevel=2,
        )

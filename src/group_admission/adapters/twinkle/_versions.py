"""The twinkle-kit versions the adapter is tested against, as data, and its lazy imports of twinkle."""

from __future__ import annotations

import importlib
import warnings
from importlib import metadata
from typing import Any

__all__ = ["INSTALL_HINT", "SUPPORTED_VERSIONS", "check_installed_version", "import_twinkle"]

#: Distribution requirements the adapter is tested with (``.ci/twinkle`` installs exactly 0.5.1).
#: For twinkle's unreleased main branch with the Challenger, see ``adapters.challenger``.
SUPPORTED_VERSIONS: tuple[str, ...] = ("twinkle-kit>=0.5.1,<0.6",)

#: The pip line that installs the released twinkle (pin torch in the same command).
INSTALL_HINT = "install it with: pip install twinkle-kit==0.5.1 torch==2.13.0 (pin torch in the same command)"

_SUPPORTED_MINOR = (0, 5)
_checked = False


def check_installed_version() -> None:
    """Warn once when the installed twinkle-kit is outside :data:`SUPPORTED_VERSIONS`."""
    global _checked  # noqa: PLW0603  (one warning per process)
    if _checked:
        return
    _checked = True
    try:
        installed = metadata.version("twinkle-kit")
    except metadata.PackageNotFoundError:
        return  # a source checkout of twinkle: nothing to compare
    parts = installed.split(".")
    try:
        minor = (int(parts[0]), int(parts[1]))
        patch = int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else 0
    except (IndexError, ValueError):
        return
    if minor != _SUPPORTED_MINOR or patch < 1:
        warnings.warn(
            f"group_admission.adapters.twinkle is tested with {SUPPORTED_VERSIONS[0]}, not "
            f"twinkle-kit {installed}: check tests/adapters/twinkle before relying on it",
            RuntimeWarning,
            stacklevel=3,
        )


def import_twinkle(module: str, name: str) -> Any:
    """
    ``from <module> import <name>`` for a twinkle module, or ImportError with the pip line.

    Raises:
        ImportError: twinkle-kit (or one of the packages its import needs) is missing.
    """
    try:
        found = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        msg = f"group_admission.adapters.twinkle needs {module}.{name} ({exc}); {INSTALL_HINT}"
        raise ImportError(msg, name=exc.name) from None
    check_installed_version()
    return found

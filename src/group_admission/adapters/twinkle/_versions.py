"""The twinkle-kit versions the adapter is tested against, as data, and its lazy import of twinkle."""

from __future__ import annotations

from typing import Any

from .._kit import host_versions, import_host

__all__ = ["INSTALL_HINT", "SUPPORTED_VERSIONS", "import_twinkle"]

#: Distributions and ranges the adapter is tested with (``.ci/twinkle`` installs exactly 0.5.1).
#: For twinkle's unreleased main branch with the Challenger, see ``adapters.challenger``.
SUPPORTED_VERSIONS = host_versions({"twinkle-kit": ">=0.5.1,<0.6"})

#: The pip line that installs the released twinkle (torch pinned in the same command).
INSTALL_HINT = "pip install twinkle-kit==0.5.1 torch==2.13.0"


def import_twinkle(module: str, name: str) -> Any:
    """
    ``from <module> import <name>`` for a twinkle module, or ImportError with the pip line.

    Raises:
        ImportError: twinkle-kit (or one of the packages its import needs) is missing.
    """
    imported = import_host(
        module,
        adapter="group_admission.adapters.twinkle",
        needs="twinkle-kit 0.5.1",
        install=INSTALL_HINT,
        versions=SUPPORTED_VERSIONS,
    )
    return getattr(imported, name)

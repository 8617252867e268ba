"""The TRL versions this adapter was written and tested against, checked before import."""

from __future__ import annotations

import warnings
from importlib import metadata

from ..._loading import require_extra

__all__ = ["SUPPORTED_VERSIONS", "check_trl"]

#: Supported range of each framework package (PEP 440 specifiers). The adapter overrides
#: private ``GRPOTrainer`` methods, which drift between minor releases.
SUPPORTED_VERSIONS: dict[str, str] = {"trl": ">=1.16,<1.17"}


def check_trl() -> None:
    """
    Fail with the install line when TRL is missing; warn when it is outside the range.

    Raises:
        ImportError: TRL (or torch) is not installed.
    """
    require_extra("torch", "trl", "group_admission.adapters.trl")
    require_extra("trl", "trl", "group_admission.adapters.trl")
    from packaging.specifiers import SpecifierSet  # noqa: PLC0415  (a TRL dependency)

    installed = metadata.version("trl")
    if installed not in SpecifierSet(SUPPORTED_VERSIONS["trl"]):
        warnings.warn(
            f"group_admission.adapters.trl supports trl{SUPPORTED_VERSIONS['trl']} (got trl=={installed}); "
            "it overrides private GRPOTrainer methods, so check its tests before relying on it",
            UserWarning,
            stacklevel=3,
        )

"""The OpenRLHF versions the adapter is tested against, as data, and its lazy import of OpenRLHF."""

from __future__ import annotations

from types import ModuleType

from .._kit import check_versions, host_versions, import_host

__all__ = ["ADAPTER", "INSTALL_HINT", "SUPPORTED_VERSIONS", "check_openrlhf", "import_openrlhf"]

#: The adapter's name in messages and in the once-per-adapter version check.
ADAPTER = "group_admission.adapters.openrlhf"
#: Distributions and ranges the adapter is tested with (``.ci/openrlhf`` installs the lower end).
#: It overrides ``SamplesGenerator._generate_vllm``, which changes between releases.
SUPPORTED_VERSIONS = host_versions({"openrlhf": ">=0.11.2,<0.12"})
#: How to get OpenRLHF where the adapter runs (OpenRLHF's own install; torch pinned beside it).
INSTALL_HINT = (
    "pip install 'openrlhf[vllm]==0.11.2' (in the same pip command as your torch pin, e.g. torch==2.13.0)"
)


def import_openrlhf(module: str) -> ModuleType:
    """
    Import an OpenRLHF module, then check the installed version (a warning outside the range).

    Raises:
        ImportError: OpenRLHF is not importable; the message has the pip line.
    """
    return import_host(
        module,
        adapter=ADAPTER,
        needs=f"OpenRLHF's {module}",
        install=INSTALL_HINT,
        versions=SUPPORTED_VERSIONS,
    )


def check_openrlhf() -> None:
    """Warn once when the installed OpenRLHF is outside :data:`SUPPORTED_VERSIONS` (the code drifts)."""
    check_versions(ADAPTER, SUPPORTED_VERSIONS)

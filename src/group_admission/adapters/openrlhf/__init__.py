"""
OpenRLHF adapter: group admission and a capped replacement inside OpenRLHF 0.11's ``SamplesGenerator``.

OpenRLHF has no class-path setting for its generator, so the adapter swaps the class in
the Ray workers. Add to the launch of ``python -m openrlhf.cli.train_ppo_ray``::

    export RAY_RUNTIME_ENV_HOOK=group_admission.adapters.openrlhf.runtime_env_hook
    export GROUP_ADMISSION_OPENRLHF=/path/to/admission.yaml   # the settings
    python -m openrlhf.cli.train_ppo_ray ... --algo.dynamic_filtering_enable

Importing this module imports neither OpenRLHF, Ray nor torch. See ``docs/adapters/openrlhf.md``.
"""

from __future__ import annotations

from .._kit import publish as _publish
from ._generator import METRIC_PREFIX, AdmissionGeneratorMixin, reset
from ._install import (
    SETUP_HOOK,
    admission_generator_class,
    install,
    runtime_env_hook,
    uninstall,
    worker_process_setup_hook,
)
from ._settings import SETTINGS_ENV, OpenRLHFAdmissionSettings
from ._versions import SUPPORTED_VERSIONS

__all__ = [
    "METRIC_PREFIX",
    "SETTINGS_ENV",
    "SETUP_HOOK",
    "SUPPORTED_VERSIONS",
    "AdmissionGeneratorMixin",
    "OpenRLHFAdmissionSettings",
    "admission_generator_class",
    "install",
    "reset",
    "runtime_env_hook",
    "uninstall",
    "worker_process_setup_hook",
]

_publish(__name__)

"""
Putting admission into OpenRLHF without editing it: swap ``SamplesGenerator`` in the Ray workers.

OpenRLHF has no class-path setting for its generator. Both trainers build it in a Ray
actor (``PPOTrainer`` for the sync trainer, ``GenerateSamplesActor`` for the async one)
from the name ``SamplesGenerator`` they import from
``openrlhf.trainer.ppo_utils.samples_generator``. Ray's ``worker_process_setup_hook``
runs in every worker before it builds an actor; :func:`worker_process_setup_hook` makes
that module's ``SamplesGenerator`` the admission class there, at once if the module is
loaded, else the moment it is imported. :func:`runtime_env_hook` (for
``RAY_RUNTIME_ENV_HOOK``) adds that hook to the runtime environment OpenRLHF's driver
passes to ``ray.init``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from .._kit import describe, install_on_import, is_inline
from ._generator import AdmissionGeneratorMixin
from ._settings import SETTINGS_ENV, OpenRLHFAdmissionSettings
from ._versions import check_openrlhf, import_openrlhf

__all__ = [
    "GENERATOR_MODULE",
    "SETUP_HOOK",
    "TRAINER_MODULES",
    "admission_generator_class",
    "install",
    "runtime_env_hook",
    "uninstall",
    "worker_process_setup_hook",
]

#: The OpenRLHF module that defines ``SamplesGenerator``.
GENERATOR_MODULE = "openrlhf.trainer.ppo_utils.samples_generator"
#: The trainer modules that import the name ``SamplesGenerator`` (sync, async).
TRAINER_MODULES = ("openrlhf.trainer.ppo_trainer", "openrlhf.trainer.ppo_trainer_async")
#: The import path of :func:`worker_process_setup_hook`, as Ray's runtime environment names it.
SETUP_HOOK = "group_admission.adapters.openrlhf.worker_process_setup_hook"

_CLASSES: dict[type, type] = {}


def admission_generator_class(base: type | None = None) -> type:
    """
    The admission subclass of ``base`` (default: OpenRLHF's ``SamplesGenerator``), made once per base.

    Raises:
        ImportError: ``base`` is ``None`` and OpenRLHF is not importable.
        TypeError: ``base`` is not a class.

    .. versionadded:: 0.2.0
    """
    if base is None:
        base = import_openrlhf(GENERATOR_MODULE).SamplesGenerator
    if not isinstance(base, type):
        msg = f"'base' must be OpenRLHF's SamplesGenerator class (got {describe(base)})"
        raise TypeError(msg)
    if issubclass(base, AdmissionGeneratorMixin):
        return base
    made = _CLASSES.get(base)
    if made is None:
        doc = f"OpenRLHF's {base.__name__} with group admission (see AdmissionGeneratorMixin)."
        made = type(f"Admission{base.__name__}", (AdmissionGeneratorMixin, base), {"__doc__": doc})
        made.__module__ = "group_admission.adapters.openrlhf"
        made = _CLASSES.setdefault(base, made)
    return made


def _swap(old: object, new: type) -> None:
    """Rebind ``SamplesGenerator`` from ``old`` to ``new`` in the trainer modules already imported."""
    for name in TRAINER_MODULES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "SamplesGenerator", None) is old:
            module.SamplesGenerator = new  # type: ignore[attr-defined]


def install(module: ModuleType | None = None) -> type:
    """
    Make ``module.SamplesGenerator`` (default: OpenRLHF's module) the admission class; return it.

    The trainer modules already imported get it too; those imported later import it.
    Installing twice changes nothing.

    Raises:
        ImportError: ``module`` is ``None`` and OpenRLHF is not importable.
        TypeError: the module's ``SamplesGenerator`` is not a class.

    .. versionadded:: 0.2.0
    """
    target: Any = module
    if target is None:
        target = import_openrlhf(GENERATOR_MODULE)  # checks the installed version too
    else:
        check_openrlhf()
    made = admission_generator_class(target.SamplesGenerator)
    target.SamplesGenerator = made
    if made in _CLASSES.values():
        _swap(made.__bases__[-1], made)
    return made


def uninstall(module: ModuleType | None = None) -> bool:
    """
    Undo :func:`install` (default: in OpenRLHF's module, if it is imported); return whether it did.

    .. versionadded:: 0.2.0
    """
    target: Any = sys.modules.get(GENERATOR_MODULE) if module is None else module
    current = getattr(target, "SamplesGenerator", None)
    if not isinstance(current, type) or current not in _CLASSES.values():
        return False
    base = current.__bases__[-1]
    target.SamplesGenerator = base
    _swap(current, base)
    return True


def worker_process_setup_hook() -> None:
    """
    Ray's ``runtime_env["worker_process_setup_hook"]``: :func:`install` in this worker, now or on import.

    Imports nothing of OpenRLHF itself, so it is light for every worker; idempotent.

    .. versionadded:: 0.2.0
    """
    install_on_import(GENERATOR_MODULE, install)


def runtime_env_hook(runtime_env: Mapping[str, Any] | None) -> dict[str, Any]:
    """
    Ray's ``RAY_RUNTIME_ENV_HOOK``: the driver's runtime environment plus the adapter's setup hook.

    Also passes ``GROUP_ADMISSION_OPENRLHF`` on to the workers (a file path made
    absolute), after checking that its settings load, so a mistake fails in the driver.

    Raises:
        ValueError: the runtime environment already names another setup hook.
        TypeError, ValueError, ConfigurationError: the settings are invalid.

    .. versionadded:: 0.2.0
    """
    env = dict(runtime_env or {})
    hook = env.get("worker_process_setup_hook")
    if hook not in (None, SETUP_HOOK):
        msg = (
            f"the runtime environment already sets 'worker_process_setup_hook' to {hook!r}; "
            f"call {SETUP_HOOK}() from that hook instead of setting RAY_RUNTIME_ENV_HOOK"
        )
        raise ValueError(msg)
    env["worker_process_setup_hook"] = SETUP_HOOK
    value = os.environ.get(SETTINGS_ENV)
    if value is not None and value.strip():
        OpenRLHFAdmissionSettings.from_env(value)
        if not is_inline(value):
            value = os.path.abspath(value.strip())
        env["env_vars"] = {SETTINGS_ENV: value, **dict(env.get("env_vars") or {})}
    return env

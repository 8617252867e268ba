"""
Putting the filter into RAGEN's trainer without editing RAGEN: wrap ``RayAgentTrainer.init_workers``.

RAGEN has no filter registry, and its trainer runs in Ray's ``TaskRunner`` process, hence
:func:`worker_process_setup_hook` (see ``docs/adapters/ragen.md``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from .._kit import check_versions, describe, host_versions, import_host, install_on_import
from ._filter import RagenGroupAdmissionFilter

#: The RAGEN commit the adapter is written and tested against (RAGEN has no releases; it is
#: installed from git, and the PyPI package named ``ragen`` is unrelated).
SUPPORTED_VERSIONS = host_versions({"ragen": "mll-lab-nu/RAGEN@20daedc47558e000f7de912b060646bf2e8026bd"})
_ADAPTER = "group_admission.adapters.ragen"
#: The ``actor_rollout_ref.rollout.rollout_filter_strategy`` value that selects the adapter.
STRATEGY_NAME = "group_admission"
#: The module that defines RAGEN's ``RayAgentTrainer``.
TRAINER_MODULE = "ragen.trainer.agent_trainer"
_MARK = "__group_admission_wrapped__"


def is_selected(rollout_config: Any) -> bool:
    """
    Tell whether a RAGEN rollout config (``actor_rollout_ref.rollout``) selects the adapter.

    .. versionadded:: 0.1.0
    """
    return getattr(rollout_config, "rollout_filter_strategy", None) == STRATEGY_NAME


def _replace_filters(trainer: Any) -> None:
    """Swap RAGEN's filters for ours on a trainer whose ``init_workers`` just ran."""
    config = trainer.config
    if not is_selected(config.actor_rollout_ref.rollout):
        return
    stock = getattr(trainer, "rollout_filter", None)
    trainer.rollout_filter = RagenGroupAdmissionFilter.from_config(config)
    analysis = getattr(trainer, "gradient_analysis_rollout_filter", None)
    # A separate gradient-analysis filter is built from its own (rescaled) config copy; it
    # selects us too, and RAGEN's stock filter would fail on the unknown strategy name.
    analysis_config = getattr(trainer, "gradient_analysis_config", None)
    if analysis is stock:
        trainer.gradient_analysis_rollout_filter = trainer.rollout_filter
    elif (
        analysis is not None
        and analysis_config is not None
        and is_selected(analysis_config.actor_rollout_ref.rollout)
    ):
        trainer.gradient_analysis_rollout_filter = RagenGroupAdmissionFilter.from_config(analysis_config)


def _check_trainer_class(trainer_cls: Any) -> None:
    if not isinstance(trainer_cls, type) or not callable(getattr(trainer_cls, "init_workers", None)):
        msg = (
            f"'trainer_cls' must be a trainer class with an init_workers method (got {describe(trainer_cls)})"
        )
        raise TypeError(msg)


def install(trainer_cls: type | None = None) -> type:
    """
    Make ``trainer_cls.init_workers`` swap in the group-admission filter when the config selects it.

    ``trainer_cls`` defaults to RAGEN's ``RayAgentTrainer``; installing twice (or on a
    subclass of an installed class) wraps once. Returns the patched class.

    Raises:
        ImportError: ``trainer_cls`` is ``None`` and RAGEN is not importable.
        TypeError: ``trainer_cls`` has no ``init_workers`` method.

    .. versionadded:: 0.1.0
    """
    if trainer_cls is None:
        trainer_cls = import_host(
            TRAINER_MODULE,
            adapter=_ADAPTER,  # the key check_versions warns once under
            needs=f"RAGEN's trainer, module '{TRAINER_MODULE}', for install()",
            install=(
                "git clone https://github.com/mll-lab-nu/RAGEN && pip install -e RAGEN "
                "(the PyPI package named 'ragen' is unrelated)"
            ),
            versions=SUPPORTED_VERSIONS,
        ).RayAgentTrainer
    else:
        check_versions(_ADAPTER, SUPPORTED_VERSIONS)
    _check_trainer_class(trainer_cls)
    patched: Any = trainer_cls
    original: Callable[..., Any] = patched.init_workers
    if getattr(original, _MARK, False):
        return trainer_cls

    @functools.wraps(original)
    def init_workers(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        _replace_filters(self)
        return result

    setattr(init_workers, _MARK, True)
    patched.init_workers = init_workers
    return trainer_cls


def uninstall(trainer_cls: type | None = None) -> bool:
    """
    Undo :func:`install` on ``trainer_cls`` (``None``: RAGEN's ``RayAgentTrainer``); return whether it did.

    .. versionadded:: 0.1.0
    """
    if trainer_cls is None:
        module = sys.modules.get(TRAINER_MODULE)
        if module is None:
            return False
        trainer_cls = module.RayAgentTrainer
    _check_trainer_class(trainer_cls)
    current = trainer_cls.__dict__.get("init_workers")
    if current is None or not getattr(current, _MARK, False):
        return False
    restored: Any = trainer_cls
    restored.init_workers = current.__wrapped__
    return True


def worker_process_setup_hook() -> None:
    """
    Entry point for Ray's ``runtime_env.worker_process_setup_hook``: :func:`install` where RAGEN's trainer is.

    Patches the trainer module now if it is imported, otherwise when (and only if) the
    process imports it; light enough for every Ray worker, and idempotent.

    .. versionadded:: 0.1.0
    """
    install_on_import(TRAINER_MODULE, lambda module: install(module.RayAgentTrainer))

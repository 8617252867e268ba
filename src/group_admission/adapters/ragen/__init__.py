"""
RAGEN adapter: a rollout filter backed by an ``AdmissionSession``, installed without editing RAGEN.

RAGEN (see :data:`SUPPORTED_VERSIONS`) calls ``trainer.rollout_filter.filter(batch)`` once
per step. :class:`RagenGroupAdmissionFilter` keeps that contract: the admission gates judge
every group first, then RAGEN's own selection (``top_p``, ``top_k``, ``top_k_abs``,
``min_p``) may pick among the admitted groups. :func:`install` swaps the filter in when the
config says ``actor_rollout_ref.rollout.rollout_filter_strategy: group_admission``;
:func:`worker_process_setup_hook` does it inside Ray's TaskRunner process.

Importing this package imports no RAGEN, verl or torch. See ``docs/adapters/ragen.md``.
"""

from __future__ import annotations

from ..._host_rules.ragen import RagenSelection
from ._filter import METRIC_PREFIX, RagenGroupAdmissionFilter, select_groups
from ._install import (
    STRATEGY_NAME,
    SUPPORTED_VERSIONS,
    install,
    is_selected,
    uninstall,
    worker_process_setup_hook,
)

__all__ = [
    "METRIC_PREFIX",
    "STRATEGY_NAME",
    "SUPPORTED_VERSIONS",
    "RagenGroupAdmissionFilter",
    "RagenSelection",
    "install",
    "is_selected",
    "select_groups",
    "uninstall",
    "worker_process_setup_hook",
]

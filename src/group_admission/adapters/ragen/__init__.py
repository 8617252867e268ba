"""
RAGEN adapter: a rollout filter backed by an ``AdmissionSession``, installed without editing RAGEN.

:class:`RagenGroupAdmissionFilter` keeps RAGEN's ``rollout_filter.filter(batch)`` contract:
the admission gates judge every group, then RAGEN's own selection may pick among the
admitted ones. :func:`install` (or :func:`worker_process_setup_hook`, in Ray workers) swaps
it in. Importing this package imports no RAGEN, verl or torch. See ``docs/adapters/ragen.md``.
"""

from __future__ import annotations

from ..._host_rules.ragen import RagenSelection
from .._kit import publish as _publish
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

_publish(__name__)

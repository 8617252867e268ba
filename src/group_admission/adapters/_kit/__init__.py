"""
The adapter kit: everything an adapter may use that the root package does not export.

An adapter imports only ``group_admission`` (the public API), this package and
``group_admission._host_rules`` (what a host's own filter does, reproduced);
``tests/adapters/test_packages.py`` enforces it. ``__all__`` below *is* the adapter
interface (docs/adapters/writing.md walks through it):

- holding a session: :class:`AdapterSession` (one per configuration: settings, session,
  report window, ``last_report``), :class:`SessionRegistry` (one per settings mapping, for
  hosts that call a function with their config), :class:`HoldsAdmission` (a hook object's
  ``session``, ``policy``, ``stats`` and ``last_report``);
- judging: :class:`GroupInput` (one group translated) and :func:`scalar_reward`;
- a step: :func:`admission_step`, :func:`step_metrics`, :func:`exhausted_message`;
- the host: :func:`host_versions`, :func:`import_host`, :func:`find_host`,
  :func:`check_versions`, :func:`publish`, :func:`install_on_import`;
- the prompt history of a host that lets the adapter pick prompts: :func:`history_field`,
  :func:`build_history`, :func:`restored_history`, :class:`PromptScan` (the host's order
  through the history, a pass at most per step), :func:`history_metrics`;
- settings: the fields and coercers every settings class uses, :func:`settings_from`
  (which also reads a ``preset:`` block) and :func:`read_settings_env` (one reader, one
  exception type: :class:`~group_admission.ConfigurationError`);
- the validation helpers (one message grammar: ``'field' must be ... (got ...)``).
"""

from __future__ import annotations

from ..._history_ids import PromptId, check_prompt_id
from ..._loading import (
    coerce_config,
    coerce_instance,
    from_mapping,
    install_line,
    load_yaml_mapping,
    require_extra,
)
from ..._loss_scale import DEFAULT_LOSS_SCALE, LOSS_SCALES, LossScale
from ..._reasons import CUMULATIVE_EFFECTIVE_GROUP_RATE
from ..._stream_types import ON_EXHAUSTED, OnExhausted
from ..._tokens import TOKEN_KINDS
from ..._validation import (
    check_bool,
    check_choice,
    check_count,
    check_ge,
    check_gt,
    check_int,
    check_names_in,
    check_one_of,
    check_optional,
    check_probability,
    check_range,
    check_real,
    deprecated,
    describe,
    field_check,
    int_field,
    probability_field,
    real_field,
)
from ._env import is_inline, read_settings_env
from ._history import (
    HISTORY_METRICS,
    PromptScan,
    as_history_section,
    build_history,
    history_field,
    history_metrics,
    restored_history,
)
from ._hosts import check_versions, find_host, host_versions, import_host, moved_names, publish
from ._install import InstallOnImport, install_on_import
from ._runtime import (
    UNSUMMABLE_REWARD,
    WRONG_GROUP_SIZE,
    AdapterSession,
    AdapterSettings,
    GroupInput,
    HoldsAdmission,
    ReportWindow,
    SessionRegistry,
    chunk,
    scalar_reward,
)
from ._settings import (
    SESSION_KEYS,
    as_budget,
    as_limits,
    as_policy_config,
    failed_streak_field,
    loss_scale_field,
    on_exhausted_field,
    scalar_policy_config,
    session_config_of,
    settings_from,
    settings_key,
    to_str_tuple,
    token_ids_only,
    unpack_block,
)
from ._step import OpenStep, admission_step, exhausted_message, log_metrics, step_metrics, stream_step_metrics

__all__ = [
    "CUMULATIVE_EFFECTIVE_GROUP_RATE",
    "DEFAULT_LOSS_SCALE",
    "HISTORY_METRICS",
    "LOSS_SCALES",
    "ON_EXHAUSTED",
    "SESSION_KEYS",
    "TOKEN_KINDS",
    "UNSUMMABLE_REWARD",
    "WRONG_GROUP_SIZE",
    "AdapterSession",
    "AdapterSettings",
    "GroupInput",
    "HoldsAdmission",
    "InstallOnImport",
    "LossScale",
    "OnExhausted",
    "OpenStep",
    "PromptId",
    "PromptScan",
    "ReportWindow",
    "SessionRegistry",
    "admission_step",
    "as_budget",
    "as_history_section",
    "as_limits",
    "as_policy_config",
    "build_history",
    "check_bool",
    "check_choice",
    "check_count",
    "check_ge",
    "check_gt",
    "check_int",
    "check_names_in",
    "check_one_of",
    "check_optional",
    "check_probability",
    "check_prompt_id",
    "check_range",
    "check_real",
    "check_versions",
    "chunk",
    "coerce_config",
    "coerce_instance",
    "deprecated",
    "describe",
    "exhausted_message",
    "failed_streak_field",
    "field_check",
    "find_host",
    "from_mapping",
    "history_field",
    "history_metrics",
    "host_versions",
    "import_host",
    "install_line",
    "install_on_import",
    "int_field",
    "is_inline",
    "load_yaml_mapping",
    "log_metrics",
    "loss_scale_field",
    "moved_names",
    "on_exhausted_field",
    "probability_field",
    "publish",
    "read_settings_env",
    "real_field",
    "require_extra",
    "restored_history",
    "scalar_policy_config",
    "scalar_reward",
    "session_config_of",
    "settings_from",
    "settings_key",
    "step_metrics",
    "stream_step_metrics",
    "to_str_tuple",
    "token_ids_only",
    "unpack_block",
]

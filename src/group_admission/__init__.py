"""
Decide which GRPO prompt groups carry training signal, and plan bounded resampling.

The public API is flat: import everything from ``group_admission``. Framework adapters
live in ``group_admission.adapters.<framework>`` and the Prometheus exporter in
``group_admission.prometheus``; importing this package loads neither torch,
prometheus_client nor any RL framework.
"""

from __future__ import annotations

import contextlib

from ._budget import (
    ResamplePlan,
    SamplingBudgetConfig,
    SamplingBudgetController,
    SamplingBudgetState,
)
from ._config import GroupAdmissionConfig
from ._decision import BatchAdmissionResult, GroupAdmissionDecision
from ._exceptions import (
    BudgetExhaustedError,
    CheckpointError,
    ConfigurationError,
    ConsecutiveFailedGroupsError,
    GroupAdmissionError,
    HalfConfiguredWarning,
    StepLifecycleError,
)
from ._history import PromptEstimate, PromptHistory, PromptPicks, SkipReport
from ._history_config import PromptHistoryConfig
from ._history_evidence import informative_probability
from ._limits import DropLimits
from ._loading import parse_yaml
from ._loss_scale import loss_scale
from ._metrics import AdmissionStats, group_admission_metrics
from ._planning import binomial_groups_needed
from ._policy import GroupAdmissionPolicy
from ._prompt_plan import PromptPlan, plan_prompts, prompts_needed
from ._reasons import RejectionReason
from ._session import AdmissionSession, AdmissionVerdict, BatchAdmissionVerdict, SessionConfig, StepReport
from ._similarity import ngram_jaccard
from ._state_checks import parse_state
from ._stream import AdmissionStream
from ._stream_types import StreamLedger, StreamSettings, StreamVerdict
from ._streaming import StreamPlan, plan_stream
from ._tokens import TokenTally

__all__ = [
    "AdmissionSession",
    "AdmissionStats",
    "AdmissionStream",
    "AdmissionVerdict",
    "BatchAdmissionResult",
    "BatchAdmissionVerdict",
    "BudgetExhaustedError",
    "CheckpointError",
    "ConfigurationError",
    "ConsecutiveFailedGroupsError",
    "DropLimits",
    "GroupAdmissionConfig",
    "GroupAdmissionDecision",
    "GroupAdmissionError",
    "GroupAdmissionPolicy",
    "HalfConfiguredWarning",
    "PromptEstimate",
    "PromptHistory",
    "PromptHistoryConfig",
    "PromptPicks",
    "PromptPlan",
    "RejectionReason",
    "ResamplePlan",
    "SamplingBudgetConfig",
    "SamplingBudgetController",
    "SamplingBudgetState",
    "SessionConfig",
    "SkipReport",
    "StepLifecycleError",
    "StepReport",
    "StreamLedger",
    "StreamPlan",
    "StreamSettings",
    "StreamVerdict",
    "TokenTally",
    "__version__",
    "binomial_groups_needed",
    "group_admission_metrics",
    "informative_probability",
    "loss_scale",
    "ngram_jaccard",
    "parse_state",
    "parse_yaml",
    "plan_prompts",
    "plan_stream",
    "prompts_needed",
]


def __getattr__(name: str) -> str:
    # PEP 562: read the version from the installed metadata only when asked.
    if name == "__version__":
        from importlib.metadata import version  # noqa: PLC0415

        return version("group-admission")
    msg = f"module 'group_admission' has no attribute '{name}'"
    raise AttributeError(msg)


for _name in __all__:
    _obj = globals().get(_name)
    if _obj is not None and hasattr(_obj, "__module__"):
        # Reprs, tracebacks and docs say group_admission.X, not group_admission._policy.X.
        with contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = __name__
del _name, _obj

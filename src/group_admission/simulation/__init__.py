"""
Simulate admission strategies before spending GPU hours on them.

``simulate`` runs strategies side by side on the same simulated steps, drawn from a task
model (pass rates from a Beta distribution, optional shaping term, response lengths),
and reports what each costs and what informative yield it delivers. The strategies are
faithful models of slime's over-sampling waves, verl's DAPO dynamic sampling, ROLL's
resample-until-full loop, RAGEN's top-p filter, the twinkle pull request's per-task
retry, this SDK's ``AdmissionSession`` and an oracle lower bound; every one judges groups
with the real ``GroupAdmissionPolicy``. See ``docs/simulation.md``.
"""

from __future__ import annotations

import contextlib

from ._flights import partial_tokens
from ._frameworks import DapoDynamicSampling, RollResampling, SlimeWaves
from ._models import (
    BinaryTaskModel,
    CompositeTaskModel,
    EngineModel,
    ResponseLengthModel,
    SimulationConfig,
    TaskModel,
    task_model_from_mapping,
)
from ._planning_strategies import (
    HistorySkipping,
    OracleSkipping,
    PoolController,
    PoolStrategy,
    StreamingLaunches,
)
from ._plot import plot_result
from ._pool_simulate import (
    POOL_STRATEGY_KINDS,
    PoolResult,
    PoolStrategyResult,
    default_pool_strategies,
    simulate_pool,
)
from ._prompt_pool import DIFFICULTY_BINS, PoolContext, PromptPool, PromptPoolConfig
from ._results import StepOutcome, StepTally, StrategyResult, summarize
from ._simulate import (
    DEFAULT_POLICY,
    STRATEGY_KINDS,
    SimulationResult,
    default_strategies,
    simulate,
    strategy_from_mapping,
)
from ._strategies import (
    ControllerResampling,
    NoFiltering,
    Oracle,
    PerTaskRetry,
    RagenTopP,
    Strategy,
    ragen_top_p,
)
from ._stream import GroupBatch, StepContext

__all__ = [
    "DEFAULT_POLICY",
    "DIFFICULTY_BINS",
    "POOL_STRATEGY_KINDS",
    "STRATEGY_KINDS",
    "BinaryTaskModel",
    "CompositeTaskModel",
    "ControllerResampling",
    "DapoDynamicSampling",
    "EngineModel",
    "GroupBatch",
    "HistorySkipping",
    "NoFiltering",
    "Oracle",
    "OracleSkipping",
    "PerTaskRetry",
    "PoolContext",
    "PoolController",
    "PoolResult",
    "PoolStrategy",
    "PoolStrategyResult",
    "PromptPool",
    "PromptPoolConfig",
    "RagenTopP",
    "ResponseLengthModel",
    "RollResampling",
    "SimulationConfig",
    "SimulationResult",
    "SlimeWaves",
    "StepContext",
    "StepOutcome",
    "StepTally",
    "Strategy",
    "StrategyResult",
    "StreamingLaunches",
    "TaskModel",
    "default_pool_strategies",
    "default_strategies",
    "partial_tokens",
    "plot_result",
    "ragen_top_p",
    "simulate",
    "simulate_pool",
    "strategy_from_mapping",
    "summarize",
    "task_model_from_mapping",
]

for _name in __all__:
    _obj = globals().get(_name)
    if _obj is not None and hasattr(_obj, "__module__") and not isinstance(_obj, (dict, str)):
        # Reprs and docs say group_admission.simulation.X, not ..._models.X.
        with contextlib.suppress(AttributeError, TypeError):
            _obj.__module__ = __name__
del _name, _obj

"""
AReaL's ``should_accept_fn`` and a pre-generation skip, judged by one :class:`AdmissionStream`.

AReaL's ``WorkflowExecutor`` runs a workflow per prompt (``GroupedRolloutWorkflow`` runs it
``n_samples`` times and concatenates the members) and asks ``should_accept_fn(trajectory)``
whether to keep each finished group; a rejected one is counted by AReaL's staleness manager
and its capacity refills the stream. :class:`AReaLAdmission` is that function: it reads the
group's rewards, decoded tokens and policy versions off the trajectory and lets its stream
judge. :class:`AdmissionWorkflow` wraps the user's workflow so that a prompt the prompt
history predicts dead returns ``None`` before anything is generated.

For an import path (``dynamic_filter_fn: group_admission.adapters.areal.should_accept``), the
settings come from ``GROUP_ADMISSION_AREAL`` (inline JSON, or a ``.json`` or YAML path), one
stream per process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from ... import AdmissionStream, RejectionReason, StreamVerdict
from .._kit import check_count, check_versions, describe, find_host, read_settings_env
from ._versions import ADAPTER, SUPPORTED_VERSIONS

__all__ = [
    "HOST",
    "METRIC_SCOPE",
    "PARTIAL_GROUP",
    "PROMPT_KEY",
    "SETTINGS_ENV",
    "AReaLAdmission",
    "AdmissionWorkflow",
    "current_admission",
    "should_accept",
]

#: The host's name in messages.
HOST = "areal"
#: The environment variable the import-path ``should_accept`` reads its settings from.
SETTINGS_ENV = "GROUP_ADMISSION_AREAL"
#: The ``stats_tracker`` scope the per-group metrics are recorded under.
METRIC_SCOPE = "group_admission"
#: The external reason of a group that came back with fewer members than ``group_size``
#: (AReaL's ``GroupedRolloutWorkflow`` drops members whose episode failed).
PARTIAL_GROUP = "partial_group"
#: The trajectory key :class:`AdmissionWorkflow` adds: each member's prompt, as an index into
#: its admission's prompt table, so that ``should_accept`` can tell the history which prompt
#: the group was (AReaL hands ``should_accept_fn`` the trajectory alone).
PROMPT_KEY = "group_admission_prompt"
_NO_REWARDS = "trajectory_without_rewards"


class AReaLAdmission:
    """
    AReaL's ``should_accept_fn``, judging each finished group with an :class:`AdmissionStream`.

    Args:
        block: The admission block: a ``SessionConfig`` mapping (``preset: recommended``
            included), a ``stream`` section, and ``group_size``: AReaL's
            ``gconfig.n_samples``, the members a group should have.

    ``stream.on_exhausted`` must be ``"train"``: AReaL's executor catches every exception a
    rollout raises and rejects the rollout, so an exhaustion error would refill the stream
    instead of stopping it. A window that cannot afford another rejection keeps the group
    (``fallback_admitted``), so the refill is bounded.

    .. versionadded:: 0.2.0
    """

    def __init__(self, block: Mapping[str, Any] | None = None) -> None:
        if block is not None and not isinstance(block, Mapping):
            msg = f"'{SETTINGS_ENV}' settings must be a mapping (got {describe(block)})"
            raise TypeError(msg)
        fields = dict(block or {})
        self.group_size = check_count(fields.pop("group_size", 1), "group_size", 1)
        self.stream = AdmissionStream.from_mapping(fields, host=HOST, group_size=self.group_size)
        if self.stream.settings.on_exhausted != "train":
            msg = (
                "'stream.on_exhausted' must be 'train' for AReaL: its workflow executor turns an exception "
                f"into a rejected rollout and refills (got {self.stream.settings.on_exhausted!r})"
            )
            raise ValueError(msg)
        self._tracker = _stats_tracker()
        self._prompts: list[Any] = []
        self._indices: dict[Any, int] = {}
        self._lock = threading.Lock()

    def __call__(self, trajectory: Mapping[str, Any]) -> bool:
        """Whether AReaL keeps this finished group; it is judged, counted and logged either way."""
        return self.judge(trajectory).keep

    def judge(self, trajectory: Mapping[str, Any]) -> StreamVerdict:
        """The stream's verdict on one trajectory of AReaL's executor."""
        rewards, external = _rewards(trajectory, self.group_size)
        versions = _versions(trajectory)
        verdict = self.stream.judge(
            rewards,
            external_reasons=external,
            prompt_id=self._prompt_of(trajectory),
            generated_tokens=_generated_tokens(trajectory),
            versions=versions or None,
        )
        self._record(verdict, len(rewards))
        return verdict

    def skip(self, prompt_id: Any) -> bool:
        """Whether the prompt history skips this prompt before generation (counted when it does)."""
        return not self.stream.pick([prompt_id]).picked

    def prompt_index(self, prompt_id: Any) -> int:
        """The index of a prompt in this admission's table (what :data:`PROMPT_KEY` holds)."""
        with self._lock:
            if prompt_id not in self._indices:
                self._indices[prompt_id] = len(self._prompts)
                self._prompts.append(prompt_id)
            return self._indices[prompt_id]

    def _prompt_of(self, trajectory: Mapping[str, Any]) -> Any:
        """The group's prompt, when :class:`AdmissionWorkflow` marked its members with one."""
        marks = trajectory.get(PROMPT_KEY) if isinstance(trajectory, Mapping) else None
        indices = set() if marks is None else {int(v) for v in _flat(marks)}
        if len(indices) != 1 or not 0 <= (index := indices.pop()) < len(self._prompts):
            return None
        return self._prompts[index]

    def metrics(self, prefix: str = "group_admission/") -> dict[str, int | float]:
        """The stream's metrics (:meth:`AdmissionStream.metrics`), for a logger of the user's."""
        return self.stream.metrics(prefix)

    def _record(self, verdict: StreamVerdict, members: int) -> None:
        """One group in AReaL's ``stats_tracker``: 0/1 per outcome, so an export gives shares and a count."""
        if self._tracker is None:
            return
        decision = verdict.decision
        reason = None if decision is None else decision.reason
        self._tracker.scalar(
            admitted=float(decision is not None and decision.admitted),
            stale=float(verdict.stale),
            kept=float(verdict.keep),
            fallback_admitted=float(verdict.fallback_admitted),
            **{r.value: float(reason is r) for r in RejectionReason},
            members=float(members),
            version_span=float(verdict.version_span or 0),
            loss_scale=self.stream.loss_scale,
        )


def _stats_tracker() -> Any:
    """AReaL's ``stats_tracker`` scope for the adapter, or ``None`` where AReaL is not installed."""
    module = find_host("areal.utils.stats_tracker", adapter=ADAPTER, versions=SUPPORTED_VERSIONS)
    return None if module is None else module.get(METRIC_SCOPE)


def _flat(value: Any) -> list[Any]:
    """A tensor, array or nested list as one flat Python list."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [item for element in value for item in _flat(element)]
    return [value]


def _rewards(trajectory: Mapping[str, Any], group_size: int) -> tuple[list[float | None], list[str]]:
    """The members' rewards (a tensor dict's ``rewards``, or each interaction's ``reward``) and problems."""
    if not isinstance(trajectory, Mapping):
        return [None] * group_size, ["trajectory_not_a_mapping"]
    if "rewards" in trajectory:
        values = _flat(trajectory["rewards"])
    elif trajectory and all(hasattr(v, "reward") for v in trajectory.values()):
        values = [v.reward for v in trajectory.values()]
    else:
        return [None] * group_size, [_NO_REWARDS]
    rewards = [_number(v) for v in values] or [None]
    return rewards, [PARTIAL_GROUP] if len(rewards) < group_size else []


def _number(value: Any) -> float | None:
    """A reward as a float (a NaN stays one: the policy names it), ``None`` when it is no number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _generated_tokens(trajectory: Mapping[str, Any]) -> int:
    """The tokens the group decoded: the loss mask's ones (AReaL masks the prompt with zeros)."""
    mask = trajectory.get("loss_mask") if isinstance(trajectory, Mapping) else None
    return 0 if mask is None else int(sum(1 for v in _flat(mask) if v))


def _versions(trajectory: Mapping[str, Any]) -> list[int]:
    """The policy versions that generated the group's tokens (AReaL writes -1 for prompt tokens)."""
    versions = trajectory.get("versions") if isinstance(trajectory, Mapping) else None
    return [] if versions is None else sorted({int(v) for v in _flat(versions) if int(v) >= 0})


class AdmissionWorkflow:
    """
    A ``RolloutWorkflow`` that skips, before generation, the prompts the prompt history predicts dead.

    Args:
        workflow: The user's workflow (``RLVRWorkflow``, ...); it runs for every other prompt.
        admission: The :class:`AReaLAdmission` whose stream holds the history (the same one
            passed as ``should_accept_fn``).
        prompt_id_key: The data field that identifies a prompt (``"query_id"``).

    A skipped prompt returns ``None``: AReaL counts it as rejected and refills, and nothing
    was decoded for it. Pass this wrapper where AReaL takes the workflow; AReaL's
    ``GroupedRolloutWorkflow`` then runs it once per member, so the first member of a prompt
    asks the history and its other ``group_size - 1`` members get the same answer (a group is
    skipped whole, and counted once).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        workflow_api = find_host("areal.api.workflow_api", adapter=ADAPTER, versions=SUPPORTED_VERSIONS)
        if workflow_api is None:
            msg = f"{ADAPTER}.AdmissionWorkflow requires AReaL; install it with: pip install areal==1.0.4"
            raise ImportError(msg, name="areal")
        check_versions(ADAPTER, SUPPORTED_VERSIONS)
        return super().__new__(_workflow_class(workflow_api.RolloutWorkflow))

    def __init__(self, workflow: Any, admission: AReaLAdmission, *, prompt_id_key: str) -> None:
        if not isinstance(admission, AReaLAdmission):
            msg = f"'admission' must be an AReaLAdmission (got {describe(admission)})"
            raise TypeError(msg)
        if not isinstance(prompt_id_key, str) or not prompt_id_key:
            msg = f"'prompt_id_key' must be a non-empty string (got {describe(prompt_id_key)})"
            raise TypeError(msg)
        self.workflow, self.admission, self.prompt_id_key = workflow, admission, prompt_id_key
        self._asked: dict[Any, list[Any]] = {}  # prompt -> [skipped, members still to ask]
        self._lock = threading.Lock()

    async def arun_episode(self, engine: Any, data: Mapping[str, Any]) -> Any:
        """``None`` for a prompt the history skips, else the wrapped workflow's episode."""
        prompt_id = data.get(self.prompt_id_key) if isinstance(data, Mapping) else None
        if prompt_id is None:
            return await self.workflow.arun_episode(engine, data)
        if self._skipped(prompt_id):
            return None
        trajectory = await self.workflow.arun_episode(engine, data)
        if isinstance(trajectory, dict) and "input_ids" in trajectory:
            import torch  # noqa: PLC0415  (AReaL's trajectories are torch tensors)

            members = len(trajectory["input_ids"])
            index = self.admission.prompt_index(prompt_id)
            trajectory[PROMPT_KEY] = torch.full((members,), index, dtype=torch.int64)
        return trajectory

    def _skipped(self, prompt_id: Any) -> bool:
        """The history's answer for this prompt, asked by its first member and shared by the others."""
        with self._lock:
            entry = self._asked.get(prompt_id)
            if entry is None:
                entry = self._asked[prompt_id] = [self.admission.skip(prompt_id), self.admission.group_size]
            entry[1] -= 1
            if entry[1] <= 0:
                del self._asked[prompt_id]
            return bool(entry[0])


_CLASSES: dict[type, type] = {}


def _workflow_class(base: type) -> type:
    """:class:`AdmissionWorkflow` as a subclass of AReaL's ``RolloutWorkflow`` (built once)."""
    if base not in _CLASSES:
        _CLASSES[base] = type("AdmissionWorkflow", (AdmissionWorkflow, base), {"__module__": __name__})
    return _CLASSES[base]


_lock = threading.Lock()
_current: dict[str, AReaLAdmission] = {}


def current_admission() -> AReaLAdmission:
    """This process's :class:`AReaLAdmission`, built from ``GROUP_ADMISSION_AREAL`` on first use."""
    value = os.environ.get(SETTINGS_ENV, "")
    with _lock:
        if value not in _current:
            _current[value] = AReaLAdmission(read_settings_env(SETTINGS_ENV, value))
        return _current[value]


def should_accept(trajectory: Mapping[str, Any]) -> bool:
    """
    AReaL's ``should_accept_fn`` by import path: ``group_admission.adapters.areal.should_accept``.

    Judges with :func:`current_admission` (settings from ``GROUP_ADMISSION_AREAL``).
    """
    return current_admission()(trajectory)

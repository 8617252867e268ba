"""``query_filter`` and ``AdmissionGroupFilter`` over ``AdmissionSession``s, and reading ROLL's DataProtos."""

from __future__ import annotations

import numbers
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from ... import AdmissionStats
from .._kit import (
    AdapterSession,
    GroupInput,
    HoldsAdmission,
    SessionRegistry,
    describe,
    scalar_reward,
    settings_from,
)
from ._settings import RollAgenticSettings, RollRLVRSettings, agentic_settings, rlvr_settings

#: Prefix of the admission metrics written into kept groups' ``meta_info["metrics"]``.
METRIC_PREFIX = "group_admission/"


def leaves(data: Any) -> list[Any]:
    """The DataProtos of a (possibly nested) list, as ROLL's ``expand_responses`` accepts."""
    if not isinstance(data, list):
        return [data]
    return [leaf for item in data for leaf in leaves(item)]


def rows(data: Any) -> int | None:
    try:
        return len(data)
    except TypeError:
        return None


def _damage(data: Any) -> str | None:
    """Why ``data`` is not a usable DataProto (``"malformed"`` when it is none at all)."""
    if not (hasattr(data, "batch") and hasattr(data, "non_tensor_batch")):
        return "malformed"
    for part in ("batch", "non_tensor_batch"):
        if getattr(data, part) is None:  # ROLL allows either half to be None
            return f"missing_{part}"
    return None if rows(data) else "malformed"


def _column(container: Any, key: str, count: int | None = None) -> tuple[list[Any] | None, str | None]:
    """``container[key]`` as a flat list (of ``count`` values, when given), or a named problem."""
    try:
        values = container[key]
    except KeyError:
        return None, f"missing_{key}"
    except (TypeError, IndexError, AttributeError):
        return None, f"malformed_{key}"
    try:
        if hasattr(values, "detach"):
            values = values.detach()
        flat = list(values.reshape(-1).tolist()) if hasattr(values, "reshape") else list(values)
    except (TypeError, ValueError, AttributeError, RuntimeError):
        return None, f"malformed_{key}"
    if count is not None and len(flat) != count:
        return None, f"malformed_{key}"
    return flat, None


def response_text(data: Any, row: int) -> str | None:
    """The response tokens of one row, as text for the redundancy gate (token ids joined by spaces)."""
    try:
        ids = data.batch["input_ids"][row]
        mask = data.batch["response_mask"][row]
        return " ".join(str(token) for token in ids[mask.bool()].tolist())
    except (KeyError, IndexError, AttributeError, TypeError, RuntimeError):
        return None


def response_tokens(data: Any) -> int:
    """The response tokens of one DataProto: its ``response_mask`` summed (0 when it has none)."""
    if _damage(data) is not None:
        return 0
    values, problem = _column(data.batch, "response_mask")
    return 0 if problem else int(sum(1 for value in values or () if value))


def _add(out: GroupInput, value: Any, text: str | None, slot: int) -> None:
    reward, problem = scalar_reward(value)
    if problem is not None:
        out.external.append(problem)
    out.add(reward, text, slot)


def read_responses(data_list: Any, *, texts: bool = False) -> GroupInput:
    """One RLVR prompt's responses for the policy: a member per row of each DataProto."""
    out = GroupInput()
    for data in leaves(data_list):
        damage = _damage(data)
        if damage == "malformed":
            out.reject("malformed_response", len(out.rewards))
            continue
        count = rows(data) or 1
        values, problem = (None, damage) if damage else _column(data.batch, "response_level_rewards", count)
        if problem is not None:
            out.external.append(problem)
        for row, value in enumerate(values or [None] * count):
            _add(out, value, response_text(data, row) if texts else None, len(out.rewards))
    if not out.rewards:
        out.reject("malformed_group", 0)
    out.tokens = sum(response_tokens(data) for data in leaves(data_list))
    return out


def _token_sum(batch: Any) -> tuple[float | None, str | None]:
    """Token-level scores hold each step's reward at its last token: their sum is the episode score."""
    scores, problem = _column(batch, "scores")
    total = 0.0
    for value in scores or ():
        score, issue = scalar_reward(value)
        if score is None:
            return None, issue or "missing_token_score"
        total += score
    return (None, problem) if problem else (total, None)


def _trajectory(out: GroupInput, slot: int, data: Any, texts: bool) -> None:
    damage = _damage(data)
    if damage is not None:
        out.reject("malformed_trajectory" if damage == "malformed" else damage, slot)
        return
    meta = getattr(data, "meta_info", None)
    if isinstance(meta, Mapping) and meta.get("drop_flag", False):
        out.external.append("drop_flag")
    text = None
    if texts:
        parts = [response_text(data, row) for row in range(rows(data) or 0)]
        text = None if None in parts else " ".join(parts)  # type: ignore[arg-type]
    # Every row of a multi-step trajectory carries the episode score; the policy checks they agree.
    values, problem = _column(data.non_tensor_batch, "episode_scores")
    if problem == "missing_episode_scores":
        total, problem = _token_sum(data.batch)
        values = [total]
    if problem is not None:
        out.external.append(problem)
    for value in values if problem is None and values else [None]:
        _add(out, value, text, slot)


def read_trajectories(group: Any, *, texts: bool = False) -> GroupInput:
    """One agentic group for the policy: a rollout per trajectory, scored by its episode score."""
    out = GroupInput()
    if isinstance(group, (str, bytes)) or not isinstance(group, Sequence) or not group:
        out.reject("malformed_group", 0)
        return out
    for slot, data in enumerate(group):
        if data is None:
            out.reject("missing_trajectory", slot)
        else:
            _trajectory(out, slot, data, texts)
            out.tokens += response_tokens(data)
    return out


def domain_of(data_list: Any, domains: Sequence[str] = ()) -> str:
    """The reward domain the responses name; if none does (damaged data), the only one of ``domains``."""
    found = leaves(data_list)
    for data in found:
        names, _ = _column(getattr(data, "non_tensor_batch", None), "domain")
        if names:
            return str(names[0])
    if found and len(domains) == 1:
        return domains[0]
    msg = f"'data_list' must hold DataProtos with a non_tensor_batch 'domain' (got {describe(data_list)})"
    raise ValueError(msg)


def global_step(value: Any) -> int | str | None:
    """A step label for the session: ``meta_info["global_step"]`` of a context or the first response."""
    if not isinstance(value, Mapping):
        value = getattr(next(iter(leaves(value)), None), "meta_info", None)
    step = value.get("global_step") if isinstance(value, Mapping) else None
    if step is None or isinstance(step, str):
        return step
    if isinstance(step, numbers.Integral) and not isinstance(step, bool):
        return int(step)
    return repr(step)  # any other label still keeps its own step window


def keep(
    runtime: AdapterSession[RollRLVRSettings] | AdapterSession[RollAgenticSettings],
    group: GroupInput,
    kept: Any,
    *,
    step: int | str | None = None,
) -> bool:
    """The session's verdict on ``group``; a kept group carries the counts judged since the last one."""
    if not group.judge(runtime.session, step=step).keep:
        return False
    carriers = [leaf for leaf in leaves(kept) if isinstance(getattr(leaf, "meta_info", None), dict)]
    if not carriers:
        return True  # the counts ride on the next kept group
    carrier = next((leaf for leaf in carriers if rows(leaf) == 1), carriers[0])
    # ROLL reduces each metrics key over the batch by its '@' suffix: the '@sum' counts
    # of one carrier per kept group add up to the groups judged for the batch.
    metrics = runtime.window.close(METRIC_PREFIX, count_suffix="@sum", rates=False)
    # Rows of one prompt share a meta_info dict: give the carrier its own, so that the
    # counts appear once in the batch rather than once per row.
    existing = carrier.meta_info.get("metrics")
    carrier.meta_info = {
        **carrier.meta_info,
        "metrics": {**(existing if isinstance(existing, Mapping) else {}), **metrics},
    }
    return True


# One session per reward domain and settings, for the process.
_RLVR: SessionRegistry[AdapterSession[RollRLVRSettings]] = SessionRegistry()


def rlvr_runtime(pipeline_config: Any, domain: str) -> AdapterSession[RollRLVRSettings]:
    """The session of ``domain``'s settings in ``pipeline_config``, built on first use."""
    raw, source = rlvr_settings(pipeline_config, domain)
    return _RLVR.get(
        raw,
        lambda: AdapterSession(settings_from(RollRLVRSettings, raw, source), host="ROLL RLVR"),
        scope=domain,
    )


def admit(
    data_list: Any,
    config: Any,
    *,
    step: int | str | None,
    domain: str | None = None,
    group_key: Hashable = None,
) -> bool:
    """Whether ROLL keeps one prompt's responses (``domain``: read from them when not given)."""
    rewards = getattr(config, "rewards", None)
    domain = domain or domain_of(data_list, list(rewards) if isinstance(rewards, Mapping) else [])
    runtime = rlvr_runtime(config, domain)
    group = read_responses(data_list, texts=runtime.texts)
    group.group_key = group_key
    return keep(runtime, group, data_list, step=step)


def query_filter(data_list: Any, config: Any) -> bool:
    """
    Judge one prompt's responses: a drop-in for ROLL's ``query_filter`` (True keeps).

    Settings and limits are those of :class:`AdmissionRolloutLoop`.

    Raises:
        ValueError: the responses name no ``domain`` (and the config has several), or the
            domain has no reward config.
        ConsecutiveFailedGroupsError: too many external rejections in a row.

    .. versionadded:: 0.1.0
    """
    return admit(data_list, config, step=global_step(data_list))


def admission_stats(domain: str | None = None) -> AdmissionStats:
    """
    The RLVR counts of this process (of one reward domain, if given).

    .. versionadded:: 0.1.0
    """
    return _RLVR.stats(domain)


def reset() -> None:
    """
    Forget every RLVR session and its counts (for tests and notebooks).

    .. versionadded:: 0.2.0
    """
    _RLVR.reset()


class AdmissionGroupFilter(HoldsAdmission):
    """
    ROLL's agentic ``GroupFilter`` over the admission policy: ``filter`` returns True to drop.

    ROLL builds one per scheduler mode; each has a session whose drop limit spans its
    lifetime. Outside the settings' ``modes`` nothing is dropped or counted.

    Raises:
        TypeError, ValueError: ``GROUP_ADMISSION_ROLL_CONFIG`` holds invalid settings.
        FileNotFoundError: it names a YAML file that does not exist.

    .. versionadded:: 0.1.0
    """

    def __init__(self, config: Any, env_manager_config: Any, mode: str) -> None:
        self.config = config
        self.env_manager_config = env_manager_config
        self.mode = mode
        self.settings = agentic_settings(config, env_manager_config)
        self.admission = AdapterSession(self.settings, host="ROLL agentic")

    def filter(self, group_id: int, episode_id: int, group: list[Any]) -> bool:
        """Judge one trajectory group: True drops it (ROLL starts a new episode), False keeps it."""
        if self.mode not in self.settings.modes:
            return False
        trajectories = read_trajectories(group, texts=self.admission.texts)
        trajectories.group_key = (group_id, episode_id)
        return not keep(self.admission, trajectories, group if isinstance(group, list) else [])

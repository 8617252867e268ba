"""
Reading verl's trajectories into admission groups. Pure translation: no verl import, no gate rule.

verl's v1 replay buffer keys each trajectory ``{uid}_{session_id}_{index}``: ``uid`` is the
prompt (the group key), ``session_id`` one of its ``rollout.n`` samples, ``index`` one
output of a multi-output agent loop. Outputs of one session are segments of one rollout:
they share its reward and count once.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from ... import ConfigurationError
from .._kit import UNSUMMABLE_REWARD, scalar_reward
from ._settings import CANONICAL_REWARD

__all__ = [
    "GroupRewards",
    "build_group",
    "component_value",
    "keys_by_uid",
    "launched_sessions",
    "no_trajectories",
    "split_key",
]


def split_key(key: str) -> tuple[str, str, str]:
    """Split a trajectory key into ``(uid, session_id, index)``, as verl's advantage code does."""
    uid, session, index = key.rsplit("_", 2)
    return uid, session, index


def keys_by_uid(keys: Iterable[str], uids: Iterable[str]) -> dict[str, list[str]]:
    """The trajectory keys of each of ``uids`` (sorted, so reads are deterministic)."""
    wanted = set(uids)
    grouped: dict[str, list[str]] = defaultdict(list)
    for key in keys:
        # verl takes the uid as the text before the first underscore; so do we.
        uid = key.split("_")[0]
        if uid in wanted:
            grouped[uid].append(key)
    return {uid: sorted(grouped[uid]) for uid in grouped}


def component_value(name: str, extra_fields: Any, rm_scores: Any) -> Any:
    """
    One trajectory's value of the reward component ``name``, unconverted.

    ``reward`` is verl's canonical reward, the sum of ``rm_scores`` (exactly what verl's
    DAPO filter reads for ``metric=reward``); any other name is read from
    ``extra_fields["reward_extra_info"]``.

    Raises:
        ConfigurationError: ``reward_extra_info`` has no ``name``: ``gate_on`` names a
            component the reward manager does not write (verl's own filter raises too).
    """
    if name == CANONICAL_REWARD:
        return None if rm_scores is None else float(rm_scores.sum().item())
    fields = getattr(extra_fields, "data", extra_fields)
    info = fields.get("reward_extra_info", {}) if isinstance(fields, Mapping) else {}
    if name not in info:
        msg = (
            f"reward component {name!r} (policy.gate_on) is not in the trajectory's reward_extra_info "
            f"(has: {sorted(info)}); name a component your reward manager writes, or 'reward'"
        )
        raise ConfigurationError(msg)
    return info[name]


@attrs.frozen(kw_only=True)
class GroupRewards:
    """One uid group, ready for the session: a value per component and rollout id per row."""

    uid: str
    components: dict[str, list[float | None]]
    rollout_ids: list[str]
    external: tuple[str, ...]
    generated_tokens: int

    @property
    def sessions(self) -> int:
        """The sessions that wrote a trajectory (a multi-output session counts once)."""
        return len(set(self.rollout_ids))


def no_trajectories(uid: str, names: Sequence[str]) -> GroupRewards:
    """
    A group that wrote nothing (every session failed): one missing value per component.

    The policy rejects it as ``external`` with the detail ``no_trajectories``.
    """
    return GroupRewards(
        uid=uid,
        components={name: [None] for name in names},
        rollout_ids=[],
        external=("no_trajectories",),
        generated_tokens=0,
    )


def launched_sessions(written: int, *, failed: bool, expected: int) -> int:
    """
    The sessions verl ran for a group: the samples it cost.

    A finished group ran the sessions it wrote. A failed session writes nothing, so a
    ``failure`` group (or one that wrote nothing) ran ``expected`` sessions (verl's
    ``rollout.n``), and always at least one more than it wrote.
    """
    if written and not failed:
        return written
    return max(written + int(failed), expected, 1)


def build_group(
    uid: str,
    keys: Sequence[str],
    rows: Sequence[tuple[Any, Any]],
    names: Sequence[str],
    tags: Mapping[str, Mapping[str, Any]],
) -> GroupRewards:
    """
    Translate the fetched rows of one group (``(extra_fields, rm_scores)`` per key).

    A value that is not a number becomes a missing member with a named external reason,
    which the policy turns into an ``external`` rejection; so does a trajectory whose
    trained reward (``rm_scores`` summed) is not finite while ``gate_on`` reads other
    components (``unsummable_reward``).
    """
    components: dict[str, list[float | None]] = {name: [] for name in names}
    external: list[str] = []
    for extra_fields, rm_scores in rows:
        for name in names:
            value, problem = scalar_reward(component_value(name, extra_fields, rm_scores))
            if problem is not None and problem not in external:
                external.append(problem)
            components[name].append(value)
        trained = component_value(CANONICAL_REWARD, extra_fields, rm_scores)
        unsummable = CANONICAL_REWARD not in names and trained is not None and not math.isfinite(trained)
        if unsummable and UNSUMMABLE_REWARD not in external:
            external.append(UNSUMMABLE_REWARD)  # the gate passes it; verl's advantages would be NaN
    sessions = [split_key(key)[1] for key in keys]
    tokens = sum(int(tags.get(key, {}).get("response_len", 0) or 0) for key in keys)
    return GroupRewards(
        uid=uid,
        components=components,
        rollout_ids=sessions,
        external=tuple(external),
        generated_tokens=tokens,
    )

"""
The prompt history in slime's streaming rollout: which drawn prompts to launch, what each group says.

With a ``history`` setting, each launch draws prompts from slime's data source and
launches those :meth:`PromptHistory.pick` keeps at the rollout (the step is slime's
``rollout_id``); every judged group is observed. A skipped prompt is used up for this pass
over the data, as in every host: it comes back in slime's next epoch. The checkpoint is
``_streaming_checkpoint``'s. No slime import.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import attrs
import structlog

from ... import GroupAdmissionDecision
from .._kit import PromptId, PromptScan, build_history, check_prompt_id, history_metrics
from ._groups import leaves

__all__ = ["PickTally", "StreamPrompts", "prompt_id"]

_log = structlog.get_logger("group_admission.adapters.slime")


def prompt_id(group: Any, key: str | None) -> PromptId | None:
    """
    The prompt a slime group was drawn from, or ``None`` when its samples do not name one.

    ``key``: the ``Sample.metadata`` entry that holds it; ``None``: a 64-bit hash of the
    first sample's ``prompt`` and ``label`` (the same in every epoch, whatever its
    ``group_index``, which slime numbers per draw).
    """
    first = next(leaves(group), None)
    if first is None:
        return None
    if key is None:
        text = json.dumps([getattr(first, "prompt", None), getattr(first, "label", None)], default=repr)
        digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)
    metadata = getattr(first, "metadata", None)
    if not isinstance(metadata, Mapping) or key not in metadata:
        return None
    try:
        return check_prompt_id(metadata[key], f"metadata[{key!r}]")
    except (TypeError, ValueError):
        return None


@attrs.define
class PickTally:
    """One rollout's prompts: skipped, taken unpicked, and not named."""

    skipped: int = 0
    forced: int = 0
    unnamed: int = 0


class StreamPrompts:
    """
    One streaming configuration's prompt history: the picks, the observations and the checkpoint.

    Args:
        section: The ``history`` setting (``PromptHistoryConfig`` fields without ``group_size``).
        key: The ``prompt_id_key`` setting.
        group_size: slime's ``n_samples_per_prompt``.
        seed: The picks' seed unless ``section`` sets one (slime's ``rollout_seed``).
    """

    def __init__(self, section: Mapping[str, Any], key: str | None, group_size: int, seed: int) -> None:
        self.history = build_history(section, group_size, seed=seed)
        self.key = key
        self._scan = PromptScan()
        self._unnamed_warned = False

    def draw(self, data_source: Any, count: int, rollout_id: int, tally: PickTally) -> list[Any]:
        """
        ``count`` groups to launch: the next prompts of the data source that the history keeps.

        A skipped prompt is used up. Once a rollout has looked at a whole pass of the data
        source's named prompts (``len(data_source)``) the rest are taken as drawn (``forced``:
        the kit's :class:`PromptScan`), so a history that believes every prompt dead cannot
        stall the rollout; a group whose prompt is not named is launched unpicked and not
        observed (``unnamed``).
        """
        chosen: list[Any] = []
        pass_length = max(_length(data_source), count)
        while len(chosen) < count:
            groups = list(data_source.get_samples(count - len(chosen)))
            if not groups:
                break  # a custom data source that ran dry: launch what there is
            ids = [prompt_id(group, self.key) for group in groups]
            named = [prompt for prompt in ids if prompt is not None]
            keeps = iter(self._scan.keep(self.history, named, step=rollout_id, pass_length=pass_length))
            chosen += [
                group for group, prompt in zip(groups, ids, strict=True) if prompt is None or next(keeps)
            ]
            tally.unnamed += len(ids) - len(named)
        skipped, forced = self._scan.take_counts()
        tally.skipped, tally.forced = tally.skipped + skipped, tally.forced + forced
        if tally.unnamed and not self._unnamed_warned:
            self._unnamed_warned = True
            _log.warning(
                "group_admission_prompt_unnamed",
                prompt_id_key=self.key,
                hint="the history names prompts by this Sample.metadata key: a str or an int",
            )
        return chosen

    def observe(self, group: Any, decision: GroupAdmissionDecision, rollout_id: int) -> None:
        """Record a judged group of a named prompt (an external rejection records nothing)."""
        prompt = prompt_id(group, self.key)
        if prompt is not None:
            self.history.observe(prompt, decision, step=rollout_id)

    def metrics(self, tally: PickTally, rollout_id: int, prefix: str) -> dict[str, int | float]:
        """The rollout's history metrics (:func:`history_metrics`)."""
        return history_metrics(
            self.history,
            step=rollout_id,
            prefix=prefix,
            skipped=tally.skipped,
            forced=tally.forced,
            unnamed=tally.unnamed,
        )


def _length(data_source: Any) -> int:
    """The prompts in one pass of the data source (0 when it cannot say)."""
    try:
        return max(0, len(data_source))
    except TypeError:
        return 0

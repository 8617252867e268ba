"""
RAGEN's group selection (``RolloutFilter._select_top_groups``), restricted to candidate groups.

The semantics follow RAGEN ``mll-lab-nu/RAGEN@20daedc`` (``ragen/trainer/rollout_filter.py``)
exactly, including its float32 arithmetic and tie order, so that with every group a
candidate the selection equals RAGEN's. Groups the admission gates rejected are removed
from the candidates the same way RAGEN removes zero-score groups when ``include_zero`` is
false: they can never be selected, and fractions (``top_k``) still count every group.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from .._validation import as_float, check_finite, check_ge, check_one_of, check_real, describe

__all__ = ["ZERO_SCORE", "RagenSelection", "select_groups"]

#: RAGEN treats a group score with ``abs(score) <= ZERO_SCORE`` as zero.
ZERO_SCORE = 1e-10

Strategy = Literal["top_p", "top_k", "top_k_abs", "min_p"]
FilterType = Literal["largest", "smallest"]
TopPMode = Literal["linear", "softmax"]
Metric = Literal["reward", "reward_sum", "reward_variance"]

_STRATEGIES = ("top_p", "top_k", "top_k_abs", "min_p")
_FILTER_TYPES = ("largest", "smallest")
_TOP_P_MODES = ("linear", "softmax")
_METRICS = ("reward", "reward_sum", "reward_variance")
# RAGEN's build_rollout_filter lower-cases the metric and accepts this alias.
_METRIC_ALIASES = {"reward_std": "reward_variance"}


def _check_bool(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        msg = f"'{attribute.name}' must be a bool (got {describe(value)})"
        raise TypeError(msg)


def _normalise_metric(value: object) -> object:
    if isinstance(value, str):
        lowered = value.lower()
        return _METRIC_ALIASES.get(lowered, lowered)
    return value


def _as_bool(value: object) -> object:
    # numpy bools arrive from YAML/OmegaConf round trips; anything else is left to the validator.
    return bool(value) if type(value).__name__ == "bool_" else value


@attrs.frozen(kw_only=True)
class RagenSelection:
    """
    RAGEN's selection parameters, applied to the groups the admission gates admitted.

    Each field has the meaning of the RAGEN config key ``actor_rollout_ref.rollout.
    rollout_filter_<field>`` (``strategy`` is set through the adapter's own
    ``group_admission.selection`` key, because ``rollout_filter_strategy`` selects the
    adapter itself).

    Args:
        strategy: ``top_p`` (nucleus over scores), ``top_k`` (the best
            ``int(value * num_groups)`` groups), ``top_k_abs`` (the best ``int(value)``
            groups) or ``min_p`` (groups within a factor ``value`` of the best score).
        value: The strategy's parameter. ``top_p`` with ``value >= 1`` keeps every
            candidate.
        filter_type: ``largest`` keeps high scores, ``smallest`` low ones.
        include_zero: When false, groups whose score is within ``1e-10`` of zero are never
            selected.
        top_p_prob_mode: ``linear`` (cumulative score mass) or ``softmax`` (cumulative
            softmax probability) for ``top_p``.
        selection_eps: Slack subtracted from the ``linear`` top-p threshold.
        metric: The group score: ``reward_variance`` (alias ``reward_std``; the sample
            standard deviation, as RAGEN computes it), ``reward`` (mean) or
            ``reward_sum``.

    .. versionadded:: 0.1.0
    """

    strategy: Strategy = attrs.field(default="top_p", validator=check_one_of(_STRATEGIES))
    value: float = attrs.field(
        default=1.0, converter=as_float, validator=(check_real, check_finite, check_ge(0))
    )
    filter_type: FilterType = attrs.field(default="largest", validator=check_one_of(_FILTER_TYPES))
    include_zero: bool = attrs.field(default=True, converter=_as_bool, validator=_check_bool)
    top_p_prob_mode: TopPMode = attrs.field(default="linear", validator=check_one_of(_TOP_P_MODES))
    selection_eps: float = attrs.field(
        default=0.01, converter=as_float, validator=(check_real, check_finite, check_ge(0))
    )
    metric: Metric = attrs.field(
        default="reward_variance", converter=_normalise_metric, validator=check_one_of(_METRICS)
    )

    @property
    def keeps_all(self) -> bool:
        """Whether this selection keeps every candidate (RAGEN's "no filter" setting)."""
        return self.strategy == "top_p" and self.value >= 1.0 and self.include_zero

    def to_dict(self) -> dict[str, Any]:
        """Return the parameters as a plain dict."""
        return attrs.asdict(self)


def _top_p(torch: Any, scores: Any, indices: Any, selection: RagenSelection) -> Any:
    if selection.value >= 1.0:
        return indices
    largest = selection.filter_type == "largest"
    if selection.top_p_prob_mode == "softmax":
        probabilities = torch.softmax(scores if largest else -scores, dim=0)
        ordered, order = torch.sort(probabilities, descending=True)
        cutoff = int(torch.searchsorted(torch.cumsum(ordered, dim=0), selection.value).item())
        # At least one group: the cut-off position itself is kept.
        return indices[order[: min(cutoff + 1, indices.numel())]]
    ordered, order = torch.sort(scores, descending=largest)
    # A float32 tensor, compared against the running total exactly as RAGEN does.
    threshold = selection.value * scores.sum() - selection.selection_eps
    total = 0.0
    taken = 0
    for score in ordered.tolist():
        if total >= threshold or score <= 0:
            break
        total += score
        taken += 1
    if total >= threshold:
        return indices[order[:taken]]
    return torch.empty(0, dtype=torch.long, device=indices.device)


def _top_k(torch: Any, scores: Any, indices: Any, k: int, selection: RagenSelection) -> Any:
    k = max(min(k, indices.numel()), 1)
    signed = scores if selection.filter_type == "largest" else -scores
    return indices[torch.topk(signed, k).indices]


def _min_p(scores: Any, indices: Any, selection: RagenSelection) -> Any:
    if selection.filter_type == "largest":
        keep = scores >= scores.max() * selection.value - ZERO_SCORE
    else:
        keep = scores <= scores.min() / (selection.value + ZERO_SCORE) + ZERO_SCORE
    return indices[keep]


def select_groups(torch: Any, scores: Any, selection: RagenSelection, *, candidates: Any = None) -> Any:
    """
    Return the indices of the selected groups, in RAGEN's order.

    Args:
        torch: The torch module.
        scores: One score per group (1-D tensor).
        selection: The selection parameters.
        candidates: Boolean tensor marking the groups that may be selected (``None``:
            every group, which reproduces RAGEN's ``_select_top_groups``).

    Returns:
        A ``torch.long`` tensor of group indices (empty when nothing is selected).
    """
    scores = scores.float()
    num_groups = scores.numel()
    indices = torch.arange(num_groups, device=scores.device)
    keep = torch.ones(num_groups, dtype=torch.bool, device=scores.device)
    if candidates is not None:
        keep &= candidates.to(device=scores.device, dtype=torch.bool)
    if not selection.include_zero:
        keep &= torch.abs(scores) > ZERO_SCORE
    if not bool(keep.all()):
        scores, indices = scores[keep], indices[keep]
    if indices.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=scores.device)
    if selection.strategy == "top_p":
        return _top_p(torch, scores, indices, selection)
    if selection.strategy == "top_k":
        # A fraction of every group, not of the candidates, exactly as RAGEN counts it.
        return _top_k(torch, scores, indices, int(selection.value * num_groups), selection)
    if selection.strategy == "top_k_abs":
        return _top_k(torch, scores, indices, int(selection.value), selection)
    return _min_p(scores, indices, selection)

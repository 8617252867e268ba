"""What a policy and a budget config will do, in plain words (``group-admission explain``)."""

from __future__ import annotations

from . import _checks
from ._budget import SamplingBudgetConfig
from ._config import GroupAdmissionConfig
from ._reasons import RejectionReason

__all__ = ["explain_budget", "explain_policy"]


def _number(value: float) -> str:
    return f"{value:g}"


def explain_policy(config: GroupAdmissionConfig) -> list[str]:
    """What each admission gate of ``config`` will do, one line each (a line per check of the table)."""
    gated = (
        "the sum of all reward components"
        if config.gate_on is None
        else f"the sum of the reward component(s) {', '.join(config.gate_on)}"
    )
    lines = [f"Policy: every check looks at the gated reward, {gated}; groups are judged whole."]
    table = _checks.TABLE
    lines += [f"  - {check.describe(config)}" for check in (*table.reward, table.similarity)]
    if config.reward_gate_enabled:
        given = {check.reason for check in table.reward if check.enabled(config)}
        reasons = " or ".join(reason.value for reason in RejectionReason if reason in given)
        lines.append(
            "  A group whose gated rewards are all identical is rejected as "
            f"{RejectionReason.EXACT_DEAD.value}; one whose rewards differ but fail a reward gate is "
            f"rejected as {reasons}."
        )
    else:
        lines.append("  No reward gate is on: every well-formed group passes the reward checks.")
    lines.append(
        "  Missing or non-finite rewards, and caller-supplied reasons, reject a group as "
        f"{RejectionReason.EXTERNAL.value} (counted, never raised)."
    )
    return lines


def _cap(value: int | None, text: str, none_text: str) -> str:
    return f"  - {text.format(value)}" if value is not None else f"  - {none_text}"


def explain_budget(config: SamplingBudgetConfig) -> list[str]:
    """What each budget cap of ``config`` will do, one line each."""
    lines = [
        "Budget: the controller plans extra groups of a step until its target of admitted groups is met."
    ]
    if config.max_extra_groups == 0 or config.max_resample_rounds == 0:
        lines.append(
            "  - resampling is disabled (max_extra_groups or max_resample_rounds is 0): every plan after "
            "the first round is exhausted unless the target is already met."
        )
    lines.append(
        f"  - at most {config.max_extra_groups} group(s) beyond the target per step "
        f"(a step generates at most target + {config.max_extra_groups} groups)."
    )
    lines.append(f"  - at most {config.max_resample_rounds} resample round(s) after the first.")
    lines.append(
        _cap(config.max_extra_groups_per_round, "at most {} group(s) per round.", "no per-round group cap.")
    )
    lines.append(_cap(config.max_total_samples, "at most {} samples per step.", "no sample cap."))
    lines.append(
        _cap(
            config.max_total_tokens,
            "at most {} tokens per step, checked against the tokens per group observed so far "
            "(or the caller's estimate).",
            "no token cap.",
        )
    )
    lines.append(
        f"  - rate estimate: moving average (alpha {_number(config.effective_rate_ema_alpha)}) of the "
        "share of judged groups admitted per round (the first round sets it), floored at "
        f"{_number(config.min_effective_rate)}."
    )
    if config.mode == "expected":
        lines.append("  - expected mode: a round asks for ceil(remaining / rate) groups.")
    else:
        lines.append(
            "  - confidence mode: a round asks for the smallest n with "
            f"P[Binomial(n, rate) >= remaining] >= {_number(config.confidence)}, never fewer than "
            "ceil(remaining / rate): more groups per round, fewer rounds."
        )
    lines.append(
        "  When a cap leaves no room before the target is met, the plan is exhausted and names the "
        "cap(s) in limited_by: train on fewer groups, skip the step, or stop; it never waits."
    )
    return lines

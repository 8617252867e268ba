"""
The cookbook's statistics: one Student t quantile and one paired interval.

Both GRPO harnesses report with them: the ablation (``grpo_gsm8k.ablation_report``) and the
learning bench (``learning_bench.report``, also on the log ratios of its token ratios). No
scipy in the cookbook: the quantile is tabulated, then an expansion.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["paired", "spread", "t95"]

#: Two-sided 95% quantiles of Student's t for 1 to 14 degrees of freedom (exact to 3 decimals).
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145)
_Z975 = 1.959964  # the normal's 97.5% quantile


def t95(df: int) -> float:
    """
    The two-sided 95% quantile of Student's t with ``df`` degrees of freedom (NaN below 1).

    Tabulated up to 14; from 15 on, the Cornish-Fisher expansion to third order in ``1/df``,
    within 0.001 of the exact value there and closer as ``df`` grows.
    """
    if df < 1:
        return math.nan
    if df <= len(_T95):
        return _T95[df - 1]
    z = _Z975
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def spread(values: Sequence[float]) -> dict[str, float]:
    """Mean, sample std (ddof 1; 0 for one value), min and max."""
    array = np.asarray(values, dtype=float)
    std = float(array.std(ddof=1)) if len(array) > 1 else 0.0
    return {"mean": float(array.mean()), "std": std, "min": float(array.min()), "max": float(array.max())}


def paired(values: Sequence[float]) -> dict[str, float | None]:
    """
    Mean and sample std of paired differences with the 95% t interval of their mean.

    The interval is ``mean ± t95(n - 1) · std / √n``; from one value it is ``None``.
    """
    array = np.asarray(values, dtype=float)
    mean = float(array.mean())
    if len(array) < 2:
        return {"mean": mean, "std": 0.0, "ci95_low": None, "ci95_high": None}
    std = float(array.std(ddof=1))
    half = t95(len(array) - 1) * std / math.sqrt(len(array))
    return {"mean": mean, "std": std, "ci95_low": mean - half, "ci95_high": mean + half}

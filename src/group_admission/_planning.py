"""
The arithmetic of a resampling plan: argument checks, exact caps, and how many groups to ask for.

Caps and the expected-mode request are computed in exact integer arithmetic, so that no
legal budget (a huge token cap, a tiny estimate per group, a huge target) can overflow a
float or round a cap up past its budget.

``binomial_groups_needed`` answers confidence mode. Planning calls it on every round, so it
must answer in well under a millisecond for every legal input, however small the rate or
large the target. The answer is exact while the binomial's spread near it is small
(``remaining * (1 - rate) <= 64``): a false-position search over ``n`` whose every tail
evaluation sums pmf terms outward from the boundary and stops once they are negligible, a
few hundred terms at most. Beyond that, it is the Cornish-Fisher expansion of the negative
binomial quantile (the number of trials until ``remaining`` successes), which costs the
same for any size and was never more than one group off the exact answer on a grid of
targets up to 3,000 and rates from 0.02. Only an absurdly small rate (``remaining / rate``
beyond ``2**900``, where no cap leaves room anyway) takes the approximation with a small
target.
"""

from __future__ import annotations

import math
import numbers

from ._validation import check_count, check_probability, describe, is_finite, is_real

__all__ = [
    "binomial_groups_needed",
    "check_tokens_per_group",
    "groups_expected",
    "groups_within",
]

# Exact below this variance of successes near the answer; above, the Cornish-Fisher
# expansion (skewness at most 2 / sqrt(64) = 0.25) is accurate to a fraction of a group.
_EXACT_VARIANCE = 64.0
# False-position steps before the search falls back to bisection.
_INTERPOLATIONS = 16
# A pmf term this small relative to the running sum cannot change it.
_NEGLIGIBLE = 1e-17
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# ``log(remaining / rate)`` below which every ``n`` the exact search visits is a safe float.
_LOG_FLOAT_ROOM = 900 * math.log(2)


def _stirling_error(x: int) -> float:
    """``lgamma(x + 1) - ((x + 0.5) * log(x) - x + log(sqrt(2 pi)))``, without cancellation."""
    if x < 16:
        return math.lgamma(x + 1) - (x + 0.5) * math.log(x) + x - _HALF_LOG_2PI
    inverse = 1.0 / x
    square = inverse * inverse
    return inverse * (1 / 12 - square * (1 / 360 - square * (1 / 1260 - square / 1680)))


def _log_choose(n: int, k: int) -> float:
    """``log(comb(n, k))``, accurate to a few ulps even for ``n`` near 2**60."""
    small, large = min(k, n - k), max(k, n - k)
    if small == 0:
        return 0.0
    if small < 16:
        return math.fsum(math.log(n - i) for i in range(small)) - math.lgamma(small + 1)
    # lgamma(n + 1) - lgamma(large + 1) through Stirling's series: the two huge terms of
    # each lgamma cancel analytically instead of in floating point.
    head = -(large + 0.5) * math.log1p(-small / n) + small * math.log(n) - small
    return head + _stirling_error(n) - _stirling_error(large) - math.lgamma(small + 1)


def _pmf(n: int, rate: float, k: int) -> float:
    log_pmf = _log_choose(n, k) + k * math.log(rate) + (n - k) * math.log1p(-rate)
    return math.exp(log_pmf)


def _tail(n: int, rate: float, remaining: int) -> float:
    """``P[Binomial(n, rate) >= remaining]``, summed from the boundary into the shorter tail."""
    if remaining > n:
        return 0.0
    odds = rate / (1.0 - rate)
    if remaining > n * rate:  # above the mean: the upper tail's terms shrink from the boundary on
        k, term = remaining, _pmf(n, rate, remaining)
        total = term
        while k < n and term > _NEGLIGIBLE * total:
            term *= (n - k) / (k + 1) * odds
            k += 1
            total += term
        return min(1.0, total)
    k = remaining - 1  # at or below the mean: one minus the lower tail, which shrinks downwards
    term = _pmf(n, rate, k)
    total = term
    while k > 0 and term > _NEGLIGIBLE * total:
        term *= k / ((n - k + 1) * odds)
        k -= 1
        total += term
    return max(0.0, 1.0 - total)


def _exact(remaining: int, rate: float, confidence: float) -> int:
    """
    The smallest ``n``: a bracket around the approximation, then Illinois false position.

    The tail grows with ``n``, so ``[low, high]`` always brackets the answer (below the
    confidence at ``low``, at or above it at ``high``). The bracket starts half a standard
    deviation either side of :func:`_approximate` and widens until it holds; inside it the
    tail is nearly linear, so interpolation takes a handful of evaluations where plain
    bisection over ``n ~ remaining / rate`` would take up to forty.
    """
    guess = _approximate(remaining, rate, confidence)
    step = max(1, math.ceil(math.sqrt(remaining * (1.0 - rate)) / rate / 2))
    low, high = max(remaining - 1, guess - step), guess + step
    gap_low = _gap(low, rate, remaining, confidence)
    while gap_low >= 0:
        high, step = low, step * 2
        low = max(remaining - 1, low - step)
        gap_low = _gap(low, rate, remaining, confidence)
    gap_high = _gap(high, rate, remaining, confidence)
    while gap_high < 0:
        low, gap_low, step = high, gap_high, step * 2
        high += step
        gap_high = _gap(high, rate, remaining, confidence)
    moved = steps = 0
    while high - low > 1:
        steps += 1
        if steps > _INTERPOLATIONS:  # a safeguard: bisection always finishes in log2(width) steps
            middle = (low + high) // 2
        else:
            middle = low + int((high - low) * (gap_low / (gap_low - gap_high)))
            middle = min(max(middle, low + 1), high - 1)
        gap = _gap(middle, rate, remaining, confidence)
        if gap >= 0:
            high, gap_high = middle, gap
            if moved == 1:  # Illinois: the low end stayed twice, so damp it
                gap_low /= 2
            moved = 1
        else:
            low, gap_low = middle, gap
            if moved == -1:
                gap_high /= 2
            moved = -1
    return high


def _gap(n: int, rate: float, remaining: int, confidence: float) -> float:
    """How far the tail at ``n`` is above the confidence (negative: below it)."""
    return (0.0 if n < remaining else _tail(n, rate, remaining)) - confidence


def _normal_quantile(probability: float) -> float:
    """The standard normal quantile (Acklam's approximation, refined by one Halley step)."""
    a = (-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.3577518672690, -30.66479806614716)
    b = (-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572)
    c = (-7.784894002430293e-03, -0.3223964580411365, -2.400758277161838, -2.549732539343734)
    d = (7.784695709041462e-03, 0.3224671290700398, 2.445134137142996, 3.754408661907416)
    tail = min(probability, 1.0 - probability)
    if tail < 0.02425:
        s = math.sqrt(-2.0 * math.log(tail))
        x = (
            ((((c[0] * s + c[1]) * s + c[2]) * s + c[3]) * s + 2.938163982698783) * s + 4.374664141464968
        ) / ((((d[0] * s + d[1]) * s + d[2]) * s + d[3]) * s + 1.0)
        x = x if probability < 0.5 else -x
    else:
        s = probability - 0.5
        t = s * s
        x = (
            (((((a[0] * t + a[1]) * t + a[2]) * t + a[3]) * t + a[4]) * t + 2.506628274631000)
            * s
            / (((((b[0] * t + b[1]) * t + b[2]) * t + b[3]) * t + b[4]) * t + 1.0)
        )
    error = 0.5 * math.erfc(-x / math.sqrt(2.0)) - probability
    step = error * math.sqrt(2.0 * math.pi) * math.exp(x * x / 2.0)
    return x - step / (1.0 + x * step / 2.0)


def _approximate(remaining: int, rate: float, confidence: float) -> int:
    """
    ``remaining`` plus the Cornish-Fisher quantile of the failures before ``remaining`` successes.

    The failures have mean ``r q / p``, standard deviation ``sqrt(r q) / p``, skewness
    ``(1 + q) / sqrt(r q)`` and excess kurtosis ``6 / r + p**2 / (r q)``.
    """
    r, q = float(min(remaining, 2**1000)), 1.0 - rate
    z = _normal_quantile(confidence)
    skew, kurtosis = (1.0 + q) / math.sqrt(r * q), 6.0 / r + rate * rate / (r * q)
    w = (
        z
        + (z * z - 1.0) * skew / 6.0
        + (z**3 - 3.0 * z) * kurtosis / 24.0
        - (2.0 * z**3 - 5.0 * z) * skew * skew / 36.0
    )
    # failures = r * (q + w * sqrt(q / r)) / rate - 1/2 (continuity), in exact integer
    # arithmetic so that any target size works.
    factor_num, factor_den = (q + w * math.sqrt(q / r)).as_integer_ratio()
    rate_num, rate_den = rate.as_integer_ratio()
    numerator = 2 * remaining * factor_num * rate_den - factor_den * rate_num
    failures = -(-numerator // (2 * factor_den * rate_num))
    return remaining + max(0, failures)


def binomial_groups_needed(remaining: int, rate: float, confidence: float) -> int:
    """
    The smallest ``n`` with ``P[Binomial(n, rate) >= remaining] >= confidence``.

    Exact while ``remaining * (1 - rate) <= 64``; beyond, the Cornish-Fisher approximation
    of the negative binomial quantile, within about a group of the exact answer.
    Either way it takes microseconds, whatever the arguments.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``remaining < 0``, ``rate`` outside ``(0, 1]`` or ``confidence``
            outside ``(0, 1)``.

    .. versionadded:: 0.1.0
    """
    remaining = check_count(remaining, "remaining")
    if not is_real(rate):
        msg = f"'rate' must be a real number (got {describe(rate)})"
        raise TypeError(msg)
    confidence = check_probability(confidence, "confidence")
    if not 0.0 < rate <= 1.0:
        msg = f"'rate' must be in (0, 1] (got {describe(rate)})"
        raise ValueError(msg)
    rate = float(rate)
    if remaining == 0:
        return 0
    if rate == 1.0:
        return remaining
    # The exact search works in floats, so it also needs n ~ remaining / rate far from overflow.
    small = remaining <= _EXACT_VARIANCE / (1.0 - rate)  # an int compares with a float exactly
    if small and math.log(remaining) - math.log(rate) < _LOG_FLOAT_ROOM:
        return _exact(remaining, rate, confidence)
    return _approximate(remaining, rate, confidence)


def check_tokens_per_group(value: object) -> None:
    if value is None:
        return
    if not is_real(value):
        msg = f"'estimated_tokens_per_group' must be a real number (got {describe(value)})"
        raise TypeError(msg)
    # An int beyond the float range is a usable (if absurd) bound: the cap arithmetic is exact.
    number: float = value  # type: ignore[assignment]  # is_real checked it
    if not (isinstance(number, numbers.Integral) or is_finite(number)) or not number > 0:
        msg = f"'estimated_tokens_per_group' must be a finite number > 0 (got {describe(value)})"
        raise ValueError(msg)


def groups_within(budget: int, per_group: float) -> int:
    """``floor(budget / per_group)`` in exact arithmetic: no overflow and no rounding up."""
    if isinstance(per_group, numbers.Integral):
        numerator, denominator = int(per_group), 1
    elif isinstance(per_group, numbers.Rational):  # a fraction: exact already
        numerator, denominator = int(per_group.numerator), int(per_group.denominator)
    else:
        numerator, denominator = float(per_group).as_integer_ratio()
    return budget * denominator // numerator


def groups_expected(remaining: int, rate: float) -> int:
    """``max(remaining, ceil(remaining / rate))``, exact when the float quotient is too large to trust."""
    quotient = remaining / rate if remaining < 2**53 else math.inf
    if quotient < 2**53:
        return max(remaining, math.ceil(quotient))
    numerator, denominator = rate.as_integer_ratio()
    return max(remaining, -(-remaining * denominator // numerator))

r"""
GSM8K rewards: final-answer extraction, numeric comparison, and a composite reward.

Extraction rule: the final answer is the **last** ``#### N`` or ``\boxed{N}`` in the
completion, whichever comes later in the text (a model that corrects itself ends with its
correction). Numbers compare numerically: commas are dropped, ``72.0 == 72``,
``\boxed{\frac{3}{4}} == 0.75``. A completion with no such marker has no answer: it scores
0 on accuracy and 0 on brevity, unless ``lenient`` extraction is asked for, which falls back
to the last number in the text (for small models that do not follow the answer format).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

__all__ = [
    "answers_match",
    "brevity_score",
    "extract_answer",
    "gold_answer",
    "parse_number",
    "score_group",
]

_NUMBER = r"-?(?:\d[\d,]*)?\.?\d+"
_HASH = re.compile(r"####\s*\$?\s*(" + _NUMBER + ")")
_BOXED = re.compile(r"\\boxed\s*\{")
_FRACTION = re.compile(r"^\\d?frac\{\s*(-?[\d.]+)\s*\}\{\s*(-?[\d.]+)\s*\}$|^(-?[\d.]+)\s*/\s*(-?[\d.]+)$")
_FIRST_NUMBER = re.compile(_NUMBER)
_LATEX_NOISE = re.compile(r"\\text\{[^{}]*\}|\\[,;!]|\\?\$|\\%|%|\s")


def _boxed_contents(text: str) -> list[tuple[int, str]]:
    r"""Every ``\boxed{...}`` with its start offset; braces may nest."""
    found = []
    for match in _BOXED.finditer(text):
        depth, start = 1, match.end()
        for index in range(start, len(text)):
            if text[index] == "{":
                depth += 1
            elif text[index] == "}":
                depth -= 1
                if depth == 0:
                    found.append((match.start(), text[start:index]))
                    break
    return found


def parse_number(text: str) -> float | None:
    r"""
    Read a number: ``"1,000"`` -> 1000.0, ``"72.0"`` -> 72.0, ``"\frac{3}{4}"`` -> 0.75.

    Returns:
        The value, or ``None`` when ``text`` holds no number.
    """
    cleaned = _LATEX_NOISE.sub("", text)
    fraction = _FRACTION.match(cleaned.replace(",", ""))
    if fraction:
        numerator, denominator = (g for g in fraction.groups() if g is not None)
        try:
            value = float(numerator) / float(denominator)
        except (ValueError, ZeroDivisionError):
            return None
        return value if math.isfinite(value) else None
    match = _FIRST_NUMBER.search(cleaned)
    if match is None:
        return None
    try:
        value = float(match.group(0).replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def extract_answer(completion: str, *, lenient: bool = False) -> float | None:
    r"""
    The final numeric answer of a completion: the last ``#### N`` or ``\boxed{N}``.

    With ``lenient``, a completion without either marker answers with its last number.

    Returns:
        The number, or ``None`` when the completion gives no final answer.
    """
    candidates: list[tuple[int, str]] = [(m.start(), m.group(1)) for m in _HASH.finditer(completion)]
    candidates += _boxed_contents(completion)
    for _, raw in sorted(candidates, reverse=True):
        value = parse_number(raw)
        if value is not None:
            return value
    if lenient:
        for raw in reversed(_FIRST_NUMBER.findall(completion)):
            value = parse_number(raw)
            if value is not None:
                return value
    return None


def gold_answer(answer: str) -> float:
    """
    The reference number of a GSM8K ``answer`` field (the text after its last ``####``).

    Raises:
        ValueError: the field has no ``#### N``.
    """
    value = extract_answer(answer)
    if value is None:
        raise ValueError(f"'answer' must end in '#### N' (got {answer[-60:]!r})")
    return value


def answers_match(predicted: float | None, gold: float, *, tolerance: float = 1e-6) -> bool:
    """Numeric equality up to ``tolerance`` (absolute, scaled by the gold's magnitude)."""
    if predicted is None:
        return False
    return math.isclose(predicted, gold, rel_tol=tolerance, abs_tol=tolerance)


def brevity_score(completion: str, *, free_chars: int, lenient: bool = False) -> float:
    """
    1.0 up to ``free_chars`` characters, then a linear decay to 0.0 at ``2 * free_chars``.

    Only completions that state a final answer earn it (a short non-answer is not brief,
    it is empty). This is a *shaping* term: it has spread even when every member is wrong.
    """
    if extract_answer(completion, lenient=lenient) is None:
        return 0.0
    extra = max(0, len(completion.strip()) - free_chars)
    return max(0.0, 1.0 - extra / free_chars)


def score_group(
    completions: Sequence[str],
    gold: float,
    *,
    brevity_weight: float = 0.5,
    free_chars: int = 300,
    lenient: bool = False,
) -> dict[str, list[float]]:
    """
    The composite reward of one group: ``{"accuracy": [...], "brevity": [...]}``.

    The total a GRPO step trains on is the sum of the components; the admission policy
    gates on ``accuracy`` only, so an all-wrong group whose spread comes from brevity alone
    is rejected as ``exact_dead`` instead of producing a phantom gradient.
    """
    accuracy = [float(answers_match(extract_answer(text, lenient=lenient), gold)) for text in completions]
    brevity = [
        brevity_weight * brevity_score(text, free_chars=free_chars, lenient=lenient) for text in completions
    ]
    return {"accuracy": accuracy, "brevity": brevity}

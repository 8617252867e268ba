"""
Argument checking shared by every public entry point.

Every message follows one grammar: the quoted name of the field or argument, the
requirement, and the offending value, e.g. ``'min_reward_std' must be >= 0 (got -0.1)``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import attrs

__all__ = [
    "DEPRECATIONS_REMOVED_IN",
    "as_float",
    "as_int",
    "check_bool",
    "check_choice",
    "check_count",
    "check_finite",
    "check_ge",
    "check_gt",
    "check_int",
    "check_names_in",
    "check_nonempty_strings",
    "check_one_of",
    "check_optional",
    "check_probability",
    "check_range",
    "check_real",
    "deprecated",
    "describe",
    "field_check",
    "int_field",
    "is_finite",
    "is_real",
    "probability_field",
    "real_field",
]

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def describe(value: object) -> str:
    """
    Render a value for an error message: its repr, plus its type when that is not obvious.

    An int beyond Python's limit on int-to-str conversion (4,300 digits), alone or inside a
    container, has no repr: it is named by its size, so that the message still names the field.
    """
    try:
        text = repr(value)
    except ValueError:
        if not isinstance(value, int):
            return f"a {type(value).__name__} holding an int too long to print"
        text = f"{'a negative' if value < 0 else 'an'} int of {abs(value).bit_length()} bits"
    if len(text) > 80:
        text = text[:77] + "..."
    if isinstance(value, (bool, int, float, str)) or value is None:
        return text
    return f"{text} of type {type(value).__name__}"


#: The release that removes what is deprecated: the one after the next release (0.2.0), so
#: a name released in 0.1.0 and deprecated in 0.2.0 warns for one release. A name added
#: after the last release is never deprecated, only changed (docs/architecture.md, "Rules").
DEPRECATIONS_REMOVED_IN = "0.3.0"


def deprecated(old: str, instead: str, *, stacklevel: int = 3) -> None:
    """
    Warn that ``old`` is removed in :data:`DEPRECATIONS_REMOVED_IN`, and what to use ``instead``.

    ``stacklevel`` counts from here: the default, 3, names the caller of the function
    that calls this one.
    """
    message = f"{old} is deprecated and will be removed in {DEPRECATIONS_REMOVED_IN}: {instead}"
    warnings.warn(message, DeprecationWarning, stacklevel=stacklevel)


def is_real(value: object) -> bool:
    """Tell whether ``value`` is a real number usable as a threshold (bools are not)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def as_float(value: float) -> float:
    """
    Convert ints and numpy scalars to ``float``; leave anything else for the validator to reject.

    An int beyond the float range stays an int, so that the validator names the value given.
    """
    if not is_real(value):
        return value
    try:
        return float(value)
    except OverflowError:
        return value


def as_int(value: int) -> int:
    """Convert integral numpy scalars to ``int``; leave anything else for the validator to reject."""
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value


def check_count(value: object, name: str, minimum: int = 0) -> int:
    """
    Return ``value`` as an ``int`` if it is an integer (numpy's too) >= ``minimum``.

    Raises:
        TypeError: not an integer (a bool is not one), naming ``name``.
        ValueError: below ``minimum``, naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        msg = f"'{name}' must be an integer (got {describe(value)})"
        raise TypeError(msg)
    if value < minimum:
        msg = f"'{name}' must be >= {minimum} (got {describe(value)})"
        raise ValueError(msg)
    return int(value)


def check_probability(value: object, name: str) -> float:
    """
    Return ``value`` as a ``float`` if it is a real number strictly between 0 and 1.

    For confidences and thresholds of probability (``confidence``, ``top_up_below``).

    Raises:
        TypeError: not a real number (a bool is not one), naming ``name``.
        ValueError: outside ``(0, 1)``, NaN included, naming ``name``.
    """
    if not is_real(value):
        msg = f"'{name}' must be a number in (0, 1) (got {describe(value)})"
        raise TypeError(msg)
    if not 0 < value < 1:  # type: ignore[operator]  # is_real checked it
        msg = f"'{name}' must be in (0, 1) (got {describe(value)})"
        raise ValueError(msg)
    return float(value)  # type: ignore[arg-type]


def field_check(check: Callable[[Any, str], object]) -> Validator:
    """The attrs validator that runs the argument check ``check(value, name)`` on a field."""

    def _check(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        check(value, attribute.name)

    return _check


def check_bool(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a bool (YAML's ``true`` / ``false``), not a truthy string or number."""
    if not isinstance(value, bool):
        msg = f"'{attribute.name}' must be a bool (got {describe(value)})"
        raise TypeError(msg)


def check_real(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require a real number (not a bool, not a string)."""
    if not is_real(value):
        msg = f"'{attribute.name}' must be a real number (got {describe(value)})"
        raise TypeError(msg)


def check_int(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """Require an integer (not a bool, not a float)."""
    if not isinstance(value, int) or isinstance(value, bool):
        msg = f"'{attribute.name}' must be an integer (got {describe(value)})"
        raise TypeError(msg)


def is_finite(value: Any) -> bool:
    """Tell whether a real number is finite as a float (an int beyond the float range is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_finite(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    """Require a number that is finite as a float."""
    if not is_finite(value):
        msg = f"'{attribute.name}' must be finite (got {describe(value)})"
        raise ValueError(msg)


def check_ge(bound: float) -> Validator:
    """Require ``value >= bound``."""

    def _check(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
        if not value >= bound:
            msg = f"'{attribute.name}' must be >= {bound:g} (got {describe(value)})"
            raise ValueError(msg)

    return _check


def check_gt(bound: float) -> Validator:
    """Require ``value > bound``."""

    def _check(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
        if not value > bound:
            msg = f"'{attribute.name}' must be > {bound:g} (got {describe(value)})"
            raise ValueError(msg)

    return _check


def check_range(low: float, high: float, *, low_open: bool = False) -> Validator:
    """Require ``low <= value <= high`` (or ``low < value`` when ``low_open``)."""
    left = "(" if low_open else "["

    def _check(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
        above = value > low if low_open else value >= low
        if not (above and value <= high):
            msg = f"'{attribute.name}' must be in {left}{low:g}, {high:g}] (got {describe(value)})"
            raise ValueError(msg)

    return _check


def check_choice(value: object, name: str, choices: tuple[str, ...]) -> str:
    """
    Return ``value`` if it is one of ``choices`` (a mode, a scale, an action).

    Raises:
        ValueError: anything else, naming ``name`` and the choices.
    """
    if value not in choices:
        names = ", ".join(repr(choice) for choice in choices)
        msg = f"'{name}' must be one of {names} (got {describe(value)})"
        raise ValueError(msg)
    return value


def check_one_of(choices: tuple[str, ...]) -> Validator:
    """Require one of ``choices`` (the attrs validator of :func:`check_choice`)."""
    return field_check(lambda value, name: check_choice(value, name, choices))


def check_nonempty_strings(values: Iterable[object], name: str) -> None:
    """
    Require every entry of ``values`` to be a non-empty string.

    Raises:
        TypeError: an entry is not a string, naming ``name``.
        ValueError: an entry is the empty string, naming ``name``.
    """
    for value in values:
        if not isinstance(value, str) or not value:
            msg = f"'{name}' entries must be non-empty strings (got {describe(value)})"
            raise ValueError(msg) if isinstance(value, str) else TypeError(msg)


def check_names_in(choices: tuple[str, ...], what: str) -> Validator:
    """Require a tuple of strings, each one of ``choices``; ``what`` names them in errors."""

    def _check(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
            msg = f"'{attribute.name}' must be a list of {what} names (got {describe(value)})"
            raise TypeError(msg)
        unknown = [v for v in value if v not in choices]
        if unknown:
            msg = f"'{attribute.name}' has unknown {what} name(s) {unknown!r} (known: {', '.join(choices)})"
            raise ValueError(msg)

    return _check


def check_optional(*validators: Validator) -> Validator:
    """Run ``validators`` unless the value is ``None``."""

    def _check(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None:
            return
        for validator in validators:
            validator(inst, attribute, value)

    return _check


def real_field(default: float | None, *checks: Validator, optional: bool = False) -> Any:
    """
    An attrs field holding a finite real number that passes ``checks`` (with ``optional``, or ``None``).

    Ints and numpy scalars become floats. A non-number (a bool included) raises
    ``TypeError``, a non-finite number ``ValueError``; then each of ``checks`` runs
    (``check_ge(0)``, ``check_range(0, 1)``...).
    """
    if optional:
        converter = attrs.converters.optional(as_float)
        return attrs.field(
            default=default, converter=converter, validator=check_optional(check_real, check_finite, *checks)
        )
    return attrs.field(default=default, converter=as_float, validator=(check_real, check_finite, *checks))


def int_field(default: int | None, *checks: Validator, optional: bool = False) -> Any:
    """
    An attrs field holding an integer that passes ``checks`` (with ``optional``, or ``None``).

    Integral numpy scalars become ints. A non-integer (a bool or a float included) raises
    ``TypeError``; then each of ``checks`` runs (``check_ge(0)``...).
    """
    if optional:
        converter = attrs.converters.optional(as_int)
        return attrs.field(default=default, converter=converter, validator=check_optional(check_int, *checks))
    return attrs.field(default=default, converter=as_int, validator=(check_int, *checks))


def probability_field(default: float) -> Any:
    """
    An attrs field holding a probability strictly between 0 and 1 (``confidence``, ``top_up_below``).

    :func:`real_field` with :func:`check_probability`: a non-number raises ``TypeError``,
    a non-finite number or one outside ``(0, 1)`` ``ValueError``.
    """
    return real_field(default, field_check(check_probability))

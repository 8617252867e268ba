"""
Every exception the library raises on purpose.

Argument mistakes raise the built-in types, always with the same grammar (``'field' must
be ... (got ...)``): a value of the wrong type raises ``TypeError``, a value of the right
type that breaks a requirement raises ``ValueError``. Everything else derives from
:class:`GroupAdmissionError`; the classes that also derive from a built-in type do so
only so that existing ``except ValueError`` / ``except RuntimeError`` blocks keep
catching them::

    GroupAdmissionError
    ├── CheckpointError (ValueError)           a saved state that cannot be restored exactly
    ├── ConfigurationError (ValueError)        a settings file or mapping that cannot be used
    ├── StepLifecycleError (RuntimeError)      a session called out of order
    ├── BudgetExhaustedError (RuntimeError)    the caller asked to stop when the budget runs out
    └── ConsecutiveFailedGroupsError (RuntimeError)
                                               too many external rejections in a row

One warning is the library's own: :class:`HalfConfiguredWarning` (a ``UserWarning``), for a
config whose fields set part of a feature and leave the rest of it off.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings

__all__ = [
    "BudgetExhaustedError",
    "CheckpointError",
    "ConfigurationError",
    "ConsecutiveFailedGroupsError",
    "GroupAdmissionError",
    "HalfConfiguredWarning",
    "StepLifecycleError",
    "recommended_instead",
    "warn_half_configured",
]


class GroupAdmissionError(Exception):
    """
    Base class of the errors group-admission raises on purpose (besides argument errors).

    .. versionadded:: 0.2.0
    """


class CheckpointError(GroupAdmissionError, ValueError):
    """
    A saved state (``to_dict`` / ``state_dict`` output) that cannot be restored exactly.

    Raised for missing or unknown keys, values of the wrong type, counts that do not
    conserve, and a state saved under a different configuration.

    .. versionadded:: 0.2.0
    """


class ConfigurationError(GroupAdmissionError, ValueError):
    """
    A configuration source that cannot be used: unreadable YAML, a section that is not a mapping.

    Field-level mistakes in a config raise ``TypeError`` / ``ValueError`` naming the field.

    .. versionadded:: 0.2.0
    """


class StepLifecycleError(GroupAdmissionError, RuntimeError):
    """
    An :class:`AdmissionSession` call out of order (planning before ``begin_step``, ...).

    .. versionadded:: 0.2.0
    """


class BudgetExhaustedError(GroupAdmissionError, RuntimeError):
    """
    The sampling budget ran out before the target was met, and the caller asked to stop.

    .. versionadded:: 0.2.0
    """


class ConsecutiveFailedGroupsError(GroupAdmissionError, RuntimeError):
    """
    Too many consecutive groups were rejected as ``external`` and dropped.

    A host that replaces every dropped group would otherwise sample replacements forever
    while its generation or reward path is broken; the session stops the run and names
    the reasons.

    .. versionadded:: 0.1.0
    """


class HalfConfiguredWarning(UserWarning):
    """
    A config sets part of a feature while its other fields leave the feature off.

    ``gate_on`` with every reward gate at 0 (every group is admitted, an all-wrong group with
    shaping spread too), or a budget with resample rounds but no extra groups (or extra
    groups but no rounds: nothing is ever resampled). The message names what is off and
    points to a whole configuration: ``SessionConfig.preset("recommended", ...)`` for a
    policy, ``SamplingBudgetConfig.for_target(...)`` for a budget (the preset resamples nothing).
    Each message is given once per process.

    .. versionadded:: 0.2.0
    """


def recommended_instead(**sections: object) -> str:
    """The advice every half-configured warning ends with: the recommended preset, with ``sections``."""
    overrides = "".join(f", {name}={value!r}" for name, value in sections.items())
    return f"start from the recommended configuration, SessionConfig.preset('recommended'{overrides})"


_warned: set[str] = set()
_warned_lock = threading.Lock()


#: The library's own files: a warning names the first line outside them (the caller's).
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _caller_stacklevel() -> int:
    """The ``stacklevel`` (from the frame that calls this) of the first frame outside the library."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith((_PACKAGE, "<attrs generated")):
        frame, level = frame.f_back, level + 1
    return level


def warn_half_configured(problems: list[str]) -> None:
    """
    Warn, once per process for each problem, that a config is half-configured.

    The warning names the caller's line (the first outside the library). A problem is
    recorded only once its warning was given, so a filter that turns the warning into an
    error raises it every time.
    """
    for problem in problems:
        with _warned_lock:
            if problem in _warned:
                continue
        warnings.warn(problem, HalfConfiguredWarning, stacklevel=_caller_stacklevel())
        with _warned_lock:
            _warned.add(problem)

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
"""

from __future__ import annotations

__all__ = [
    "BudgetExhaustedError",
    "CheckpointError",
    "ConfigurationError",
    "ConsecutiveFailedGroupsError",
    "GroupAdmissionError",
    "StepLifecycleError",
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

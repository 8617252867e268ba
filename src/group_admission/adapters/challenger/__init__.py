"""
twinkle Challenger adapter: group admission and a sampling budget at the group hand-off.

twinkle's env-lease ``Challenger`` (``twinkle_agentic.challenger.base``; see
:data:`SUPPORTED_VERSIONS`) hands each finished unit of work over as complete groups, one
list per side, in ``_complete``. :class:`ChallengerAdmission` judges them through an
``AdmissionSession`` (one hand-off, one round of the batch's budget), and
:class:`GroupAdmissionChallengerMixin` wires it into a Challenger class, with or without
twinkle#288's ``_admitted_groups`` hook.

Importing this package imports no twinkle. See ``docs/adapters/challenger.md``.
"""

from __future__ import annotations

from ._hook import (
    CHECK_CHALLENGER_SPREAD,
    NON_NUMERIC_REWARD,
    SUPPORTED_VERSIONS,
    ChallengerAdmission,
    last_assistant_text,
)
from ._mixin import GroupAdmissionChallengerMixin, with_group_admission

__all__ = [
    "CHECK_CHALLENGER_SPREAD",
    "NON_NUMERIC_REWARD",
    "SUPPORTED_VERSIONS",
    "ChallengerAdmission",
    "GroupAdmissionChallengerMixin",
    "last_assistant_text",
    "with_group_admission",
]

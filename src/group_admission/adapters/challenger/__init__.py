"""
twinkle Challenger adapter: group admission and a sampling budget at the group hand-off.

:class:`ChallengerAdmission` judges the complete groups twinkle's env-lease ``Challenger``
hands over in ``_complete`` (one hand-off, one round of the batch's budget);
:class:`GroupAdmissionChallengerMixin` wires it into a Challenger class. Importing this
package imports no twinkle. See ``docs/adapters/challenger.md``.
"""

from __future__ import annotations

from .._kit import publish as _publish
from ._hook import (
    CHECK_CHALLENGER_SPREAD,
    NON_NUMERIC_REWARD,
    SUPPORTED_VERSIONS,
    ChallengerAdmission,
    GroupAdmissionChallengerMixin,
    last_assistant_text,
    with_group_admission,
)

__all__ = [
    "CHECK_CHALLENGER_SPREAD",
    "NON_NUMERIC_REWARD",
    "SUPPORTED_VERSIONS",
    "ChallengerAdmission",
    "GroupAdmissionChallengerMixin",
    "last_assistant_text",
    "with_group_admission",
]

_publish(__name__)

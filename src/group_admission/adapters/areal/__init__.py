"""
AReaL adapter: group admission as AReaL 1.0's ``should_accept_fn``, with a pre-generation skip.

Point AReaL's filter at the adapter (``trainer.train(workflow, dynamic_filter_fn=
"group_admission.adapters.areal.should_accept")``, settings in ``GROUP_ADMISSION_AREAL``), or
pass an :class:`AReaLAdmission` you built. Importing this package imports no AReaL and no
torch. See ``docs/adapters/areal.md``.
"""

from __future__ import annotations

from .._kit import publish as _publish
from ._accept import (
    HOST,
    METRIC_SCOPE,
    PARTIAL_GROUP,
    PROMPT_KEY,
    SETTINGS_ENV,
    AdmissionWorkflow,
    AReaLAdmission,
    current_admission,
    should_accept,
)
from ._versions import INSTALL_HINT, SUPPORTED_VERSIONS

__all__ = [
    "HOST",
    "INSTALL_HINT",
    "METRIC_SCOPE",
    "PARTIAL_GROUP",
    "PROMPT_KEY",
    "SETTINGS_ENV",
    "SUPPORTED_VERSIONS",
    "AReaLAdmission",
    "AdmissionWorkflow",
    "current_admission",
    "should_accept",
]

_publish(__name__)

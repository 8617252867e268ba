"""
TRL adapter: ``AdmissionGRPOTrainer``, a ``trl.GRPOTrainer`` that trains only on admitted groups.

Needs the ``trl`` extra (``pip install 'group-admission[trl]'`` with your torch pin in the same
command); see docs/adapters/trl.md.
"""

from __future__ import annotations

from .._kit import publish as _publish
from ._masking import NORMALISATION
from ._trainer import STATE_FILE, AdmissionGRPOTrainer, AdmissionMixin
from ._versions import SUPPORTED_VERSIONS

__all__ = ["NORMALISATION", "STATE_FILE", "SUPPORTED_VERSIONS", "AdmissionGRPOTrainer", "AdmissionMixin"]

_publish(__name__)

"""
TRL adapter: ``AdmissionGRPOTrainer``, a ``trl.GRPOTrainer`` that trains only on admitted groups.

Needs the ``trl`` extra (``pip install 'group-admission[trl]'`` with your torch pin in the same
command); see docs/adapters/trl.md.
"""

from __future__ import annotations

from ._versions import SUPPORTED_VERSIONS, check_trl

check_trl()

from ._masking import NORMALISATION  # noqa: E402  (only after the version check)
from ._trainer import STATE_FILE, AdmissionGRPOTrainer, AdmissionMixin  # noqa: E402

__all__ = ["NORMALISATION", "STATE_FILE", "SUPPORTED_VERSIONS", "AdmissionGRPOTrainer", "AdmissionMixin"]

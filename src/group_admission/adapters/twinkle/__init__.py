"""
twinkle-kit adapter: group admission in a released twinkle (0.5.1) GRPO loop.

:class:`TwinkleGroupAdmission` sits between the rewards and ``GRPOAdvantage``: it judges
each run of G consecutive completions as one group, on the reward components before
twinkle sums them, and returns the kept groups' advantages (twinkle's own) with a row
mask. :func:`sample_admitted_groups` adds resampling rounds with twinkle's ``Sampler``.
For twinkle's unreleased Challenger (main branch), use ``adapters.challenger``. Importing
this package imports no twinkle and no torch. See ``docs/adapters/twinkle.md``.
"""

from __future__ import annotations

from .._kit import publish as _publish
from ._rounds import AdmittedBatch, sample_admitted_groups
from ._rows import UNSUMMABLE_REWARD, WRONG_GROUP_SIZE
from ._step import METRIC_PREFIX, AdmittedRows, TwinkleGroupAdmission
from ._versions import INSTALL_HINT, SUPPORTED_VERSIONS

__all__ = [
    "INSTALL_HINT",
    "METRIC_PREFIX",
    "SUPPORTED_VERSIONS",
    "UNSUMMABLE_REWARD",
    "WRONG_GROUP_SIZE",
    "AdmittedBatch",
    "AdmittedRows",
    "TwinkleGroupAdmission",
    "sample_admitted_groups",
]

_publish(__name__)

"""``query_filter`` and ``AdmissionGroupFilter``, each over an ``AdmissionSession`` with drop limits."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from typing import Any

from ..._metrics import AdmissionStats
from ..._session import AdmissionSession
from .._adapter_runtime import GroupInput, Registry, settings_from
from ._read import domain_of, global_step, leaves, read_responses, read_trajectories, rows
from ._settings import RollAgenticSettings, RollRLVRSettings, agentic_settings, rlvr_settings

__all__ = [
    "METRIC_PREFIX",
    "AdmissionGroupFilter",
    "admission_stats",
    "admit",
    "query_filter",
    "reset",
    "rlvr_runtime",
]

#: Prefix of the admission metrics written into kept groups' ``meta_info["metrics"]``.
METRIC_PREFIX = "group_admission/"


class _Runtime:
    """A session, and the counts it has already written onto kept groups."""

    def __init__(self, settings: RollRLVRSettings | RollAgenticSettings, host: str) -> None:
        self.settings = settings
        self.session = AdmissionSession(settings.policy, limits=settings.limits, host=host)
        self._reported = AdmissionStats()
        self._lock = threading.Lock()

    @property
    def texts(self) -> bool:
        """Whether the redundancy gate needs the responses' token ids."""
        return self.session.policy.config.similarity_gate_enabled

    def keep(self, group: GroupInput, kept: Any, *, step: int | str | None = None) -> bool:
        """The session's verdict; a kept group carries the counts judged since the last one."""
        if not group.judge(self.session, step=step).keep:
            return False
        carriers = [leaf for leaf in leaves(kept) if isinstance(getattr(leaf, "meta_info", None), dict)]
        if not carriers:
            return True  # the counts ride on the next kept group
        carrier = next((leaf for leaf in carriers if rows(leaf) == 1), carriers[0])
        with self._lock:
            total = self.session.stats
            since, self._reported = total.difference(self._reported), total
        # ROLL reduces each metrics key over the batch by its '@' suffix: the '@sum' counts
        # of one carrier per kept group add up to the groups judged for the batch.
        metrics: dict[str, Any] = {
            f"{METRIC_PREFIX}{name}@sum": value
            for name, value in since.metrics().items()
            if name != "effective_group_rate"
        }
        metrics[f"{METRIC_PREFIX}cumulative_effective_group_rate"] = total.effective_group_rate
        # Rows of one prompt share a meta_info dict: give the carrier its own, so that the
        # counts appear once in the batch rather than once per row.
        existing = carrier.meta_info.get("metrics")
        carrier.meta_info = {
            **carrier.meta_info,
            "metrics": {**(existing if isinstance(existing, Mapping) else {}), **metrics},
        }
        return True


_RLVR: Registry[_Runtime] = Registry()


def rlvr_runtime(pipeline_config: Any, domain: str) -> _Runtime:
    """The session of ``domain``'s settings in ``pipeline_config``, built on first use."""
    key, raw, source = rlvr_settings(pipeline_config, domain)
    return _RLVR.get(key, lambda: _Runtime(settings_from(RollRLVRSettings, raw, source), "ROLL RLVR"))


def admit(
    data_list: Any,
    config: Any,
    *,
    step: int | str | None,
    domain: str | None = None,
    group_key: Hashable = None,
) -> bool:
    """Whether ROLL keeps one prompt's responses (``domain``: read from them when not given)."""
    rewards = getattr(config, "rewards", None)
    domain = domain or domain_of(data_list, list(rewards) if isinstance(rewards, Mapping) else [])
    runtime = rlvr_runtime(config, domain)
    group = read_responses(data_list, texts=runtime.texts)
    group.group_key = group_key
    return runtime.keep(group, data_list, step=step)


def query_filter(data_list: Any, config: Any) -> bool:
    """
    Judge one prompt's responses with ROLL's ``query_filter`` signature: True keeps.

    A drop-in for ROLL's module function of that name. A multi-row DataProto counts row by
    row; settings and limits are those of :class:`AdmissionRolloutLoop`, per
    ``meta_info["global_step"]``.

    Raises:
        ValueError: the responses name no ``domain`` (and the config has several), or the
            domain has no reward config.
        ConsecutiveFailedGroupsError: too many external rejections in a row.

    .. versionadded:: 0.1.0
    """
    return admit(data_list, config, step=global_step(data_list))


def admission_stats(domain: str | None = None) -> AdmissionStats:
    """
    The RLVR counts of this process (of one reward domain, if given).

    .. versionadded:: 0.1.0
    """
    total = AdmissionStats()
    for key, runtime in _RLVR.items():
        if domain is None or key.split("\n", 1)[0] == domain:
            total = total.merge(runtime.session.stats)
    return total


def reset() -> None:
    """
    Forget every RLVR session and its counts (for tests and notebooks).

    .. versionadded:: 0.2.0
    """
    _RLVR.clear()


class AdmissionGroupFilter:
    """
    ROLL's agentic ``GroupFilter`` over the admission policy: ``filter`` returns True to drop.

    ROLL builds one per scheduler mode (``"train"``, ``"val"``) from ``AgenticConfig`` and
    the ``EnvManagerConfig``, and calls ``filter`` once per completed group. Each filter has
    a session whose drop limit spans its lifetime. Outside the settings' ``modes`` nothing
    is dropped or counted.

    Raises:
        TypeError, ValueError: ``GROUP_ADMISSION_ROLL_CONFIG`` holds invalid settings.
        FileNotFoundError: it names a YAML file that does not exist.

    .. versionadded:: 0.1.0
    """

    def __init__(self, config: Any, env_manager_config: Any, mode: str) -> None:
        self.config = config
        self.env_manager_config = env_manager_config
        self.mode = mode
        self.settings = agentic_settings(config, env_manager_config)
        self._runtime = _Runtime(self.settings, "ROLL agentic")

    def filter(self, group_id: int, episode_id: int, group: list[Any]) -> bool:
        """Judge one trajectory group: True drops it (ROLL starts a new episode), False keeps it."""
        if self.mode not in self.settings.modes:
            return False
        trajectories = read_trajectories(group, texts=self._runtime.texts)
        trajectories.group_key = (group_id, episode_id)
        return not self._runtime.keep(trajectories, group if isinstance(group, list) else [])

    @property
    def stats(self) -> AdmissionStats:
        """A copy of this filter's admission counts."""
        return self._runtime.session.stats

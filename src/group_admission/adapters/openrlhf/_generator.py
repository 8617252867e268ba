"""
``AdmissionGeneratorMixin``: OpenRLHF's ``SamplesGenerator._generate_vllm`` with the session's judge and plan.

The mixin imports no OpenRLHF: it goes in front of OpenRLHF's class (see ``_install``) and
uses OpenRLHF's own helpers: the prompt draw (``_collect_prompt_batch``) and the ``ray``
of the module that defines the base class, and the base's dispatch (one Ray ref per
prompt, generating its whole group) and response conversion.
"""

from __future__ import annotations

import sys
from typing import Any

import attrs
import structlog

from ... import AdmissionSession, BudgetExhaustedError, StepReport, StreamPlan
from ..._host_rules.openrlhf import amend_by_mean_range
from .._kit import (
    AdapterSession,
    SessionRegistry,
    admission_step,
    exhausted_message,
    log_metrics,
    step_metrics,
)
from ._groups import GENERATION_FAILED, failed_group, read_group
from ._settings import OpenRLHFAdmissionSettings, current_settings, forget_settings
from ._versions import SUPPORTED_VERSIONS

__all__ = ["METRIC_PREFIX", "AdmissionGeneratorMixin", "reset"]

#: The prefix of every metric the adapter reports (OpenRLHF logs them as ``train/group_admission/...``).
METRIC_PREFIX = "group_admission/"

_log = structlog.get_logger("group_admission.adapters.openrlhf")
# OpenRLHF waits on its refs with this timeout too; it only bounds one wait, not the step.
_WAIT_SECONDS = 10.0

# One session per settings in a process: OpenRLHF builds one generator per trainer actor.
_SESSIONS: SessionRegistry[AdapterSession[OpenRLHFAdmissionSettings]] = SessionRegistry(
    on_reset=forget_settings
)


def _runtime(settings: OpenRLHFAdmissionSettings) -> AdapterSession[OpenRLHFAdmissionSettings]:
    # Keyed by every field's value: settings read from different files but equal share a session.
    return _SESSIONS.get(attrs.asdict(settings), lambda: AdapterSession(settings, host="OpenRLHF"))


def reset() -> None:
    """
    Forget every session, its counts, and the settings read so far (for tests and notebooks).

    .. versionadded:: 0.2.0
    """
    _SESSIONS.reset()


class AdmissionGeneratorMixin:
    """
    In front of OpenRLHF's ``SamplesGenerator``: ``_generate_vllm`` judges and replaces by the session.

    With ``dynamic_filtering`` (``--algo.dynamic_filtering_enable``), each call is one
    session step whose target is the prompts drawn. Each finished group (one prompt's
    ``n`` experiences) is judged by the policy, then by OpenRLHF's range rule when
    ``apply_dynamic_filtering_range`` is set. After each finished group the session's
    streaming plan says how many replacement prompts to draw and dispatch, under the
    budget's caps; nothing in flight is cancelled (OpenRLHF has no abort), so groups
    still running when the target is met are waited for, judged and discarded. The call
    returns OpenRLHF's ``(experiences, prompts_consumed, exhausted)``: the first
    ``target`` kept groups, whole and in the order they finished.

    Without ``dynamic_filtering`` (evaluation, or the flag off) OpenRLHF's own method runs.

    Attributes:
        last_admission_metrics: The metrics of the latest judged call (``None`` before).
        last_admission_report: Its :class:`group_admission.StepReport`.

    Raises:
        BudgetExhaustedError: the caps stopped replacements short of the target and the
            settings say ``on_exhausted: raise``.
        ConsecutiveFailedGroupsError: too many groups in a row failed (``limits``).

    .. versionadded:: 0.2.0
    """

    last_admission_metrics: dict[str, int | float] | None = None
    last_admission_report: StepReport | None = None

    def _generate_vllm(
        self, dataloader_iter: Any, num_prompts: int, dynamic_filtering: Any, **generate_kwargs: Any
    ) -> tuple[list[Any], int, bool]:
        if not dynamic_filtering:
            base: Any = super()
            result: tuple[list[Any], int, bool] = base._generate_vllm(
                dataloader_iter, num_prompts, dynamic_filtering, **generate_kwargs
            )
            return result
        return _Step(self, generate_kwargs).run(dataloader_iter, num_prompts)


def _host_module(cls: type) -> Any:
    """The module that defines the OpenRLHF base class: its ``ray`` and ``_collect_prompt_batch``."""
    for klass in cls.__mro__:
        if klass is not AdmissionGeneratorMixin and "_dispatch_prompts_to_vllm" in vars(klass):
            module = sys.modules.get(klass.__module__)
            if hasattr(module, "ray") and hasattr(module, "_collect_prompt_batch"):
                return module
            break
    bases = [klass.__name__ for klass in cls.__mro__[1:-1] if klass is not AdmissionGeneratorMixin]
    msg = (
        f"'{cls.__name__}' must derive from OpenRLHF's SamplesGenerator (openrlhf"
        f"{SUPPORTED_VERSIONS['openrlhf']}), whose module defines 'ray' and '_collect_prompt_batch' "
        f"(got bases {bases})"
    )
    raise TypeError(msg)


def _group_size(generator: Any, generate_kwargs: dict[str, Any]) -> int | None:
    """Samples per prompt, as ``_dispatch_prompts_to_vllm`` reads it (``None`` when unknown)."""
    rollout = getattr(getattr(generator, "args", None), "rollout", None)
    size = generate_kwargs.get("n_samples_per_prompt", getattr(rollout, "n_samples_per_prompt", None))
    return size if isinstance(size, int) and not isinstance(size, bool) and size >= 1 else None


class _Step:
    """One ``_generate_vllm`` call: draw, dispatch, judge, replace, hand back."""

    def __init__(self, generator: Any, generate_kwargs: dict[str, Any]) -> None:
        self.generator = generator
        self.kwargs = generate_kwargs
        self.host = _host_module(type(generator))
        self.settings: OpenRLHFAdmissionSettings = current_settings()
        self.session: AdmissionSession = _runtime(self.settings).session
        self.size = _group_size(generator, generate_kwargs)
        self.range: tuple[float, float] | None = None
        if self.settings.apply_dynamic_filtering_range:
            low, high = generator.args.algo.dynamic_filtering_range
            self.range = (float(low), float(high))
        self.consumed = 0
        self.dry = False  # the prompt iterator is exhausted
        self.kept: list[list[Any]] = []

    def run(self, dataloader_iter: Any, num_prompts: int) -> tuple[list[Any], int, bool]:
        prompts, labels, images, self.dry = self.host._collect_prompt_batch(dataloader_iter, num_prompts)
        if not prompts:
            return [], 0, True
        with admission_step(self.session, len(prompts)) as step:
            pending = self._dispatch(prompts, labels, images)
            plan = self._stream(dataloader_iter, pending)
        return self._finish(step.report, plan)

    def _dispatch(self, prompts: list[Any], labels: list[Any], images: list[Any]) -> list[Any]:
        self.consumed += len(prompts)
        refs = self.generator._dispatch_prompts_to_vllm(prompts, labels, images=images, **self.kwargs)
        return list(refs)

    def _stream(self, dataloader_iter: Any, pending: list[Any]) -> StreamPlan | None:
        plan: StreamPlan | None = None
        while pending:
            ready, pending = self.host.ray.wait(pending, num_returns=1, timeout=_WAIT_SECONDS)
            pending = list(pending)
            for ref in ready:
                self._judge(ref)
            if not ready:
                continue
            plan = self.session.stream_plan(len(pending), num_generations=self.size)
            if plan.launch and not self.dry:
                prompts, labels, images, self.dry = self.host._collect_prompt_batch(
                    dataloader_iter, plan.launch
                )
                if prompts:
                    pending.extend(self._dispatch(prompts, labels, images))
        return plan

    def _judge(self, ref: Any) -> None:
        names = self.settings.components
        try:
            responses = self.host.ray.get(ref)
            experiences = [
                self.generator._process_response_into_experience(r, **self.kwargs) for r in responses
            ]
        except Exception as exc:  # a failed group is rejected and counted; it must not stop training
            _log.warning("group_admission_generation_failed", error=repr(exc))
            experiences, group = [], failed_group(self.size or 1, names, GENERATION_FAILED)
        else:
            group = read_group(experiences, names, self.size)
        decision = self.session.policy.evaluate(group.components, external_reasons=group.external)
        if self.range is not None:
            decision = amend_by_mean_range(decision, group.scores, *self.range)
        verdict = self.session.record(decision, generated_tokens=group.generated_tokens)
        if verdict.keep:
            self.kept.append(experiences)

    def _finish(self, report: StepReport, plan: StreamPlan | None) -> tuple[list[Any], int, bool]:
        rate = None if plan is None else plan.effective_rate
        metrics = step_metrics(self.session, report, prefix=METRIC_PREFIX, effective_rate=rate)
        metrics[f"{METRIC_PREFIX}prompts_consumed"] = self.consumed
        self.generator.last_admission_metrics, self.generator.last_admission_report = metrics, report
        log_metrics(_log, "group_admission_step", metrics, METRIC_PREFIX)
        if report.exhausted and not self.dry:
            message = _exhausted_message(report, self.session, self.settings)
            if self.settings.on_exhausted == "raise":
                raise BudgetExhaustedError(message)
            _log.warning("group_admission_short_batch", detail=message)
        experiences = [e for group in self.kept[: report.trained_groups] for e in group]
        if self.settings.metrics_in_info:
            _write_info(experiences, metrics)
        return experiences, self.consumed, self.dry


def _write_info(experiences: list[Any], metrics: dict[str, int | float]) -> None:
    """Add the metrics to each experience's ``info``, one value per row like OpenRLHF's own entries."""
    if not experiences:
        return
    import torch  # noqa: PLC0415  (OpenRLHF's processes have torch; the adapter's import does not need it)

    for experience in experiences:
        info = getattr(experience, "info", None)
        if isinstance(info, dict):
            info.update({name: torch.tensor([float(value)]) for name, value in metrics.items()})


def _exhausted_message(
    report: StepReport, session: AdmissionSession, settings: OpenRLHFAdmissionSettings
) -> str:
    advice = (
        "Check that the prompts are not all too easy or too hard, that policy.gate_on names the "
        f"outcome component, or raise budget.max_extra_groups (now {settings.budget.max_extra_groups})."
    )
    return exhausted_message("OpenRLHF", report, session, advice)

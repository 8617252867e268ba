"""
``streaming_rollout``: slime's rollout loop with launches from the session's streaming plan.

slime's default loop submits whole over-sampling waves and aborts whatever runs once the
batch is full. This rollout function keeps slime's own pieces (``GenerateState``,
``generate_and_rm_group``, ``abort``, the data source's buffer) and changes only the
decisions: how many groups to launch and when (``AdmissionSession.stream_plan``), which
finished group to keep (the slime adapter's reading of a group, judged by the session),
and what to return when the caps stop the launches. Importing it imports no slime.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import ModuleType
from typing import Any

import attrs
import structlog

from ... import BudgetExhaustedError, RejectionReason, StepReport, StreamPlan
from .._kit import (
    AdapterSession,
    SessionRegistry,
    admission_step,
    check_count,
    describe,
    exhausted_message,
    host_versions,
    import_host,
    log_metrics,
)
from . import _hooks
from ._groups import GENERATION_FAILED, failed_group, leaves, read_group, response_tokens
from ._hooks import METRIC_PREFIX, SETTINGS_ATTR, SlimeAdmissionSettings, drop_reason
from ._streaming_checkpoint import restore_stream_state, save_stream_state
from ._streaming_prompts import PickTally, StreamPrompts
from ._streaming_report import rollout_metrics
from ._streaming_settings import STREAMING_SETTINGS_ATTR, SlimeStreamingSettings

__all__ = ["STREAMING_SUPPORTED_VERSIONS", "reset", "streaming_rollout"]

#: The slime the streaming rollout is checked against: one commit, because it runs on slime's
#: internals (``GenerateState``, ``generate_and_rm_group``, ``abort``, the buffered data source).
STREAMING_SUPPORTED_VERSIONS = host_versions(
    {"slime": "THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515"}
)

_log = structlog.get_logger("group_admission.adapters.slime")


@attrs.frozen
class _Slime:
    """The slime modules the rollout runs on, imported when it first runs."""

    rollout: ModuleType  # slime.rollout.sglang_rollout: GenerateState, abort, generate_rollout
    base_types: ModuleType  # slime.rollout.base_types: RolloutFnTrainOutput
    filters: ModuleType  # slime.rollout.filter_hub.base_types: MetricGatherer
    misc: ModuleType  # slime.utils.misc: load_function
    run: Any  # slime.utils.async_utils.run: slime's background event loop

    @classmethod
    def load(cls) -> _Slime:
        modules = ("sglang_rollout", "base_types", "filter_hub.base_types")
        rollout, base_types, filters = (_import_slime(f"rollout.{name}") for name in modules)
        misc, loop = _import_slime("utils.misc"), _import_slime("utils.async_utils")
        return cls(rollout, base_types, filters, misc, loop.run)


def _import_slime(name: str) -> ModuleType:
    return import_host(
        f"slime.{name}",
        adapter="group_admission.adapters.slime.streaming_rollout",
        needs="slime, inside whose RolloutManager it runs",
        install=f"pip install git+https://github.com/{STREAMING_SUPPORTED_VERSIONS['slime']}",
        versions=STREAMING_SUPPORTED_VERSIONS,
    )


class _Stream(AdapterSession[SlimeAdmissionSettings]):
    """
    One configuration of the streaming rollout: the filter's settings, the streaming ones, one rollout's caps.

    The policy and the failure streak are the ``group_admission`` mapping's, as the filter's.
    """

    def __init__(
        self, admission: SlimeAdmissionSettings, streaming: SlimeStreamingSettings, target: int
    ) -> None:
        super().__init__(
            admission, host="slime", budget=streaming.budget_for(target), loss_scale=streaming.loss_scale
        )
        self.streaming = streaming
        self._prompts: StreamPrompts | None = None
        self._restored = False

    def prompts(self, args: Any, group_size: int) -> StreamPrompts | None:
        """The prompt history of the ``history`` setting (built at the first rollout), or ``None``."""
        section = self.streaming.history
        if section is None:
            return None
        if self._prompts is None:
            seed = getattr(args, "rollout_seed", 0)
            seed = seed if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 else 0
            self._prompts = StreamPrompts(section, self.streaming.prompt_id_key, group_size, seed)
        size = self._prompts.history.config.group_size
        if size != group_size:
            msg = (
                f"'args.n_samples_per_prompt' must stay {size}, the group size the prompt history "
                f"was built with (got {group_size})"
            )
            raise ValueError(msg)
        return self._prompts

    def restore_once(self, data_source: Any, rollout_id: int, prompts: StreamPrompts | None) -> None:
        """
        Before this configuration's first rollout here: restore the state slime's checkpoint holds.

        Raises:
            CheckpointError: the checkpoint holds states but not the one to restore, or one
                saved under other settings; nothing is restored then.
        """
        if not self._restored:
            restore_stream_state(data_source, rollout_id, self.session, prompts)
            self._restored = True  # only once restored: a refused state is refused again


# One session per configuration (both mappings and the batch size), for the life of slime's
# rollout actor; reset() forgets them with the filter's.
_STREAMS: SessionRegistry[_Stream] = SessionRegistry()


def _count_arg(args: Any, name: str) -> int:
    return check_count(getattr(args, name, None), f"args.{name}", 1)


def _build(raw: tuple[Any, Any], target: int) -> _Stream:
    return _Stream(
        SlimeAdmissionSettings.from_mapping(raw[0]), SlimeStreamingSettings.from_mapping(raw[1]), target
    )


def _stream(args: Any, target: int) -> _Stream:
    raw = (getattr(args, SETTINGS_ATTR, None), getattr(args, STREAMING_SETTINGS_ATTR, None))
    return _STREAMS.get([*raw, target], lambda: _build(raw, target))


def reset() -> None:
    """
    Forget every session of the slime adapter, the filter's and the streaming rollout's (for tests).

    .. versionadded:: 0.2.0
    """
    _hooks.reset()
    _STREAMS.reset()


def _check_args(args: Any) -> None:
    if args is None or isinstance(args, (str, bytes, int, float)):
        msg = f"'args' must be slime's parsed arguments (got {describe(args)})"
        raise TypeError(msg)
    path = getattr(args, "dynamic_sampling_filter_path", None)
    if path is not None:
        msg = (
            "'--dynamic-sampling-filter-path' must be unset with streaming_rollout: it judges every "
            f"group with the '{SETTINGS_ATTR}' policy itself and would ignore another filter (got {path!r})"
        )
        raise ValueError(msg)


def _started_in(group: Any) -> int | None:
    """The rollout a group carried over by slime's abort started in (``metadata['start_rollout_id']``)."""
    starts = [
        start
        for sample in leaves(group)
        if isinstance(start := (getattr(sample, "metadata", None) or {}).get("start_rollout_id"), int)
    ]
    return min(starts) if starts else None


@attrs.define
class _Launch:
    order: int
    tokens: int  # response tokens the group held when it was launched (a resumed group's earlier ones)
    started: int | None  # the rollout it started in, when it resumes from slime's buffer


@attrs.define
class _Finished:
    order: int
    group: Any
    started: int | None


@attrs.define
class _Rollout:
    """One rollout's groups: in flight, finished, kept and rejected."""

    args: Any
    stream: _Stream
    state: Any  # slime's GenerateState
    target: int
    group_size: int
    rollout_id: int
    prompts: StreamPrompts | None = None
    tally: PickTally = attrs.Factory(PickTally)
    launches: dict[Any, _Launch] = attrs.Factory(dict)
    kept: list[_Finished] = attrs.Factory(list)
    rejected: list[_Finished] = attrs.Factory(list)  # gate rejections: usable rewards, no signal
    finished: list[_Finished] = attrs.Factory(list)
    judged: set[Any] = attrs.Factory(set)
    carried_in: int = 0
    stopped: bool = False

    def unjudged(self) -> list[Any]:
        """The launched groups not judged: in flight, or finished with the one that stopped the rollout."""
        return sorted(set(self.launches) - self.judged, key=lambda task: self.launches[task].order)

    def resumable(self, task: Any) -> bool:
        """Whether slime can resume a finished task's group: all its members came back, none failed."""
        if task.cancelled() or task.exception() is not None or len(task.result()) != self.group_size:
            return False
        return all(
            getattr(getattr(sample, "status", None), "value", None) != "failed"
            for sample in leaves(task.result())
        )

    def charge_unjudged(self, tasks: list[Any], *, carried: bool) -> None:
        """
        Charge the tokens the unjudged groups decoded in this rollout where they were decoded.

        ``carried``: slime hands them back for a later rollout (``--partial-rollout``),
        which counts only what they decode then; else they are lost, aborted.
        """
        tokens = sum(self.decoded(task) for task in tasks if task.done())
        self.stream.session.charge(tokens, kind="carried" if carried else "aborted")

    def draw(self, data_source: Any, count: int) -> list[Any]:
        """``count`` fresh groups from the data source: the prompts the history keeps, if there is one."""
        if self.prompts is None:
            return list(data_source.get_samples(count))
        return self.prompts.draw(data_source, count, self.rollout_id, self.tally)

    def launch(self, groups: list[Any]) -> None:
        # One group at a time, so that each of slime's tasks is known with its group.
        for group in groups:
            before = set(self.state.pendings)
            self.state.submit_generate_tasks([group])
            for task in set(self.state.pendings) - before:
                self.launches[task] = _Launch(len(self.launches), response_tokens(group), _started_in(group))

    def decoded(self, task: Any) -> int:
        """The response tokens a group decoded in this rollout (a resumed group's earlier ones excluded)."""
        if task.cancelled() or task.exception() is not None:
            return 0  # its samples never came back: nothing of it can be counted
        return max(0, response_tokens(task.result()) - self.launches[task].tokens)

    def finish(self, task: Any, gatherer: Any) -> None:
        """Judge a finished group and count it in the session, with the tokens it produced in this rollout."""
        self.judged.add(task)
        launch = self.launches[task]
        session, admission = self.stream.session, self.stream.settings
        error = None if task.cancelled() else task.exception()
        if task.cancelled() or error is not None:
            # A generation or reward error loses the group, not the rollout: it is counted as external.
            _log.warning("group_admission_generation_failed", error=repr(error))
            decision = failed_group(self.group_size, GENERATION_FAILED).evaluate(session.policy)
            session.record(decision, samples=self.group_size)
            gatherer.on_dynamic_filter_drop(reason=drop_reason(decision))
            return
        group = task.result()
        read = read_group(self.args, group, admission.reject_statuses, size=self.group_size)
        decision = read.evaluate(session.policy)
        verdict = session.record(decision, samples=max(1, len(group)), generated_tokens=self.decoded(task))
        if self.prompts is not None:
            self.prompts.observe(group, decision, self.rollout_id)
        done = _Finished(launch.order, group, launch.started)
        self.finished.append(done)
        if verdict.keep:
            if len(self.kept) < self.target:  # the others finished with the one that met it: surplus
                self.kept.append(done)
        else:
            gatherer.on_dynamic_filter_drop(reason=drop_reason(decision))
            if decision.reason is not RejectionReason.EXTERNAL:
                self.rejected.append(done)

    def plan(self) -> StreamPlan:
        settings = self.stream.streaming
        return self.stream.session.stream_plan(
            len(self.state.pendings),
            num_generations=self.group_size,  # the confidence is the budget's: see budget_for
            race=settings.race,
            top_up_below=settings.top_up_below,
        )


async def _launch_and_judge(rollout: _Rollout, data_source: Any, gatherer: Any) -> StreamPlan:
    """Launch what the plan asks for and judge what finishes, until the target is met or nothing can run."""
    buffered = getattr(data_source, "get_buffer_length", None)
    rollout.carried_in = int(buffered()) if callable(buffered) else 0
    if rollout.carried_in:
        # Groups slime's abort put back resume first, and count as in flight.
        rollout.launch(data_source.get_samples(rollout.carried_in))
    while True:
        plan = rollout.plan()
        if plan.launch:
            rollout.launch(rollout.draw(data_source, plan.launch))
        if plan.abort or plan.exhausted or not plan.remaining_target_groups or not rollout.state.pendings:
            return plan
        done, rollout.state.pendings = await asyncio.wait(
            rollout.state.pendings, return_when=asyncio.FIRST_COMPLETED
        )
        for task in sorted(done, key=lambda task: rollout.launches[task].order):
            rollout.finish(task, gatherer)


async def _rollout(
    args: Any, rollout_id: int, data_source: Any, stream: _Stream, target: int, slime: _Slime
) -> Any:
    size = _count_arg(args, "n_samples_per_prompt")
    prompts = stream.prompts(args, size)
    stream.restore_once(data_source, rollout_id, prompts)
    state = slime.rollout.GenerateState(args)
    rollout = _Rollout(args, stream, state, target, size, rollout_id, prompts)
    gatherer = slime.filters.MetricGatherer()
    session = stream.session
    with admission_step(session, target) as step:
        try:
            plan = await _launch_and_judge(rollout, data_source, gatherer)
            in_flight = len(state.pendings)
            carried = await _stop(rollout, rollout_id, data_source, slime)
        except BaseException:
            with contextlib.suppress(Exception):  # the error that stopped the rollout is the one to see
                await _stop(rollout, rollout_id, data_source, slime)
            raise
        finally:
            state.reset()
    # The samples slime trains on: those masked whole (an off-policy mask) train on nothing.
    data = _fill(rollout, step.report, plan)
    report = step.report.with_loss_masks(
        getattr(sample, "loss_mask", None) for group in data for sample in leaves(group)
    )
    _post_hooks(args, slime, data, rollout, data_source)
    metrics = rollout_metrics(
        session=session,
        report=report,
        plan=plan,
        kept=[item.group for item in rollout.kept],
        resumed_ages=[rollout_id - item.started for item in rollout.kept if item.started is not None],
        counts={
            "carried_in_group_count": rollout.carried_in,
            "carried_out_group_count": carried,
            "aborted_group_count": in_flight,
            "launched_group_count": len(rollout.launches),
            "surplus_group_count": report.surplus_groups,  # slime discards them too
            "padded_group_count": len(data) - len(rollout.kept),
        },
    )
    if prompts is not None:
        metrics.update(prompts.metrics(rollout.tally, rollout_id, METRIC_PREFIX))
    save_stream_state(data_source, rollout_id, session, None if prompts is None else prompts.history)
    log_metrics(_log, "group_admission_rollout", metrics, METRIC_PREFIX)
    return slime.base_types.RolloutFnTrainOutput(samples=data, metrics={**gatherer.collect(), **metrics})


def _partial(args: Any) -> bool:
    return bool(getattr(args, "partial_rollout", False))


async def _stop(rollout: _Rollout, rollout_id: int, data_source: Any, slime: _Slime) -> int:
    """
    End a rollout's generation: abort what runs, charge what it decoded, hand back what can resume.

    Once the target is met, or when an error stops the rollout: slime's ``abort`` stops
    every request; the groups not judged (in flight, or finished with a group that stopped
    the rollout) are charged the tokens they decoded in this rollout. With
    ``--partial-rollout`` they go back to the data source's buffer as slime's own abort
    hands them back (samples stamped with the rollout they started in), except a group
    slime cannot resume (a failed sample, or not ``n_samples_per_prompt`` members); they
    are charged as ``carried``, the others as ``aborted``. Returns the groups handed back.
    """
    state = rollout.state
    if state.pendings and not state.aborted:
        await slime.rollout.abort(rollout.args, rollout_id)
    if rollout.stopped:
        return 0
    rollout.stopped = True
    unjudged = [task for task in rollout.unjudged() if task.done()]
    back = [task for task in unjudged if _partial(rollout.args) and rollout.resumable(task)]
    rollout.charge_unjudged([task for task in unjudged if task not in back], carried=False)
    rollout.charge_unjudged(back, carried=True)
    groups = [task.result() for task in back]
    for sample in (sample for group in groups for sample in leaves(group)):
        if getattr(sample, "response", None) and isinstance(getattr(sample, "metadata", None), dict):
            sample.metadata.setdefault("start_rollout_id", rollout_id)
    if groups:
        data_source.add_samples(groups)
    return len(groups)


def _sort_key(item: _Finished) -> tuple[int, int]:
    first = next(leaves(item.group), None)
    index = getattr(first, "index", None)
    return (index, item.order) if isinstance(index, int) else (item.order, item.order)


def _fill(rollout: _Rollout, report: StepReport, plan: StreamPlan) -> list[Any]:
    """The kept groups, filled to ``rollout_batch_size`` on exhaustion as the settings say."""
    missing = rollout.target - len(rollout.kept)
    chosen = rollout.kept
    if missing:
        settings = rollout.stream.streaming
        if settings.on_exhausted == "raise" or len(rollout.rejected) < missing:
            raise BudgetExhaustedError(_exhausted_message(rollout, report))
        padding = rollout.rejected[:missing]
        for item in padding:
            for sample in leaves(item.group):
                sample.remove_sample = True  # slime zeroes their loss mask: no gradient
        _log.warning(
            "group_admission_streaming_short",
            kept=len(rollout.kept),
            target=rollout.target,
            padded_without_gradient=missing,
            generated_groups=report.generated_groups,
            limited_by=list(plan.limited_by),
        )
        chosen = [*chosen, *padding]
    return [item.group for item in sorted(chosen, key=_sort_key)]


def _exhausted_message(rollout: _Rollout, report: StepReport) -> str:
    missing = rollout.target - len(rollout.kept)
    why = (
        f"on_exhausted is 'raise' in the '{STREAMING_SETTINGS_ATTR}' settings"
        if rollout.stream.streaming.on_exhausted == "raise"
        else f"only {len(rollout.rejected)} finished group(s) with usable rewards can fill the "
        f"{missing} missing place(s) without gradient"
    )
    budget = rollout.stream.session.controller.config
    advice = (
        f"The rollout cannot fill the batch: {why}. Check that the data is not all too easy or too "
        "hard for the model and that the reward works, or raise 'budget.max_extra_groups' "
        f"(now {budget.max_extra_groups}) in the '{STREAMING_SETTINGS_ATTR}' settings."
    )
    return exhausted_message("slime streaming", report, rollout.stream.session, advice)


def _post_hooks(args: Any, slime: _Slime, data: list[Any], rollout: _Rollout, data_source: Any) -> None:
    """Call slime's post-rollout hooks as its default loop calls them."""
    path = getattr(args, "rollout_sample_filter_path", None)
    if path is not None:
        slime.misc.load_function(path)(args, data)
    path = getattr(args, "rollout_all_samples_process_path", None)
    if path is not None:
        groups = [item.group for item in sorted(rollout.finished, key=_sort_key)]
        slime.misc.load_function(path)(args, groups, data_source.get_samples)


def streaming_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    """
    Roll out with streaming launches: slime's ``--rollout-function-path`` function.

    Launches groups from ``data_source`` as :meth:`AdmissionSession.stream_plan` says
    (groups slime's abort put back into the buffer first), judges each finished group as
    :func:`admission_filter` does, aborts the rest through slime's ``abort`` once the
    target is met (with ``--partial-rollout`` they go back to the buffer), and returns
    slime's ``RolloutFnTrainOutput`` of exactly ``rollout_batch_size`` groups with the
    adapter's metrics. Evaluation runs slime's own ``generate_rollout``.

    Settings: the ``group_admission`` mapping (:class:`SlimeAdmissionSettings`) and the
    ``group_admission_streaming`` mapping (:class:`SlimeStreamingSettings`) on ``args``.

    Raises:
        BudgetExhaustedError: the caps stopped the launches short of the target, and
            ``on_exhausted`` is ``"raise"`` or no finished rejected group is left to fill
            the missing places.
        ConsecutiveFailedGroupsError: too many external rejections in a row.
        TypeError, ValueError: bad settings, or ``--dynamic-sampling-filter-path`` is set.
        ImportError: slime is not importable.

    .. versionadded:: 0.2.0
    """
    slime = _Slime.load()
    if evaluation:
        return slime.rollout.generate_rollout(args, rollout_id, data_source, evaluation=True)
    _check_args(args)
    target = _count_arg(args, "rollout_batch_size")
    return slime.run(_rollout(args, rollout_id, data_source, _stream(args, target), target, slime))

"""
The JSON form of a :class:`DropTracker`: written with the session's state, restored exactly or refused.

Three keys of the session state: ``windows`` (``[step, judged, dropped]`` per tracked
step), ``evicted`` (the steps whose windows were evicted) and ``streak``. Besides each value,
a restore checks what ties them to the session's lifetime counts: the windows judged every
group the session counted (until one was evicted) and dropped only groups it rejected, and
the streak names external rejections the session counted.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Mapping
from typing import Any

from ._drop_tracker import WINDOWS, DropTracker, Evicted
from ._limits import DropLimits
from ._metrics import AdmissionStats
from ._state_checks import Fail, state_int
from ._validation import describe

__all__ = ["drops_state", "restore_drops"]


def drops_state(drops: DropTracker) -> dict[str, Any]:
    """The tracker's part of the session's state, as plain JSON types."""
    return {
        "windows": [[key, judged, dropped] for key, (judged, dropped) in drops.windows.items()],
        "evicted": {"through": drops.evicted.through, "labels": sorted(drops.evicted.labels)},
        "streak": dict(drops.streak),
    }


def restore_drops(
    state: Mapping[str, Any], limits: DropLimits, stats: AdmissionStats, fail: Fail
) -> DropTracker:
    """
    The tracker of a session state's ``windows``, ``evicted`` and ``streak``, checked against ``stats``.

    Raises:
        CheckpointError: through ``fail``, naming the first problem.
    """
    streak = _streak(state["streak"], stats, fail)
    windows = _windows(state["windows"], limits, fail)
    evicted = _evicted(state["evicted"], windows, limits, fail)
    _check_windows(windows, evicted, stats, fail, counted=limits.caps_drops)
    return DropTracker(limits, windows, streak, evicted)


def _windows(value: object, limits: DropLimits, fail: Fail) -> OrderedDict[Any, list[int]]:
    if not isinstance(value, list):
        fail(f"'windows' must be a list (got {describe(value)})")
    windows: OrderedDict[Any, list[int]] = OrderedDict()
    for entry in value:
        if (
            not isinstance(entry, list)
            or len(entry) != 3
            or isinstance(entry[0], bool)  # True would be the window of step 1
            or not isinstance(entry[0], (int, str, type(None)))
        ):
            fail(f"'windows' entries must be [step, judged, dropped] (got {describe(entry)})")
        judged, dropped = (
            state_int(entry[1], "windows.judged", fail),
            state_int(entry[2], "windows.dropped", fail),
        )
        if dropped > judged:
            fail(f"a window dropped more groups ({dropped}) than it judged ({judged})")
        if entry[0] in windows:
            fail(f"'windows' must hold each step once (got {entry[0]!r} twice)")
        windows[entry[0]] = [judged, dropped]
    if len(windows) > WINDOWS or (windows and not limits.caps_drops):
        fail(
            f"'windows' holds {len(windows)} window(s); these limits keep at most "
            f"{WINDOWS if limits.caps_drops else 0}"
        )
    if limits.scope == "run" and set(windows) - {"run"}:
        fail("run-scoped limits count in one window, 'run'")
    return windows


def _evicted(value: object, windows: Mapping[Any, list[int]], limits: DropLimits, fail: Fail) -> Evicted:
    """The evicted step labels: only step-scoped limits evict, and only from a full set of windows."""
    if not isinstance(value, Mapping) or set(value) != {"through", "labels"}:
        fail(f"'evicted' must be a mapping of exactly ['through', 'labels'] (got {describe(value)})")
    through, labels = value["through"], value["labels"]
    if through is not None and (isinstance(through, bool) or not isinstance(through, int)):
        fail(f"'evicted.through' must be an int step label or null (got {describe(through)})")
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        fail(f"'evicted.labels' must be a list of text step labels (got {describe(labels)})")
    if labels != sorted(set(labels)):
        fail("'evicted.labels' must be sorted, each label once")
    evicted = Evicted(through, frozenset(labels))
    if evicted and (limits.scope != "step" or not limits.caps_drops or len(windows) < WINDOWS):
        fail(
            f"'evicted' names evicted steps, but windows are evicted only by step-scoped limits "
            f"holding {WINDOWS} windows (these limits hold {len(windows)})"
        )
    if tracked := sorted(label for label in windows if isinstance(label, str) and label in evicted):
        fail(f"the step {tracked[0]!r} is both tracked in 'windows' and evicted")
    return evicted


def _check_windows(
    windows: Mapping[Any, list[int]], evicted: Evicted, stats: AdmissionStats, fail: Fail, *, counted: bool
) -> None:
    """
    Every group the limits judged is one the session counted, and every dropped one it rejected.

    With ``counted`` limits every group the session judged went through a window, so until one
    is evicted the windows hold exactly the session's groups.
    """
    judged = sum(window[0] for window in windows.values())
    dropped = sum(window[1] for window in windows.values())
    if judged > stats.candidates or (counted and not evicted and judged != stats.candidates):
        fail(
            f"the drop windows judged {judged} group(s) and the session {stats.candidates}: "
            "every group the limits judged counts once in its window (until the window is evicted)"
        )
    if dropped > stats.rejected:
        fail(f"the drop windows dropped {dropped} group(s), of {stats.rejected} the session rejected")


def _streak(value: object, stats: AdmissionStats, fail: Fail) -> Counter[str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        fail(f"'streak' must map external reasons to counts (got {describe(value)})")
    streak = Counter({key: state_int(count, f"streak.{key}", fail, 1) for key, count in value.items()})
    if sum(streak.values()) > stats.external:
        fail(
            f"'streak' counts {sum(streak.values())} external rejections in a row, of {stats.external} in all"
        )
    details = stats.external_details
    for reason, count in streak.items():  # each streak entry is an external rejection the stats counted
        if count > details.get(reason, 0):
            fail(
                f"'streak.{reason}' counts {count} rejection(s) the session counted "
                f"{details.get(reason, 0)} time(s) (stats.external_details)"
            )
    return streak

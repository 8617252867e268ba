"""
An asyncio event loop on a virtual clock: sleeping takes no real time.

When nothing is ready to run, the loop jumps its clock to the next timer instead of
waiting for it, so a rollout whose requests "take" thousands of seconds runs in
milliseconds and every run is deterministic. It stands in for slime's background loop
(``slime.utils.async_utils``), whose ``run(coro)`` blocks until the coroutine is done.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any


class _JumpingSelector(selectors.DefaultSelector):
    """A selector that, with nothing to read, advances the loop's clock by the timeout instead of waiting."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(0)
        if events or timeout == 0:
            return events
        if timeout is None:
            msg = "virtual clock: nothing is scheduled and nothing can wake the loop (a hang)"
            raise RuntimeError(msg)
        self._clock[0] = round(self._clock[0] + timeout, 6)
        return []


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` is virtual, starting at 0."""

    def __init__(self) -> None:
        self._clock = [0.0]
        super().__init__(_JumpingSelector(self._clock))

    def time(self) -> float:
        return self._clock[0]


class VirtualLoopRunner:
    """slime's ``AsyncLoopThread`` interface (``run(coro)`` blocks until done), on a virtual clock."""

    def __init__(self) -> None:
        self.loop = VirtualClockLoop()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coro)

    def now(self) -> float:
        return self.loop.time()

    def close(self) -> None:
        self.loop.close()

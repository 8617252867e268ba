"""Fixtures of the slime adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.slime import slime_types
from adapters.slime.stream_hosts import DoublesHost, Host, RealSlimeHost
from adapters.slime.virtual_clock import VirtualLoopRunner
from group_admission.adapters import slime as slime_adapter


@pytest.fixture
def fresh_slime_state() -> Iterator[None]:
    """Forget every slime session, the detected output class, loaded functions and singletons."""

    def clear() -> None:
        slime_adapter.reset()
        slime_types.load_function.cache_clear()
        slime_types.SingletonMeta._instances.clear()

    clear()
    yield
    clear()


@pytest.fixture(params=["doubles", "slime"])
def slime_host(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, fresh_slime_state: None
) -> Iterator[Host]:
    """A host for slime rollouts on a virtual clock: the doubles, or slime's tree (``SLIME_SRC``)."""
    runner = VirtualLoopRunner()
    host_type = DoublesHost if request.param == "doubles" else RealSlimeHost
    try:
        host = host_type(monkeypatch, runner)
        yield host
        host.clear()
    finally:
        runner.close()

"""Fixtures of the slime adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from adapters.slime import slime_types
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

"""Fixtures shared by the adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from doubles import slime_types
from group_admission.adapters import _slime_runtime
from group_admission.adapters import slime as slime_adapter


@pytest.fixture
def fresh_slime_state() -> Iterator[None]:
    """Forget every cached slime runtime, output type, loaded function and singleton."""

    def clear() -> None:
        _slime_runtime.reset_runtimes()
        slime_adapter.filter_output_type.cache_clear()
        slime_types.load_function.cache_clear()
        slime_types.SingletonMeta._instances.clear()

    clear()
    yield
    clear()

"""The options of the benchmarks that run under pytest (``pytest benchmarks/bench_slime_streaming.py``)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--slime-steps``: the rollouts per strategy of bench_slime_streaming.py."""
    parser.addoption("--slime-steps", type=int, default=100, help="rollouts per strategy (default 100)")

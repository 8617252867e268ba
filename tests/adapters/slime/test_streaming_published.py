"""The slime streaming figures docs/adapters/slime.md publishes are those bench_slime_streaming.py wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
RESULTS = json.loads((ROOT / "benchmarks" / "results" / "bench_slime_streaming.json").read_text())
PAGE = (ROOT / "docs" / "adapters" / "slime.md").read_text()
ROWS = {
    "slime": "slime's default (waves of 32)",
    "slime+partial": "slime's default, `--partial-rollout`",
    "streaming(0.99)": "`streaming_rollout`, confidence 0.99",
    "streaming(0.99,partial)": "... confidence 0.99, `--partial-rollout`",
    "streaming(0.999,partial)": "... confidence 0.999, `--partial-rollout`",
    "streaming(0.99,race 2,partial)": "... confidence 0.99, race 2, `--partial-rollout`",
}


@pytest.mark.parametrize("name", ROWS)
def test_the_page_quotes_the_benchmark(name: str) -> None:
    cells = []
    for setting in RESULTS["settings"].values():
        row = setting[name]
        resumed = f"{row['resumed_share']:.0%}" if row["resumed_share"] else "-"
        judged = f"{row['judged_token_share']:.0%}" if "judged_token_share" in row else "-"
        cells += [f"{row['time_vs_slime']:.3f}", f"{row['tokens_vs_slime']:.3f}", resumed, judged]

    assert f"| {ROWS[name]} | {' | '.join(cells)} |" in PAGE


def test_every_real_figure_is_the_simulators() -> None:
    rows = [row for setting in RESULTS["settings"].values() for row in setting.values()]

    assert len(rows) == 2 * len(ROWS)
    for row in rows:
        for key in ("time_per_step", "tokens", "resumed_share"):
            assert row[f"simulated_{key}"] == row[key]
    assert RESULTS["slime_commit"].startswith("624b824a8")


def test_every_streaming_rollout_reports_every_token_the_engine_decoded() -> None:
    streaming = [r for s in RESULTS["settings"].values() for n, r in s.items() if n.startswith("streaming")]

    assert len(streaming) == 2 * 4
    assert all(row["reported_token_share"] == 1.0 for row in streaming)
    assert all(row["judged_token_share"] < 1.0 for row in streaming)  # what the judged groups alone hold

"""Bad settings and arguments of ``streaming_rollout``: each raises a named error on the first call."""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import pytest

from adapters.slime.scripted_engine import bernoulli_script
from adapters.slime.stream_hosts import CHECKED_COMMIT, Host, make_args
from group_admission.adapters import slime as slime_adapter
from group_admission.adapters._kit import _hosts as _host_support
from group_admission.adapters.slime import SlimeStreamingSettings

SETTINGS: list[tuple[str, Any, type[Exception], str]] = [
    ("not a mapping", [1], TypeError, "'group_admission_streaming' .* must be a mapping"),
    ("an unknown key", {"confidance": 0.9}, ValueError, "unknown key.*'confidance'"),
    ("confidence 1", {"confidence": 1.0}, ValueError, r"'confidence' must be in \(0, 1\) \(got 1.0\)"),
    ("confidence 0", {"confidence": 0}, ValueError, r"'confidence' must be in \(0, 1\)"),
    ("confidence as text", {"confidence": "high"}, TypeError, "'confidence'"),
    ("a race below 1", {"race": 0.5}, ValueError, "'race' must be >= 1"),
    ("an infinite race", {"race": float("inf")}, ValueError, "'race'"),
    ("top_up_below 1", {"top_up_below": 1.0}, ValueError, r"'top_up_below' must be in \(0, 1\)"),
    (
        "an unknown exhaustion action",
        {"on_exhausted": "skip"},
        ValueError,
        "'on_exhausted' must be one of 'train', 'raise'",
    ),
    (
        "two confidences that differ",
        {"confidence": 0.8, "budget": {"confidence": 0.7}},
        ValueError,
        r"'confidence' and 'budget.confidence' must agree, or give only one of them \(got 0.8 and 0.7\)",
    ),
    ("a budget that is a list", {"budget": [1]}, TypeError, "'budget' must be a SamplingBudgetConfig"),
    (
        "a negative budget",
        {"budget": {"max_extra_groups": -1}},
        ValueError,
        "'max_extra_groups' must be >= 0",
    ),
    ("an unknown budget key", {"budget": {"max_rounds": 1}}, ValueError, "unknown key.*'max_rounds'"),
    (
        "an unknown loss scale",
        {"loss_scale": "mean"},
        ValueError,
        "'loss_scale' must be one of 'kept', 'target'",
    ),
    ("a history that is a number", {"history": 3}, TypeError, "'history' must be a preset's name, a mapping"),
    (
        "a history naming no preset",
        {"history": "best"},
        ValueError,
        r"'history' must name a preset with a history section, one of \[.*'recommended'.*\(got 'best'\)",
    ),
    (
        "a history naming a preset without one",
        {"history": "zero_std"},
        ValueError,
        r"'history' must name a preset with a history section.*\(got 'zero_std'\)",
    ),
    (
        "a history setting the group size",
        {"history": {"group_size": 4}},
        ValueError,
        "'history.group_size' is the host's group size",
    ),
    ("a history with an unknown key", {"history": {"half_lif": 9}}, ValueError, "unknown key.*'half_lif'"),
    ("a history threshold above 1", {"history": {"skip_below": 2}}, ValueError, "'skip_below' must be"),
    (
        "an empty prompt id key",
        {"prompt_id_key": ""},
        ValueError,
        "'prompt_id_key' must be None or a non-empty",
    ),
    ("a prompt id key that is a number", {"prompt_id_key": 5}, TypeError, "'prompt_id_key' must be None"),
]


@pytest.mark.parametrize(("raw", "error", "match"), [c[1:] for c in SETTINGS], ids=[c[0] for c in SETTINGS])
def test_bad_settings_are_refused_naming_the_field(raw: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        SlimeStreamingSettings.from_mapping(raw)


ARGS: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("no rollout_batch_size", {"rollout_batch_size": None}, TypeError, "'args.rollout_batch_size'"),
    (
        "a zero rollout_batch_size",
        {"rollout_batch_size": 0},
        ValueError,
        "'args.rollout_batch_size' must be >= 1",
    ),
    (
        "a dynamic filter",
        {"dynamic_sampling_filter_path": "x.y"},
        ValueError,
        "'--dynamic-sampling-filter-path' must be unset",
    ),
    ("bad streaming settings", {"group_admission_streaming": {"race": 0}}, ValueError, "'race' must be >= 1"),
    ("bad admission settings", {"group_admission": {"bogus": 1}}, ValueError, "unknown key.*'bogus'"),
]


@pytest.mark.parametrize(("overrides", "error", "match"), [c[1:] for c in ARGS], ids=[c[0] for c in ARGS])
def test_bad_arguments_fail_the_first_rollout_naming_them(
    slime_host: Host, overrides: dict[str, Any], error: type[Exception], match: str
) -> None:
    args = make_args(**overrides)

    with pytest.raises(error, match=match):
        slime_adapter.streaming_rollout(args, 0, data_source=None)


@pytest.mark.parametrize("args", [None, "args", 3], ids=["None", "text", "a number"])
def test_args_that_are_not_slimes_arguments_are_refused(slime_host: Host, args: Any) -> None:
    with pytest.raises(TypeError, match="'args' must be slime's parsed arguments"):
        slime_adapter.streaming_rollout(args, 0, data_source=None)


def test_without_slime_the_rollout_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ["slime", *(name for name in sys.modules if name.startswith("slime."))]:
        monkeypatch.setitem(sys.modules, name, None)  # an import of it raises ImportError

    with pytest.raises(
        ImportError,
        match=r"requires slime, inside whose RolloutManager .*pip install git\+https://github.com/THUDM/slime",
    ):
        slime_adapter.streaming_rollout(make_args(), 0, data_source=None)


def test_the_tables_cover_the_settings() -> None:
    fields = {name for _, raw, _, _ in SETTINGS if isinstance(raw, dict) for name in raw}
    assert {"confidence", "race", "top_up_below", "on_exhausted", "budget", "loss_scale"} <= fields
    assert {"history", "prompt_id_key"} <= fields


class _GitInstall:
    """importlib.metadata's view of slime installed by ``pip install git+...@<commit>``."""

    def __init__(self, commit: str) -> None:
        self.version = "0.3.1"
        self._commit = commit

    def read_text(self, name: str) -> str | None:
        if name != "direct_url.json":
            return None
        return json.dumps(
            {"url": "https://github.com/THUDM/slime", "vcs_info": {"vcs": "git", "commit_id": self._commit}}
        )


@pytest.mark.parametrize(
    ("commit", "warns"), [(CHECKED_COMMIT, False), ("0123456789abcdef0123456789abcdef01234567", True)]
)
def test_a_slime_from_another_commit_warns_once_naming_the_checked_one(
    slime_host: Host, monkeypatch: pytest.MonkeyPatch, commit: str, warns: bool
) -> None:
    monkeypatch.setattr(_host_support.metadata, "distribution", lambda _name: _GitInstall(commit))
    monkeypatch.setattr(_host_support, "_checked", set())
    args = make_args(rollout_batch_size=2, n_samples_per_prompt=2)
    slime_host.install_engine(bernoulli_script(size=2, pass_rate=1.0), 2)
    data_source = slime_host.data_source(args)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rollout_id in range(2):
            slime_host.streaming(args, rollout_id, data_source)

    found = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(found) == int(warns)
    assert all(f"slime THUDM/slime@{CHECKED_COMMIT}" in str(w.message) for w in found)
    assert all("got slime from commit 0123456789ab" in str(w.message) for w in found)

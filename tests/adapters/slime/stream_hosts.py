"""
The two hosts the streaming rollout tests run on: slime's real tree (``SLIME_SRC``) and the doubles.

The real host imports slime from ``SLIME_SRC`` with slime's own CPU stubs for ``ray``,
``sglang_router`` and (when it is not installed) ``transformers``
(``tests/plugin_contracts/_shared.py``), and replaces only what faces the engine
(new_hosts.md section 3.5): the router's ``/workers`` reply (``get``),
``abort_servers_until_idle``, ``load_tokenizer``, ``load_processor`` and
``get_rollout_num_engines``; generation and reward are the scripted engine, plugged in
through slime's own ``--custom-generate-function-path`` and ``--custom-rm-path``; slime's
background loop (``slime.utils.async_utils.async_loop``) runs on the virtual clock.
Everything else, ``GenerateState``, ``generate_and_rm_group``, ``abort``, the data source
with its buffer and slime's default ``generate_rollout``, is slime's code.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from adapters.slime import scripted_engine, stream_doubles
from adapters.slime.scripted_engine import GENERATE_PATH, REWARD_PATH, Script, ScriptedEngine
from adapters.slime.virtual_clock import VirtualLoopRunner
from group_admission.adapters import slime as slime_adapter

CHECKED_COMMIT = "624b824a898ab0ec1fcb4d373004c7f3852bf515"
STREAMING_PATH = "group_admission.adapters.slime.streaming_rollout"
DEFAULT_PATH = "slime.rollout.sglang_rollout.generate_rollout"
#: What slime's rollout modules import, beyond this project's own dependencies.
SLIME_IMPORTS = ("torch", "tqdm", "httpx", "aiohttp", "PIL", "pylatexenc")


def make_args(**overrides: Any) -> argparse.Namespace:
    """slime's parsed arguments, as far as the rollout reads them; engine and reward are scripted."""
    values: dict[str, Any] = {
        "rollout_batch_size": 4,
        "n_samples_per_prompt": 4,
        "over_sampling_batch_size": None,
        "rollout_global_dataset": True,
        "prompt_data": None,
        "buffer_filter_path": None,
        "partial_rollout": False,
        "mask_offpolicy_in_partial_rollout": False,
        "custom_generate_function_path": GENERATE_PATH,
        "custom_rm_path": REWARD_PATH,
        "group_rm": False,
        "reward_key": None,
        "rm_type": None,
        "rollout_sample_hook_path": [],
        "dynamic_sampling_filter_path": None,
        "rollout_sample_filter_path": None,
        "rollout_all_samples_process_path": None,
        "hf_checkpoint": "scripted-engine",
        "sglang_server_concurrency": 100_000,
        "sglang_dp_size": None,
        "sglang_enable_deterministic_inference": False,
        "sglang_router_ip": "127.0.0.1",
        "sglang_router_port": 30000,
        "rollout_temperature": 1.0,
        "rollout_top_p": 1.0,
        "rollout_top_k": -1,
        "rollout_max_response_len": 1_000_000,
        "rollout_stop": None,
        "rollout_stop_token_ids": None,
        "rollout_skip_special_tokens": False,
        "rollout_seed": 42,
        "rollout_shuffle": False,
        "ci_test": False,
        "use_rollout_routing_replay": False,
        "router_policy": None,
        "eval_datasets": [],
        "group_admission": {"policy": {"min_reward_std": 1e-6}, "max_consecutive_failed_groups": None},
        "group_admission_streaming": None,
        # slime's data source, with a prompt file (prompt_data): its Dataset and checkpoint.
        "input_key": "text",
        "label_key": "label",
        "metadata_key": "metadata",
        "multimodal_keys": None,
        "tool_key": None,
        "apply_chat_template": False,
        "apply_chat_template_kwargs": {},
        "rollout_max_prompt_len": None,
        "dump_details": None,
        "save": None,
        "load": None,
    }
    values.update(overrides)
    if values["over_sampling_batch_size"] is None:
        values["over_sampling_batch_size"] = values["rollout_batch_size"]  # slime's default
    return argparse.Namespace(**values)


def _installed(name: str) -> bool:
    if name in sys.modules:  # imported, or stubbed by slime's contract helpers
        return True
    return importlib.util.find_spec(name) is not None


def _load_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def real_slime() -> SimpleNamespace | str:
    """slime's modules from ``SLIME_SRC``, imported once; or why they cannot be."""
    source = os.environ.get("SLIME_SRC")
    if not source:
        return "SLIME_SRC is not set: point it at a slime source tree to run against slime itself"
    root = Path(source)
    shared = root / "tests" / "plugin_contracts" / "_shared.py"
    if not (root / "slime" / "rollout" / "sglang_rollout.py").is_file() or not shared.is_file():
        return f"SLIME_SRC={source!r} holds no slime source tree"
    missing = [name for name in SLIME_IMPORTS if not _installed(name)]
    if missing:
        return f"slime's rollout modules need {missing} (.ci/slime-contracts installs them)"
    stubs = _load_file("slime_contract_shared", shared)
    stubs.install_stubs(with_sglang_router=True, with_transformers=not _installed("transformers"))
    sys.path.insert(0, str(root))
    names = {
        "rollout": "slime.rollout.sglang_rollout",
        "data_source": "slime.rollout.data_source",
        "base_types": "slime.rollout.base_types",
        "misc": "slime.utils.misc",
        "async_utils": "slime.utils.async_utils",
        "types": "slime.utils.types",
    }
    return SimpleNamespace(root=root, **{key: importlib.import_module(name) for key, name in names.items()})


class Host:
    """Where a test's rollouts run: the engine, slime's data source, the streaming and default rollouts."""

    name: str
    Sample: Any

    def __init__(self, monkeypatch: pytest.MonkeyPatch, runner: VirtualLoopRunner) -> None:
        self.monkeypatch = monkeypatch
        self.runner = runner
        self.engine: ScriptedEngine | None = None

    def install_engine(self, script: Script, group_size: int) -> ScriptedEngine:
        self.engine = ScriptedEngine(script, group_size)
        self.monkeypatch.setattr(scripted_engine, "ENGINE", self.engine)
        return self.engine

    def now(self) -> float:
        return self.runner.now()

    def clear(self) -> None:
        """Forget slime's ``GenerateState`` singleton (it keeps the ``args`` it was first built with)."""
        stream_doubles.slime_types.SingletonMeta._instances.clear()

    def data_source(self, args: argparse.Namespace) -> Any:
        raise NotImplementedError

    def streaming(self, args: argparse.Namespace, rollout_id: int, data_source: Any) -> Any:
        assert self.engine is not None
        self.engine.begin_rollout(rollout_id)
        return slime_adapter.streaming_rollout(args, rollout_id, data_source)

    def default_rollout(self, args: argparse.Namespace, rollout_id: int, data_source: Any) -> Any:
        pytest.skip("slime's default generate_rollout runs only on slime's real tree")


class DoublesHost(Host):
    name = "doubles"
    Sample = stream_doubles.Sample

    def __init__(self, monkeypatch: pytest.MonkeyPatch, runner: VirtualLoopRunner) -> None:
        super().__init__(monkeypatch, runner)
        stream_doubles.install(monkeypatch, runner)

    def data_source(self, args: argparse.Namespace) -> Any:
        return stream_doubles.RolloutDataSourceWithBuffer(args)


class RealSlimeHost(Host):
    name = "slime"

    def __init__(self, monkeypatch: pytest.MonkeyPatch, runner: VirtualLoopRunner) -> None:
        super().__init__(monkeypatch, runner)
        slime = real_slime()
        if isinstance(slime, str):
            pytest.skip(slime)
        self.slime = slime
        self.Sample = slime.types.Sample
        rollout = slime.rollout
        monkeypatch.setattr(rollout, "get", scripted_engine.get_workers)
        monkeypatch.setattr(rollout, "abort_servers_until_idle", scripted_engine.abort_servers_until_idle)
        monkeypatch.setattr(rollout, "load_tokenizer", lambda *args, **kwargs: object())
        monkeypatch.setattr(rollout, "load_processor", lambda *args, **kwargs: None)
        monkeypatch.setattr(rollout, "get_rollout_num_engines", lambda args: 1)
        monkeypatch.setattr(slime.data_source, "load_tokenizer", lambda *args, **kwargs: object())
        monkeypatch.setattr(slime.data_source, "load_processor", lambda *args, **kwargs: None)
        monkeypatch.setattr(slime.async_utils, "async_loop", runner)
        slime.misc.SingletonMeta._instances.clear()

    def clear(self) -> None:
        self.slime.misc.SingletonMeta._instances.clear()

    def data_source(self, args: argparse.Namespace) -> Any:
        return self.slime.data_source.RolloutDataSourceWithBuffer(args)

    def _call(self, path: str, args: argparse.Namespace, rollout_id: int, data_source: Any) -> Any:
        # As slime's RolloutManager calls it (slime/ray/rollout.py L592).
        assert self.engine is not None
        self.engine.begin_rollout(rollout_id)
        function = self.slime.misc.load_function(path)
        return self.slime.base_types.call_rollout_fn(
            function, args, rollout_id, data_source, evaluation=False
        )

    def streaming(self, args: argparse.Namespace, rollout_id: int, data_source: Any) -> Any:
        return self._call(STREAMING_PATH, args, rollout_id, data_source)

    def default_rollout(self, args: argparse.Namespace, rollout_id: int, data_source: Any) -> Any:
        return self._call(DEFAULT_PATH, args, rollout_id, data_source)

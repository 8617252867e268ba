"""
``streaming_rollout`` as slime's own rollout contract test calls it.

slime's ``tests/plugin_contracts/test_plugin_rollout_contracts.py`` calls the function at
``--rollout-function-path`` with ``args=None`` (a plug-in that reads no arguments passes
as it is). The streaming rollout reads slime's arguments, so this entry, with the same
signature, supplies them when slime passes none: scripted ones, the scripted engine
(``scripted_engine``) behind the engine-facing pieces, and one small evaluation dataset,
then calls :func:`group_admission.adapters.slime.streaming_rollout` unchanged. Run from
slime's tree, with this checkout's ``src`` and ``tests`` on ``PYTHONPATH``::

    python tests/plugin_contracts/test_plugin_rollout_contracts.py \\
        --rollout-function-path adapters.slime.stream_contract.streaming_rollout
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from adapters.slime import scripted_engine
from adapters.slime.scripted_engine import GroupScript, ScriptedEngine
from adapters.slime.stream_hosts import make_args
from adapters.slime.virtual_clock import VirtualLoopRunner
from group_admission.adapters import slime as slime_adapter


@functools.cache
def _contract_args() -> Any:
    """Arguments for the contract's data source (groups of 2) and a one-prompt evaluation dataset."""
    rollout = sys.modules["slime.rollout.sglang_rollout"]
    eval_config = importlib.import_module("slime.utils.eval_config")
    path = Path(tempfile.mkdtemp(prefix="ga-slime-contract-")) / "eval.jsonl"
    path.write_text(json.dumps({"text": "1 + 1 = ?", "label": "2"}) + "\n")
    for name, value in {
        "get": scripted_engine.get_workers,
        "abort_servers_until_idle": scripted_engine.abort_servers_until_idle,
        "load_tokenizer": lambda *args, **kwargs: object(),
        "load_processor": lambda *args, **kwargs: None,
        "get_rollout_num_engines": lambda args: 1,
    }.items():
        setattr(rollout, name, value)
    sys.modules["slime.utils.async_utils"].async_loop = VirtualLoopRunner()
    scripted_engine.ENGINE = ScriptedEngine(lambda rollout_id, position: GroupScript((3, 4), (1.0, 0.0)), 2)
    dataset = eval_config.EvalDatasetConfig(
        name="contract_eval", path=str(path), input_key="text", label_key="label", n_samples_per_eval_prompt=1
    )
    return make_args(
        rollout_batch_size=2,
        n_samples_per_prompt=2,
        group_admission=None,  # the policy's defaults: the contract's groups all tie at 0.0
        eval_datasets=[dataset],
        eval_max_prompt_len=None,
        multimodal_keys=None,
        apply_chat_template=False,
        apply_chat_template_kwargs=None,
        eval_min_new_tokens=None,
        eval_reward_key=None,
    )


def streaming_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    """:func:`group_admission.adapters.slime.streaming_rollout`; scripted arguments when slime passes none."""
    if args is None:
        args = _contract_args()
    return slime_adapter.streaming_rollout(args, rollout_id, data_source, evaluation)

"""
The adapter in AReaL 1.0.4's own ``WorkflowExecutor``, running its ``RLVRWorkflow`` in groups.

Only the inference engine is stood in (``StandInEngine``: AReaL's ``agenerate`` and
``get_version``, without an SGLang or vLLM server); the executor, its staleness manager,
``GroupedRolloutWorkflow``, ``RLVRWorkflow``, the reward wrapper's process pool, the
``should_accept_fn`` import-path resolution and ``stats_tracker`` are AReaL's. Runs in
``.ci/areal``, where AReaL is installed; skipped elsewhere.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

pytest.importorskip("areal.infra.workflow_executor")

from areal.api import ModelResponse
from areal.api.cli_args import GenerationHyperparameters, InferenceEngineConfig
from areal.infra.remote_inf_engine import GroupedRolloutWorkflow
from areal.infra.workflow_executor import WorkflowExecutor
from areal.utils import stats_tracker
from areal.utils.dynamic_import import import_from_string
from areal.workflow.rlvr import RLVRWorkflow
from torchdata.stateful_dataloader import StatefulDataLoader

from group_admission.adapters.areal import SETTINGS_ENV, AdmissionWorkflow, AReaLAdmission

GROUP = 4
# Raised inside AReaL's and its dependencies' own code, not the adapter's.
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")


def tokenizer() -> Any:
    from cookbook.grpo_gsm8k.offline.tiny_model import train_tokenizer

    return train_tokenizer(["0123456789 dead solved mixed user assistant"], vocab_size=300)


def answered(
    prompt: str, completions: str, prompt_ids: list[int], completion_ids: list[int], **data: Any
) -> float:
    """The reward function AReaL's workflow calls (in its process pool): 1 for a right answer."""
    return float(completions.strip().startswith(str(data["answer"])))


class StandInEngine:
    """AReaL's inference engine as a workflow sees it: a policy version and ``agenerate``."""

    def __init__(self) -> None:
        self.version = 0
        self.draws = random.Random(0)

    def get_version(self) -> int:
        return self.version

    async def agenerate(self, req: Any) -> ModelResponse:
        text = req.tokenizer.decode(req.input_ids)
        kind = text.rsplit("user\n", 1)[-1].split()[0]
        right = self.draws.random() < {"dead": 0.0, "solved": 1.0}.get(kind, 0.5)
        output = req.tokenizer.encode("1" if right else "0", add_special_tokens=False)
        return ModelResponse(
            input_tokens=list(req.input_ids),
            output_tokens=output,
            output_logprobs=[-0.5] * len(output),
            output_versions=[self.version] * len(output),
            tokenizer=req.tokenizer,
        )


def rows(kinds: list[str]) -> list[dict[str, Any]]:
    return [
        {"messages": [{"role": "user", "content": f"{k} {i}"}], "answer": 1, "query_id": f"q{i}"}
        for i, k in enumerate(kinds)
    ]


def executor(engine: StandInEngine, batch: int) -> WorkflowExecutor:
    config = InferenceEngineConfig(
        consumer_batch_size=batch, max_concurrent_rollouts=batch, max_head_offpolicyness=2
    )
    run = WorkflowExecutor(config, engine)
    run.initialize(train_data_parallel_size=1)
    return run


BLOCK = {
    "preset": "recommended",
    "budget": {"max_extra_groups": 4},
    "stream": {"window_groups": 2},
    "group_size": GROUP,
}


@pytest.fixture
def workflow() -> Any:
    tok = tokenizer()
    gconfig = GenerationHyperparameters(n_samples=GROUP, max_new_tokens=4)
    return GroupedRolloutWorkflow(RLVRWorkflow(answered, gconfig, tok), GROUP, logger=_logger())


def _logger() -> Any:
    import logging

    return logging.getLogger("test")


def test_areal_resolves_the_import_path_and_its_executor_keeps_only_admitted_groups(
    workflow: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SETTINGS_ENV, json.dumps({**BLOCK, "history": None}))
    stats_tracker.get("group_admission").export()  # what earlier tests recorded, reset
    accept = import_from_string("group_admission.adapters.areal.should_accept")  # as RemoteInfEngine does
    engine = StandInEngine()
    run = executor(engine, batch=4)
    loader = StatefulDataLoader(rows(["dead", "mixed", "solved", "mixed"] * 3), batch_size=4, collate_fn=list)
    try:
        batches = [run.prepare_batch(loader, workflow, should_accept_fn=accept) for _ in range(2)]
        engine.version = 1
        batches.append(run.prepare_batch(loader, workflow, should_accept_fn=accept))
    finally:
        run.destroy()  # stops AReaL's threads: the counts below are final
    stats = run.staleness_manager.get_stats()
    admission = import_from_string("group_admission.adapters.areal.current_admission")()
    stream = admission.stream

    for batch in batches:
        assert len(batch) == 4
        for traj in batch:
            assert traj["rewards"].shape == (GROUP,)
            assert traj["rewards"].std() > 0  # no dead group reached a batch
    # AReaL's own counts and the stream's agree: accepted groups were kept, rejected ones judged and dropped.
    assert stats.accepted == admission.stream.trained_groups() >= 12
    assert stats.accepted + stats.rejected == stream.stats.candidates
    assert stream.stats.exact_dead == stats.rejected > 0
    assert stream.tokens.generated == GROUP * stream.stats.candidates * 1  # one decoded token per member
    exported = stats_tracker.get("group_admission").export()
    assert exported["group_admission/admitted__count"] == stream.stats.candidates


def test_the_history_skips_prompts_before_generation_and_areal_counts_them_rejected(workflow: Any) -> None:
    admission = AReaLAdmission({**BLOCK, "stream": {"window_groups": 1}})
    skipping = GroupedRolloutWorkflow(
        AdmissionWorkflow(workflow.workflow, admission, prompt_id_key="query_id"), GROUP, logger=_logger()
    )
    engine = StandInEngine()
    run = executor(engine, batch=2)
    loader = StatefulDataLoader(rows(["dead", "mixed"] * 2), batch_size=2, collate_fn=list)
    try:
        for step in range(12):
            run.prepare_batch(loader, skipping, should_accept_fn=admission)
            engine.version = step + 1  # a training step: AReaL's staleness control admits more
    finally:
        run.destroy()
    stats = run.staleness_manager.get_stats()
    stream = admission.stream

    assert stream.ledger.skipped_prompts > 0
    # A skipped prompt decoded nothing and was never judged; AReaL counts it as a rejected rollout.
    assert stats.accepted + stats.rejected == stream.stats.candidates + stream.ledger.skipped_prompts
    assert stats.accepted == stream.trained_groups()
    assert stream.stats.external == 0  # a group is skipped whole: no member went missing

"""verl loads the sampler and the checkpoint callback from its own config, exactly as the docs say."""

from __future__ import annotations

import os
import re
import types
from pathlib import Path

import pytest

pytest.importorskip(
    "verl.trainer.ppo.v1.replay_buffer", reason="needs verl==0.9.1 and TransferQueue (run .ci/verl)"
)

import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.trainer.ppo.checkpoint_callback import build_checkpoint_callback
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_base import PPOTrainer

from group_admission.adapters.verl import AdmissionCheckpointCallback, AdmissionReplayBuffer

# verl's own trainer code calls its deprecated load_extern_type; that is verl's business.
pytestmark = pytest.mark.filterwarnings("ignore:.*load_extern_type.*:FutureWarning")

ROOT = Path(__file__).resolve().parents[3]
COOKBOOK = ROOT / "cookbook" / "configs" / "verl"
VERL_CONFIG = Path(verl.__file__).parent / "trainer" / "config"


def _doc_overrides() -> list[str]:
    """The Hydra overrides of the first ```bash block of docs/adapters/verl.md."""
    text = (ROOT / "docs" / "adapters" / "verl.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL)
    assert block is not None
    # The shell removes the quotes that protect ${...} from it; so do we.
    lines = [line.strip().rstrip("\\").strip().replace("'", "") for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "python"))]


def _build(config) -> tuple[object, object]:
    """Build the replay buffer and checkpoint callback with verl's own trainer code."""
    OmegaConf.resolve(config)  # TaskRunnerV1.run resolves the config before building the trainer
    trainer = types.SimpleNamespace(
        config=config,
        trainer_mode=config.trainer.v1.trainer_mode,
        _add_prompts_to_generate=lambda count: count,
    )
    return PPOTrainer._build_replay_buffer(trainer), build_checkpoint_callback(config)


def test_docs_overrides_load_the_adapter() -> None:
    """The overrides docs/adapters/verl.md gives, on verl's own ppo_trainer config."""
    with initialize_config_dir(config_dir=str(VERL_CONFIG), version_base=None):
        config = compose(config_name="ppo_trainer", overrides=_doc_overrides())

    buffer, callback = _build(config)

    assert isinstance(buffer, AdmissionReplayBuffer)
    assert isinstance(buffer, ReplayBuffer)
    assert isinstance(callback, AdmissionCheckpointCallback)
    assert ("acc",) == buffer.settings.policy.gate_on
    assert config.trainer.default_local_dir == buffer.settings.checkpoint_dir


def test_cookbook_config_loads_the_adapter_for_gsm8k_grpo() -> None:
    """The cookbook config plus verl's GSM8K GRPO overrides composes and builds the adapter."""
    lines = (COOKBOOK / "gsm8k_grpo_overrides.txt").read_text(encoding="utf-8").split()
    overrides = [line.replace("${HOME}", os.environ.get("HOME", "/root")) for line in lines]
    with initialize_config_dir(config_dir=str(COOKBOOK), version_base=None):
        config = compose(config_name="group_admission", overrides=overrides)

    buffer, callback = _build(config)

    assert isinstance(buffer, AdmissionReplayBuffer)
    assert isinstance(callback, AdmissionCheckpointCallback)
    settings = buffer.settings
    assert 5 == settings.num_generations  # interpolated from actor_rollout_ref.rollout.n
    assert 1024 == settings.budget.max_extra_groups  # one extra train batch
    assert 1 == settings.gen_batch_size
    assert "grpo" == config.algorithm.adv_estimator
    assert not config.algorithm.filter_groups.enable  # verl's own filter stays off


def test_bad_settings_fail_at_construction() -> None:
    """A typo in sampler_kwargs is named when verl builds the sampler, not mid-run."""
    with initialize_config_dir(config_dir=str(VERL_CONFIG), version_base=None):
        config = compose(
            config_name="ppo_trainer",
            overrides=[*_doc_overrides(), "+trainer.v1.sampler.sampler_kwargs.max_extra_group=3"],
        )

    with pytest.raises(ValueError, match="unknown key\\(s\\) 'max_extra_group'"):
        _build(config)


def test_async_trainer_modes_are_refused() -> None:
    """Only the sync trainer has a step to budget; the async modes are refused by name."""
    with pytest.raises(ValueError, match="trainer_mode=sync only"):
        AdmissionReplayBuffer(
            trainer_mode="colocate_async",
            trainer_config=OmegaConf.create({}),
            max_off_policy_threshold=8,
            max_off_policy_strategy="drop",
            sampler_kwargs=OmegaConf.create({}),
            refill_fn=lambda count: count,
        )

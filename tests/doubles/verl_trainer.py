"""
verl 0.9.1's sync trainer without a model: its own config, dataloader, dispatch and checkpoint of ``data.pt``.

``TrainerRun`` is a ``PPOTrainer`` whose methods that touch prompts are verl's own:
``_build_replay_buffer`` (loads the sampler from ``trainer.v1.sampler.custom_sampler``),
``_init_dataloader`` (``create_rl_dataset``, ``create_rl_sampler``, the
``StatefulDataLoader``), ``prepare_step`` -> ``_next_train_batch`` -> ``_submit_batch_to_rollout``
(the prompt tags) and ``_add_prompts_to_generate`` (the refills); a step then calls the
replay buffer's ``sample`` as ``PPOTrainer._step_once`` does, and the checkpoint saves and
loads the dataloader state as ``_save_checkpoint``/``_load_checkpoint`` do. Only the rollout
is scripted: ``ScriptedAgentLoop`` writes what verl's ``AgentLoopWorkerTQ`` writes, each
trajectory carrying its prompt row's fields (``field.update(kwargs)``), with rewards by the
prompt's row index. Import only where verl is.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import verl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from tensordict import NonTensorData, NonTensorStack
from verl.trainer.ppo.v1 import PPOTrainerSync
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from doubles.verl_rollout import Member, _trajectory

VERL_CONFIG = Path(verl.__file__).parent / "trainer" / "config"
#: Members of a group, given the prompt's row index in the train dataset and the global step.
Rewards = Callable[[int, int], list[Member]]


def write_prompts(folder: Path, count: int) -> str:
    """A parquet train file of ``count`` prompts, in the columns verl's GSM8K preprocessing writes."""
    rows = [
        {
            "prompt": [{"role": "user", "content": f"question {index}"}],
            "data_source": "toy",
            "reward_model": {"ground_truth": str(index)},
            "extra_info": {"index": index},
        }
        for index in range(count)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "train.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return str(path)


def verl_config(train_file: str, *overrides: str) -> Any:
    """verl's own ``ppo_trainer`` config with the adapter's sampler and the given overrides."""
    with initialize_config_dir(config_dir=str(VERL_CONFIG), version_base=None):
        config = compose(
            config_name="ppo_trainer",
            overrides=[
                f"data.train_files={train_file}",
                f"data.val_files={train_file}",
                "data.gen_batch_size=1",
                "data.dataloader_num_workers=0",
                "trainer.v1.sampler.custom_sampler.path=pkg://group_admission.adapters.verl",
                "trainer.v1.sampler.custom_sampler.name=AdmissionReplayBuffer",
                "+trainer.v1.sampler.sampler_kwargs.poll_interval=0.01",
                *overrides,
            ],
        )
    OmegaConf.resolve(config)  # TaskRunnerV1.run resolves the config before building the trainer
    return config


class ScriptedAgentLoop:
    """verl's ``AgentLoopManagerTQ.generate_sequences``, reduced to what reaches the TransferQueue."""

    def __init__(self, tq: Any, rewards: Rewards) -> None:
        self.tq = tq
        self.rewards = rewards
        self.prompts: list[dict[str, Any]] = []  # every prompt dispatched, as the agent loop sees it

    def generate_sequences(self, batch: Any) -> None:
        for i in range(len(batch)):
            # AgentLoopWorkerTQ.generate_sequences: one prompt dict per row of the batch.
            prompt = {}
            for key, value in batch.items():
                if isinstance(value, torch.Tensor):
                    prompt[key] = value[i]
                elif isinstance(value, NonTensorStack):
                    prompt[key] = value[i].data
                elif isinstance(value, NonTensorData):
                    prompt[key] = value.data
            self.prompts.append(prompt)
            self._run_prompt(prompt)

    def _run_prompt(self, prompt: dict[str, Any]) -> None:
        uid, row = prompt["uid"], int(prompt["index"])  # extra_info.index: the row, in write_prompts
        fields, keys, tags = [], [], []
        for session, (info, score) in enumerate(self.rewards(row, int(prompt["global_steps"]))):
            keys.append(f"{uid}_{session}_0")
            plain = {key: value for key, value in prompt.items() if not isinstance(value, torch.Tensor)}
            fields.append({**plain, **_trajectory(uid, info, score)})  # field.update(kwargs), as verl
            tags.append({"status": "success", "response_len": 3, "global_steps": prompt["global_steps"]})
        self.tq.kv_batch_put(
            keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags
        )
        self.tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})


class TrainerRun(PPOTrainerSync):  # type: ignore[misc]
    """verl's sync ``PPOTrainer`` whose prompt path is verl's own code; no workers, no model."""

    def __init__(self, config: Any, tq: Any, rewards: Rewards) -> None:
        # PPOTrainer.__init__ builds workers and callbacks; the prompt path needs only these.
        self.config = config
        self.trainer_mode = config.trainer.v1.trainer_mode
        self.parameter_sync_step = config.trainer.v1.get(self.trainer_mode, {}).get("parameter_sync_step", 1)
        self.global_steps = 0
        self.tq = tq
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # verl's own load_extern_type
            self.replay_buffer = self._build_replay_buffer()
        self.tokenizer, self.processor = None, None
        self._init_dataloader()
        self.agent_loop_manager = ScriptedAgentLoop(tq, rewards)

    def train_step(self, global_steps: int) -> tuple[Any, dict[str, Any]]:
        """One step as ``fit`` runs it: dispatch the batch, sample from the buffer, clear the queue."""
        self.global_steps = global_steps
        self.prepare_step()
        batch, metrics = self.replay_buffer.sample(
            global_steps=global_steps, partition_id="train", batch_size=self.config.data.train_batch_size
        )
        self.tq.kv_clear(keys=list((self.tq.kv_list("train") or {}).get("train", {})), partition_id="train")
        return batch, metrics

    def save_data(self, folder: Path) -> Path:
        """``_save_checkpoint``'s dataloader part: ``torch.save(train_dataloader.state_dict())``."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "data.pt"
        torch.save(self.train_dataloader.state_dict(), path)
        return path

    def load_data(self, path: Path) -> None:
        """``_load_checkpoint``'s dataloader part."""
        self.train_dataloader.load_state_dict(torch.load(path, weights_only=False))

    def dispatched(self) -> list[int]:
        """The row index of every prompt dispatched so far, in order."""
        return [int(prompt["index"]) for prompt in self.agent_loop_manager.prompts]

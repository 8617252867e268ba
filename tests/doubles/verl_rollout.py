"""
verl's v1 rollout, reduced to what reaches the TransferQueue, and the samplers under test.

``FakeRollout`` writes prompt tags, trajectory tags and fields exactly as verl 0.9.1's
``AgentLoopWorkerTQ._run_prompt`` / ``_agent_loop_postprocess`` and
``PPOTrainer._submit_batch_to_rollout`` do (``verl/trainer/ppo/v1/agent_loop_tq.py``,
``trainer_base.py``), with rewards from a scripted stream. Import only where verl is.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

#: One trajectory's reward: ``reward_extra_info`` (as the reward manager writes it) and
#: the scalar verl puts on the last token of ``rm_scores``.
Member = tuple[dict[str, Any], Any]
#: Members of one prompt group, given the index of the prompt in the whole stream; ``None``
#: is a session that failed (it writes nothing, and the prompt ends as ``failure``).
Stream = Callable[[int], list[Member | None]]


def dapo_member(acc: float, shaping: float = 0.0) -> Member:
    """
    A member as verl 0.9.1's ``DAPORewardManager`` scores it with ``math_dapo``.

    ``reward_extra_info`` holds the scorer's ``score`` (1 right, -1 wrong) and ``acc``, plus
    the ``overlong_reward`` penalty; only the reward in ``rm_scores`` adds the penalty.
    """
    score = 1.0 if acc else -1.0
    return {"acc": acc, "score": score, "overlong_reward": shaping}, score + shaping


class FakeRollout:
    """
    verl's agent loop, reduced to what reaches the TransferQueue.

    ``submit(k)`` registers ``k`` prompts (``{"is_prompt": True, "status": "pending"}``,
    as ``PPOTrainer._submit_batch_to_rollout`` does), writes each session's trajectory
    (key ``{uid}_{session}_{index}``, fields ``extra_fields``/``rm_scores``/``responses``,
    tags ``status``/``response_len``/``global_steps``) and marks the prompt ``finished``, or
    ``failure`` when a session failed (``None`` in the stream), as ``_run_prompt`` does.
    ``outputs`` outputs per session model a multi-output agent loop, whose outputs all carry
    the final output's reward, as verl copies it. It is verl's ``refill_fn`` for the samplers
    under test.
    """

    def __init__(self, tq: Any, stream: Stream, *, global_steps: int = 1, outputs: int = 1) -> None:
        self.tq = tq
        self.outputs = outputs
        self.stream = stream
        self.global_steps = global_steps
        self.prompts = 0
        self.refills: list[int] = []
        self.uids: list[str] = []

    def submit(self, count: int) -> int:
        """Generate ``count`` groups and leave them terminal in the queue."""
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        for _ in range(count):
            uid = uuid.uuid4().hex
            members = self.stream(self.prompts)
            self.prompts += 1
            self.uids.append(uid)
            prompt_tag = {"is_prompt": True, "status": "pending", "global_steps": self.global_steps}
            self.tq.kv_batch_put(keys=[uid], partition_id="train", tags=[prompt_tag])
            fields, tags, keys = [], [], []
            for session, member in enumerate(members):
                if member is None:
                    continue
                info, score = member
                for index in range(self.outputs):
                    keys.append(f"{uid}_{session}_{index}")
                    fields.append(_trajectory(uid, info, score))
                    tags.append({"status": "success", "response_len": 3, "global_steps": self.global_steps})
            if keys:
                self.tq.kv_batch_put(
                    keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags
                )
            status = "failure" if any(member is None for member in members) else "finished"
            self.tq.kv_put(key=uid, partition_id="train", tag={"status": status})
        return count

    def refill(self, count: int) -> int:
        """verl's ``refill_fn``: record the request, then generate."""
        self.refills.append(count)
        return self.submit(count)


def _trajectory(uid: str, info: dict[str, Any], score: Any) -> dict[str, Any]:
    """The fields verl's agent loop stores for one output (those the samplers read)."""
    import torch

    rm_scores = torch.zeros(3, dtype=torch.float32)
    rm_scores[-1] = score  # verl puts the reward on the last response token
    return {
        "responses": torch.tensor([5, 6, 7], dtype=torch.int64),
        "rm_scores": rm_scores,
        "extra_fields": {"reward_extra_info": dict(info)},
        "uid": uid,
    }


def make_sampler(refill: Callable[[int], int], **sampler_kwargs: Any) -> Any:
    """An ``AdmissionReplayBuffer`` built with the keyword arguments verl's trainer passes."""
    from omegaconf import OmegaConf

    from group_admission.adapters.verl import AdmissionReplayBuffer

    sampler_kwargs.setdefault("poll_interval", 0.01)
    return AdmissionReplayBuffer(
        trainer_mode="sync",
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=8,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create(sampler_kwargs),
        refill_fn=refill,
    )


def make_builtin(refill: Callable[[int], int], metric: str, train_batch_size: int) -> Any:
    """verl's own sync ``ReplayBuffer`` with DAPO filtering, as ``_build_replay_buffer`` builds it."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    return ReplayBuffer(
        trainer_mode="sync",
        trainer_config=OmegaConf.create({}),
        max_off_policy_threshold=8,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create({}),
        poll_interval=0.01,
        refill_fn=refill,
        filter_groups_metric=metric,
        train_batch_size=train_batch_size,
        gen_batch_size=1,
        max_inflight_gen_batches=1,
    )

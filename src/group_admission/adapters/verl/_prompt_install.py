"""
Putting :class:`AdmissionPromptSampler` under verl 0.9.1's train dataloader, which has no sampler setting.

verl 0.9.1 builds its train sampler in ``create_rl_sampler`` (``verl/trainer/ppo/utils.py``)
with no config key for a class of one's own (verl 0.5-0.7's ``data.sampler.class_path`` is
gone), inside ``PPOTrainer._init_dataloader``. The replay buffer is the one class verl
builds from config before that (in ``PPOTrainer.__init__``, handed the trainer's bound
``_add_prompts_to_generate`` as ``refill_fn``), so with a ``history`` setting it wraps that
trainer's ``_init_dataloader``: verl builds its dataloader, then the train dataloader is
rebuilt with the same dataset (its rows carrying their index), batch size, ``drop_last``
and collate function, and the prompt sampler. Nothing of verl's module state is changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._kit import build_history
from ._prompt_sampler import AdmissionPromptSampler, PromptIdDataset
from ._verl_imports import PPOTrainer, StatefulDataLoader

__all__ = ["install_prompt_sampler"]


def install_prompt_sampler(
    refill_fn: Any,
    section: Mapping[str, Any],
    num_generations: int | None,
    on_sampler: Callable[[AdmissionPromptSampler], None],
) -> None:
    """
    Have the trainer that owns ``refill_fn`` draw its prompts through a prompt sampler.

    ``on_sampler`` receives the sampler once the trainer's dataloader exists (at once if it
    does already).

    Raises:
        ValueError: ``refill_fn`` is not a method of verl's ``PPOTrainer``.
    """
    trainer = getattr(refill_fn, "__self__", None)
    if not isinstance(trainer, PPOTrainer):
        msg = (
            "'history' in trainer.v1.sampler.sampler_kwargs needs verl's PPOTrainer, whose train "
            f"dataloader the prompt sampler replaces (refill_fn is {_owner(refill_fn)})"
        )
        raise ValueError(msg)

    def replace() -> None:
        on_sampler(_replace_sampler(trainer, section, num_generations))

    if getattr(trainer, "train_dataloader", None) is not None:
        replace()
        return
    init_dataloader = trainer._init_dataloader

    def init_then_replace() -> None:
        init_dataloader()
        replace()

    trainer._init_dataloader = init_then_replace


def _owner(refill_fn: Any) -> str:
    owner = getattr(refill_fn, "__self__", None)
    return f"a method of {type(owner).__name__}" if owner is not None else f"a {type(refill_fn).__name__}"


def _replace_sampler(
    trainer: Any, section: Mapping[str, Any], num_generations: int | None
) -> AdmissionPromptSampler:
    """Rebuild the trainer's train dataloader around a prompt sampler; return the sampler."""
    data = trainer.config.data
    workers = data.get("dataloader_num_workers", 8)
    if workers != 0:
        msg = (
            "'data.dataloader_num_workers' must be 0 with a prompt history: worker processes fetch "
            f"prompts ahead of the picks and snapshot the sampler's state at every fetch (got {workers})"
        )
        raise ValueError(msg)
    rollout_n = int(trainer.config.actor_rollout_ref.rollout.n)
    if num_generations is not None and num_generations != rollout_n:
        msg = (
            f"'num_generations' must be actor_rollout_ref.rollout.n ({rollout_n}), the history's "
            f"group size (got {num_generations})"
        )
        raise ValueError(msg)
    seed = data.get("seed")  # the picks' seed: verl's shuffle seed, unless the section sets one
    history = build_history(section, rollout_n, seed=int(seed) if seed is not None and int(seed) >= 0 else 0)
    sampler = AdmissionPromptSampler(trainer.train_dataset, data, history)
    old = trainer.train_dataloader
    trainer.train_dataloader = StatefulDataLoader(
        dataset=PromptIdDataset(old.dataset),
        batch_size=old.batch_size,
        num_workers=0,
        drop_last=old.drop_last,
        collate_fn=old.collate_fn,
        sampler=sampler,
    )
    trainer.train_dataloader_it = None
    return sampler

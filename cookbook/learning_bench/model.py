"""
The policy: a small causal transformer in plain torch, its sampling, its loss, its warm start.

Sampling is by inverse CDF from uniforms fixed in advance for every (group, member,
position): the same uniforms give the same completion under the same policy, whichever
batch the group is decoded in. That is what makes the counterfactual group of a skipped
prompt the group it would have got (common random numbers).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext

import attrs
import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from cookbook.learning_bench.task import DOT, PAD, VOCAB_SIZE, Task, prompt_tokens, score, solution_tokens

__all__ = [
    "ModelSize",
    "Policy",
    "TinyLM",
    "advantages",
    "build_policy",
    "greedy_accuracy",
    "pick",
    "policy_loss",
    "uniforms",
    "warm_start",
]


@attrs.frozen
class ModelSize:
    """The transformer's shape."""

    layers: int = 3
    width: int = 128
    heads: int = 4
    max_length: int = 16

    def parameters(self) -> int:
        """Parameters of a model of this size (embeddings, blocks, final norm, head)."""
        per_block = 12 * self.width**2 + 13 * self.width
        return (
            (VOCAB_SIZE + self.max_length) * self.width
            + self.layers * per_block
            + 2 * self.width
            + (self.width * VOCAB_SIZE + VOCAB_SIZE)
        )


Cache = list[tuple[torch.Tensor, torch.Tensor]]  # per block: keys and values so far


class _Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(
        self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        n, t, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(n, t, 3, self.heads, w // self.heads).transpose(1, 3).unbind(2)
        if past is not None:  # decoding one token at a time: it attends to everything before it
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        x = x + self.proj(attended.transpose(1, 2).reshape(n, t, w))
        return x + self.mlp(self.norm2(x)), (k, v)


class TinyLM(nn.Module):
    """A pre-norm causal transformer over the task's 27-token vocabulary."""

    def __init__(self, size: ModelSize) -> None:
        super().__init__()
        self.size = size
        self.embed = nn.Embedding(VOCAB_SIZE, size.width)
        self.position = nn.Embedding(size.max_length, size.width)
        self.blocks = nn.ModuleList(_Block(size.width, size.heads) for _ in range(size.layers))
        self.norm = nn.LayerNorm(size.width)
        self.head = nn.Linear(size.width, VOCAB_SIZE)

    def forward(self, tokens: torch.Tensor, cache: Cache | None = None) -> tuple[torch.Tensor, Cache]:
        """
        Logits ``(n, t, vocab)`` of the next token at every position, and the key/value cache.

        With ``cache`` (from the previous call), ``tokens`` continue those sequences.
        """
        start = 0 if cache is None else cache[0][0].shape[2]
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.position(positions)
        new_cache: Cache = []
        for index, block in enumerate(self.blocks):
            x, kv = block(x, None if cache is None else cache[index])
            new_cache.append(kv)
        return self.head(self.norm(x)), new_cache


@attrs.define
class Policy:
    """The model with its optimizer, device and precision, and a version counted per update."""

    model: TinyLM
    optimizer: torch.optim.Optimizer
    device: torch.device
    autocast: torch.dtype | None = None  # bf16 on CUDA; None (fp32) on CPU
    version: int = 0

    def precision(self) -> AbstractContextManager[object]:
        """The forward pass's autocast context (none on CPU)."""
        if self.autocast is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)

    def logits(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token logits in fp32."""
        with self.precision():
            logits: torch.Tensor = self.model(tokens)[0]
            return logits.float()

    @torch.no_grad()
    def decode(
        self, prompts: torch.Tensor, max_new: int, noise: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """
        Complete every prompt (all of one length) in lockstep, with a key/value cache.

        ``noise`` ``(n, max_new)`` holds the uniforms that pick each token by inverse CDF
        (``None``: greedy). Returns the tokens and their log-probabilities, ``(n, max_new)``;
        tokens after a sequence's end mark are PAD.
        """
        n = len(prompts)
        tokens = torch.full((n, max_new), PAD, dtype=torch.long, device=prompts.device)
        logps = torch.zeros((n, max_new), device=prompts.device)
        finished = torch.zeros(n, dtype=torch.bool, device=prompts.device)
        step_input, cache = prompts, None
        columns = None if noise is None else noise.t().contiguous()  # one position's uniforms per row
        for k in range(max_new):
            with self.precision():
                logits, cache = self.model(step_input, cache)
            token, logp = pick(logits[:, -1].float(), None if columns is None else columns[k])
            tokens[:, k] = torch.where(finished, PAD, token)
            logps[:, k] = torch.where(finished, 0.0, logp)
            finished |= token == DOT
            if bool(finished.all()):
                break
            step_input = token[:, None]
        return tokens, logps

    @torch.no_grad()
    def sample_next(
        self, context: torch.Tensor, positions: torch.Tensor, uniforms: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """
        The next token at ``positions`` of each row of ``context``, and its log-probability.

        The prefix is recomputed: rows may be at different positions.
        """
        logits = self.logits(context)[torch.arange(len(context), device=context.device), positions]
        return pick(logits, uniforms)

    def update(self, loss: torch.Tensor) -> None:
        """One optimizer step on ``loss``; the version counts it."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        self.optimizer.step()
        self.version += 1


def pick(logits: torch.Tensor, uniforms: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """
    The token each row's uniform picks by inverse CDF at temperature 1, and its log-probability.

    Without uniforms (``None``), the most likely token.
    """
    logp = torch.log_softmax(logits, dim=-1)
    if uniforms is None:
        token = logits.argmax(dim=-1)
    else:
        cdf = torch.cumsum(logp.exp(), dim=-1)
        token = torch.searchsorted(cdf, uniforms[:, None].to(cdf.dtype)).squeeze(1).clamp_(max=VOCAB_SIZE - 1)
    return token, logp.gather(1, token[:, None]).squeeze(1)


def build_policy(size: ModelSize, *, lr: float, device: str = "cpu", seed: int = 0) -> Policy:
    """A freshly initialised model (seeded) and its AdamW optimizer, without weight decay."""
    torch.manual_seed(seed)
    model = TinyLM(size).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    autocast = torch.bfloat16 if torch.device(device).type == "cuda" else None
    return Policy(model, optimizer, torch.device(device), autocast)


def warm_start(
    policy: Policy,
    task: Task,
    problems: np.ndarray,
    validation: np.ndarray,
    *,
    target: float,
    max_steps: int,
    seed: int,
    step_share: float = 0.5,
    check_every: int = 20,
) -> dict[str, float]:
    """
    Supervised warm start on worked solutions, until the policy is partly competent.

    Each example is in the step format with probability ``step_share``; the loss is on the
    completion only (batches of 64). Every ``check_every`` steps the greedy accuracy on
    ``validation`` (problems neither held out nor trained on) is measured; training stops
    once it reaches ``target`` or after ``max_steps``. Returns the steps taken and the last
    validation accuracy.
    """
    rng = np.random.default_rng(seed)
    with_step = rng.random(len(problems)) < step_share
    rows = np.concatenate([prompt_tokens(task, problems), solution_tokens(problems, with_step)], axis=1)
    data = torch.as_tensor(rows, device=policy.device)
    start = task.prompt_length
    accuracy, steps = 0.0, 0
    while steps < max_steps:
        batch = data[torch.as_tensor(rng.integers(0, len(data), 64), device=policy.device)]
        logits = policy.logits(batch[:, :-1])[:, start - 1 :]
        loss = F.cross_entropy(logits.reshape(-1, VOCAB_SIZE), batch[:, start:].reshape(-1), ignore_index=PAD)
        policy.update(loss)
        steps += 1
        if steps % check_every == 0:
            accuracy = greedy_accuracy(policy, task, validation)["accuracy"]
            if accuracy >= target:
                break
    policy.version = 0
    return {"steps": steps, "validation_accuracy": accuracy}


def greedy_completions(policy: Policy, prompts: np.ndarray, max_new: int) -> np.ndarray:
    """Greedy completions ``(n, max_new)``: PAD after the end mark."""
    tokens, _ = policy.decode(torch.as_tensor(prompts, device=policy.device), max_new)
    return tokens.cpu().numpy()


def greedy_accuracy(policy: Policy, task: Task, problems: np.ndarray) -> dict[str, float]:
    """Held-out greedy accuracy, and the share of greedy answers that write the step."""
    completions = greedy_completions(policy, prompt_tokens(task, problems), task.max_new_tokens)
    scores = score(task, problems, completions)
    return {"accuracy": float(scores.outcome.mean()), "step_share": float(scores.step.mean())}


def group_std(values: np.ndarray) -> np.ndarray:
    """Sample standard deviation of each row (ddof 1, as TRL's advantages use)."""
    std: np.ndarray = values.std(axis=1, ddof=1) if values.shape[1] > 1 else np.zeros(len(values))
    return std


def advantages(rewards: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """GRPO advantages: ``(r - mean) / (std + eps)`` within each group (row)."""
    scaled: np.ndarray = (rewards - rewards.mean(axis=1, keepdims=True)) / (group_std(rewards)[:, None] + eps)
    return scaled


def policy_loss(
    policy: Policy,
    prompts: np.ndarray,
    completions: np.ndarray,
    behaviour_logp: np.ndarray,
    lengths: np.ndarray,
    advantage: np.ndarray,
    *,
    clip: float = 0.2,
) -> torch.Tensor:
    """
    The clipped policy-gradient loss, a mean over every completion token.

    Each token's ratio is against the log-probability of the policy that generated it
    (``behaviour_logp``): 1 for a token this policy decoded, so the loss is plain on-policy
    GRPO; a resumed group's older tokens are corrected and clipped as PPO does.
    """
    device = policy.device
    width = prompts.shape[1]
    tokens = torch.as_tensor(np.concatenate([prompts, completions], axis=1), device=device)
    logits = policy.logits(tokens[:, :-1])[:, width - 1 :]
    target = tokens[:, width:]
    logp = torch.log_softmax(logits, dim=-1).gather(2, target[:, :, None]).squeeze(2)
    mask = torch.as_tensor(np.arange(completions.shape[1])[None, :] < lengths[:, None], device=device)
    ratio = torch.exp(logp - torch.as_tensor(behaviour_logp, device=device))
    adv = torch.as_tensor(advantage, dtype=torch.float32, device=device)[:, None]
    surrogate = torch.minimum(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv)
    return -(surrogate * mask).sum() / mask.sum().clamp(min=1)


def uniforms(seed: int, key: Sequence[int], shape: tuple[int, int]) -> np.ndarray:
    """The sampling uniforms of one group, a pure function of ``(seed, key)``."""
    sequence = np.random.SeedSequence([seed, *key])
    return np.random.default_rng(sequence).random(shape, dtype=np.float32)

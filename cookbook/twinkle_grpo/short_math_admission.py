"""
GRPO the twinkle-kit 0.5.1 way, with group admission between the rewards and GRPOAdvantage.

The loop of twinkle's ``cookbook/rl/grpo/short_math_grpo.py`` (sample G completions per
prompt, reward = accuracy + brevity, ``GRPOAdvantage``, ``GRPOLoss``), with two changes:

- ``sample_admitted_groups`` samples the batch, judges each group on its *accuracy* (not on
  the sum, where brevity alone gives all-wrong groups a full-strength gradient), and
  resamples fresh prompts in rounds until the batch has its kept groups or the budget says
  stop;
- the step trains on the kept rows only, so twinkle's loss normalises over them alone.

To run on a CPU in seconds, the model is a tiny tabular policy (per problem: one choice of
answer and one of length) behind a ``Sampler`` subclass; rewards (``GSM8KAccuracyReward``),
advantages (``GRPOAdvantage``) and the loss (``GRPOLoss``) are twinkle's own. On a GPU, put
``vLLMSampler`` and ``TransformersModel`` where ``TinyPolicySampler`` and ``TinyPolicy`` are
(see docs/adapters/twinkle.md). Run: python -m cookbook.twinkle_grpo.short_math_admission
"""

from __future__ import annotations

import argparse
import itertools
import random
from collections.abc import Iterator
from typing import Any, NoReturn

import torch
from twinkle import get_logger
from twinkle.advantage import GRPOAdvantage
from twinkle.data_format import SampledSequence, SampleResponse, SamplingParams
from twinkle.loss import GRPOLoss
from twinkle.metric import CompletionRewardMetric
from twinkle.reward import GSM8KAccuracyReward
from twinkle.reward.base import Reward
from twinkle.sampler import Sampler

from group_admission.adapters.twinkle import TwinkleGroupAdmission, sample_admitted_groups

logger = get_logger()

# (question, answer, how well the untrained policy knows it): 'easy' groups are all right
# (dead), 'hard' ones all wrong (dead on accuracy, phantom on accuracy + brevity).
PROBLEMS = [
    (f"What is {a} + {b}?", str(a + b), level)
    for a, b, level in (
        (2, 2, "easy"),
        (3, 4, "easy"),
        (5, 1, "easy"),
        (6, 2, "easy"),
        (12, 9, "medium"),
        (15, 8, "medium"),
        (27, 16, "medium"),
        (33, 19, "medium"),
        (48, 37, "medium"),
        (56, 29, "medium"),
        (384, 297, "hard"),
        (913, 478, "hard"),
    )
]
PRIOR = {"easy": 4.0, "medium": 0.0, "hard": -6.0}  # logit of the right answer, the others at 0
WRONG_OFFSETS = (-2, 1, 10)  # the wrong candidate answers: truth + offset
LENGTHS = (120, 900, 2400)  # characters of reasoning before the \boxed{} answer


class GSM8KBrevityReward(Reward):  # type: ignore[misc]  # twinkle is untyped
    """1.0 for an answered completion of <= 300 characters, decaying to 0 at 3,300."""

    def __call__(self, trajectories: list[dict[str, Any]], **kwargs: Any) -> list[float]:
        """Each trajectory's brevity score."""
        scores = []
        for trajectory in trajectories:
            text = trajectory["messages"][-1]["content"]
            scores.append(
                0.0 if r"\boxed{" not in text else max(0.0, min(1.0, 1.0 - (len(text) - 300) / 3000))
            )
        return scores


class TinyPolicy(torch.nn.Module):
    """Per problem, logits over 4 answers (index 0 is right) and over 3 completion lengths."""

    def __init__(self) -> None:
        super().__init__()
        prior = [[PRIOR[level], 0.0, 0.0, 0.0] for _, _, level in PROBLEMS]
        self.answer = torch.nn.Parameter(torch.tensor(prior))
        self.length = torch.nn.Parameter(torch.zeros(len(PROBLEMS), len(LENGTHS)))

    def logps(self, problem: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """The log-probability of each completion's two tokens (answer, length): ``(rows, 2)``."""
        answer = torch.log_softmax(self.answer[problem], -1).gather(1, tokens[:, :1])
        length = torch.log_softmax(self.length[problem], -1).gather(1, tokens[:, 1:])
        return torch.cat([answer, length], dim=1)

    def accuracy(self, level: str) -> float:
        """The probability of the right answer, averaged over the problems of ``level``."""
        rows = [i for i, (_, _, lvl) in enumerate(PROBLEMS) if lvl == level]
        return float(torch.softmax(self.answer[rows].detach(), -1)[:, 0].mean())


class TinyPolicySampler(Sampler):  # type: ignore[misc]  # twinkle is untyped
    """A twinkle Sampler over :class:`TinyPolicy`: blocks per call, one response per input."""

    def __init__(self, policy: TinyPolicy, seed: int) -> None:
        super().__init__()
        self.policy = policy
        self.generator = torch.Generator().manual_seed(seed)

    def sample(
        self,
        inputs: list[dict[str, Any]],
        sampling_params: Any = None,
        adapter_name: str = "",
        *,
        num_samples: int = 1,
    ) -> list[Any]:
        """One response per input, each of ``sampling_params.num_samples`` sequences."""
        params = sampling_params or SamplingParams()
        responses = []
        for trajectory in inputs:
            problem = dict(trajectory["user_data"])["problem"]
            responses.append(
                SampleResponse(sequences=[self._one(trajectory, problem) for _ in range(params.num_samples)])
            )
        return responses

    def apply_patch(self, patch_cls: Any, **kwargs: Any) -> NoReturn:
        """Not supported: the tiny policy has nothing to patch."""
        raise NotImplementedError

    def _one(self, trajectory: dict[str, Any], problem: int) -> SampledSequence:
        with torch.no_grad():
            answer = int(
                torch.multinomial(torch.softmax(self.policy.answer[problem], -1), 1, generator=self.generator)
            )
            length = int(
                torch.multinomial(torch.softmax(self.policy.length[problem], -1), 1, generator=self.generator)
            )
            logps = self.policy.logps(torch.tensor([problem]), torch.tensor([[answer, length]]))[0].tolist()
        truth = int(PROBLEMS[problem][1])
        value = truth if answer == 0 else truth + WRONG_OFFSETS[answer - 1]
        text = "Let me add the digits. " * (LENGTHS[length] // 23) + rf"The answer is \boxed{{{value}}}."
        return SampledSequence(
            stop_reason="stop",
            tokens=[answer, length],
            logprobs=[[(answer, logps[0])], [(length, logps[1])]],
            decoded=text,
            new_input_feature={
                **trajectory,
                "messages": [*trajectory["messages"], {"role": "assistant", "content": text}],
            },
        )


def trajectory(problem: int) -> dict[str, Any]:
    """The twinkle trajectory that asks ``problem``."""
    question, answer, _ = PROBLEMS[problem]
    return {
        "messages": [
            {"role": "system", "content": r"Put the final answer within \boxed{}."},
            {"role": "user", "content": question},
        ],
        "user_data": [("ground_truth", answer), ("problem", problem)],
    }


def compute_rewards(sequences: list[SampledSequence]) -> dict[str, list[float]]:
    """The two reward components, unsummed: the admission step gates on accuracy alone."""
    features = [sequence.new_input_feature for sequence in sequences]
    return {"accuracy": GSM8KAccuracyReward()(features), "brevity": GSM8KBrevityReward()(features)}


def shuffled_prompts(seed: int) -> Iterator[dict[str, Any]]:
    """The second iterator over the data the resampling rounds draw fresh prompts from."""
    rng = random.Random(seed)
    for _ in itertools.count():
        order = list(range(len(PROBLEMS)))
        rng.shuffle(order)
        yield from (trajectory(problem) for problem in order)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument(
        "--batch-size", type=int, default=4, help="prompts per step (the target of kept groups)"
    )
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--gate-on", choices=["accuracy", "total"], default="accuracy")
    parser.add_argument("--max-extra-groups", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def train_on(
    policy: TinyPolicy,
    optimizer: torch.optim.Optimizer,
    loss_fn: Any,
    kept: Any,
    num_generations: int,
    summary: dict[str, Any],
) -> None:
    """One ``GRPOLoss`` step on the kept rows (none without any), counting what they were."""
    if not kept.sequences:
        return
    accuracy = torch.tensor(kept.rewards["accuracy"]).view(-1, num_generations)
    summary["all_wrong_rows_trained"] += int((accuracy.sum(1) == 0).sum()) * num_generations
    summary["trained_rows"] += len(kept.sequences)
    problems = torch.tensor([dict(s.new_input_feature["user_data"])["problem"] for s in kept.sequences])
    tokens = torch.tensor([s.tokens for s in kept.sequences])
    old_logps = [[lp[0][1] for lp in s.logprobs] for s in kept.sequences]
    loss = loss_fn(
        {"labels": tokens},
        {"logps": policy.logps(problems, tokens)},
        old_logps=old_logps,
        advantages=kept.advantages,
    )["loss"]
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def _admission(args: argparse.Namespace) -> TwinkleGroupAdmission:
    """Admission gated on ``--gate-on``, with up to ``--max-extra-groups`` resampled in 2 rounds."""
    return TwinkleGroupAdmission(
        {"min_reward_std": 1e-6, "gate_on": ["accuracy"] if args.gate_on == "accuracy" else None},
        num_generations=args.num_generations,
        budget={
            "max_extra_groups": args.max_extra_groups,
            "max_resample_rounds": 2,
            "max_total_samples": (args.batch_size + args.max_extra_groups) * args.num_generations,
        },
        advantage_fn=GRPOAdvantage(),
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train the tiny policy the twinkle way, admitting groups on accuracy (the flags: ``--help``)."""
    args = _parser().parse_args(argv)
    num_generations = args.num_generations

    policy = TinyPolicy()
    sampler = TinyPolicySampler(policy, args.seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
    loss_fn = GRPOLoss(epsilon=0.2)
    metrics = CompletionRewardMetric()
    admission = _admission(args)
    sampling_params = SamplingParams(max_tokens=2, num_samples=1, logprobs=1, temperature=1.0)
    dataloader = shuffled_prompts(args.seed)
    extra_prompts = shuffled_prompts(args.seed + 1)
    before = {level: policy.accuracy(level) for level in PRIOR}
    summary: dict[str, Any] = {
        "trained_rows": 0,
        "all_wrong_rows_trained": 0,
        "short_steps": 0,
        "generated_samples": 0,
    }

    for step in range(args.steps):
        batch = list(itertools.islice(dataloader, args.batch_size))
        # (a real run syncs the sampler's weights here, once: every round samples this snapshot)
        kept = sample_admitted_groups(
            admission,
            sampler,
            batch,
            compute_rewards,
            sampling_params=sampling_params,
            extra_prompts=extra_prompts,
        )
        summary["generated_samples"] += kept.report.generated_samples
        summary["short_steps"] += int(kept.exhausted)
        metrics.reset()
        metrics.accumulate(completion_lengths=[len(s.decoded) for s in kept.sequences], rewards=kept.rewards)
        train_on(policy, optimizer, loss_fn, kept, num_generations, summary)
        log_dict = {**metrics.calculate(), **kept.metrics}
        report = kept.report
        logger.info(
            f"[Step {step + 1}/{args.steps}] kept {report.trained_groups}/{report.target_groups} groups "
            f"of {report.generated_groups} sampled in {report.sampling_rounds} round(s); "
            f"accuracy {log_dict.get('train/accuracy_reward', -1.0):.2f}"
        )

    after = {level: policy.accuracy(level) for level in PRIOR}
    summary.update(before=before, after=after, stats=admission.session.stats.metrics())
    logger.info(
        "accuracy of the policy by level, before -> after: "
        + ", ".join(f"{level} {before[level]:.2f} -> {after[level]:.2f}" for level in PRIOR)
    )
    logger.info(f"admission over the run: {summary['stats']}")
    return summary


if __name__ == "__main__":
    main()

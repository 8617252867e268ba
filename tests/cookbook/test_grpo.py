"""GRPO maths: advantages per scale, completion masks, collation, log-probs and the clipped loss."""

from __future__ import annotations

import math

import pytest
import torch

from cookbook.grpo_gsm8k.grpo import (
    clipped_pg_loss,
    collate,
    completion_mask,
    group_advantages,
    parameter_checksum,
    token_logprobs,
)

REWARDS = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])


class TestAdvantages:
    def test_group_scale_divides_by_each_groups_bessel_std(self) -> None:
        advantages = group_advantages(REWARDS, "group")

        # group 0: mean 0.25, sample std 0.5; group 1: mean 0.5, sample std sqrt(1/3)
        expected = torch.tensor([[1.5, -0.5, -0.5, -0.5], [0.8660254, 0.8660254, -0.8660254, -0.8660254]])
        torch.testing.assert_close(advantages, expected, atol=1e-5, rtol=0)

    def test_batch_scale_divides_by_the_std_of_every_reward(self) -> None:
        advantages = group_advantages(REWARDS, "batch")

        batch_std = math.sqrt((3 * 0.625**2 + 5 * 0.375**2) / 7)
        expected = torch.tensor([[0.75, -0.25, -0.25, -0.25], [0.5, 0.5, -0.5, -0.5]]) / batch_std
        torch.testing.assert_close(advantages, expected, atol=1e-5, rtol=0)

    def test_none_scale_only_centres(self) -> None:
        advantages = group_advantages(REWARDS, "none")

        expected = torch.tensor([[0.75, -0.25, -0.25, -0.25], [0.5, 0.5, -0.5, -0.5]])
        torch.testing.assert_close(advantages, expected)

    @pytest.mark.parametrize("scale", ["group", "batch", "none"])
    def test_every_scale_centres_each_group_and_keeps_the_order(self, scale: str) -> None:
        rewards = torch.tensor([[0.2, 1.7, 0.4, 0.9], [3.0, -1.0, 2.0, 0.0]])
        advantages = group_advantages(rewards, scale)  # type: ignore[arg-type]

        torch.testing.assert_close(advantages.sum(dim=1), torch.zeros(2), atol=1e-5, rtol=0)
        assert torch.equal(advantages.argsort(dim=1), rewards.argsort(dim=1))

    def test_a_flat_group_gets_zero_advantage_not_nan(self) -> None:
        advantages = group_advantages(torch.tensor([[0.5, 0.5, 0.5]]), "group")

        assert torch.equal(torch.zeros(1, 3), advantages)

    @pytest.mark.parametrize(
        ("rewards", "scale", "message"),
        [
            (torch.zeros(4), "group", r"'rewards' must have shape \(groups, G\) with G >= 2 \(got \(4,\)\)"),
            (torch.zeros(3, 1), "group", r"got \(3, 1\)"),
            (
                torch.zeros(2, 2),
                "global",
                r"'scale' must be one of \('group', 'batch', 'none'\) \(got 'global'\)",
            ),
        ],
    )
    def test_bad_input(self, rewards: torch.Tensor, scale: str, message: str) -> None:
        with pytest.raises(ValueError, match=message):
            group_advantages(rewards, scale)  # type: ignore[arg-type]


class TestMasks:
    def test_mask_keeps_tokens_through_the_first_eos_only(self) -> None:
        eos, pad = 2, 0
        ids = torch.tensor([[5, 6, eos, pad, pad], [5, eos, 7, eos, pad], [5, 6, 7, 8, 9]])

        expected = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
        assert torch.equal(expected, completion_mask(ids, [eos]))

    def test_any_of_several_eos_ids_ends_a_completion(self) -> None:
        ids = torch.tensor([[5, 9, 6, 2]])

        assert [[True, True, False, False]] == completion_mask(ids, [2, 9]).tolist()

    def test_collate_pads_prompts_left_and_completions_right(self) -> None:
        batch = collate([[1, 2, 3], [4]], [[7, 8], [9]], pad_id=0)

        assert [[1, 2, 3, 7, 8], [0, 0, 4, 9, 0]] == batch.input_ids.tolist()
        assert [[1, 1, 1, 1, 1], [0, 0, 1, 1, 0]] == batch.attention_mask.tolist()
        assert [[True, True], [True, False]] == batch.completion_mask.tolist()
        assert 2 == batch.completion_width

    def test_collate_needs_one_prompt_per_completion(self) -> None:
        with pytest.raises(ValueError, match=r"need one prompt per completion \(got 2 and 1\)"):
            collate([[1], [2]], [[3]], pad_id=0)


class TestLoss:
    def _inputs(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logprobs = torch.log(torch.tensor([[0.5, 0.4, 0.3], [0.2, 0.6, 0.9]])).requires_grad_()
        mask = torch.tensor([[True, True, False], [True, True, True]])
        return logprobs, mask, torch.tensor([1.0, -1.0])

    def test_masked_tokens_get_no_gradient_and_do_not_change_the_loss(self) -> None:
        logprobs, mask, advantages = self._inputs()
        loss, _ = clipped_pg_loss(logprobs, logprobs.detach(), advantages, mask)
        loss.backward()
        assert logprobs.grad is not None

        assert 0.0 == float(logprobs.grad[0, 2])
        changed = logprobs.detach().clone()
        changed[0, 2] = -30.0  # a masked (post-EOS or padding) position
        other, _ = clipped_pg_loss(changed, changed, advantages, mask)
        assert float(loss.detach()) == pytest.approx(float(other))

    def test_gradient_raises_good_completions_and_lowers_bad_ones(self) -> None:
        """Descending the loss moves log-probs the way the advantage's sign says."""
        logprobs, mask, advantages = self._inputs()
        loss, _ = clipped_pg_loss(logprobs, logprobs.detach(), advantages, mask)
        loss.backward()
        assert logprobs.grad is not None

        assert (logprobs.grad[0, :2] < 0).all()  # advantage +1: minimising raises them
        assert (logprobs.grad[1] > 0).all()  # advantage -1: minimising lowers them

    def test_token_mean_over_unmasked_tokens_at_ratio_one(self) -> None:
        logprobs, mask, advantages = self._inputs()
        loss, stats = clipped_pg_loss(logprobs, logprobs.detach(), advantages, mask)

        assert (-(2 * 1.0) - (3 * -1.0)) / 5 == pytest.approx(float(loss.detach()))
        assert 0.0 == stats["clip_fraction"]
        assert 1.0 == pytest.approx(stats["ratio_mean"])

    def test_sequence_mean_weighs_every_completion_equally(self) -> None:
        logprobs, mask, advantages = self._inputs()
        loss, _ = clipped_pg_loss(logprobs, logprobs.detach(), advantages, mask, aggregation="sequence")

        assert (-1.0 + 1.0) / 2 == pytest.approx(float(loss.detach()))

    def test_normaliser_replaces_the_denominator(self) -> None:
        logprobs, mask, advantages = self._inputs()
        loss, _ = clipped_pg_loss(logprobs, logprobs.detach(), advantages, mask, normaliser=10.0)

        assert 1.0 / 10 == pytest.approx(float(loss.detach()))

    def test_ratios_outside_the_clip_range_give_no_gradient(self) -> None:
        old = torch.zeros(1, 2)
        logprobs = torch.tensor([[0.5, -0.5]], requires_grad=True)  # ratios e^0.5, e^-0.5
        mask = torch.ones(1, 2, dtype=torch.bool)

        loss, stats = clipped_pg_loss(logprobs, old, torch.tensor([1.0]), mask, clip_low=0.2)
        loss.backward()
        assert logprobs.grad is not None

        assert 0.0 == float(logprobs.grad[0, 0])  # above 1 + eps with A > 0: clipped
        assert float(logprobs.grad[0, 1]) < 0  # below 1 - eps with A > 0: min keeps the unclipped term
        assert 0.5 == stats["clip_fraction"]

    def test_clip_high_widens_the_upper_bound_only(self) -> None:
        old = torch.zeros(1, 1)
        logprobs = torch.tensor([[0.25]], requires_grad=True)  # ratio 1.28
        mask = torch.ones(1, 1, dtype=torch.bool)

        _, symmetric = clipped_pg_loss(logprobs, old, torch.tensor([1.0]), mask, clip_low=0.2)
        _, wider = clipped_pg_loss(logprobs, old, torch.tensor([1.0]), mask, clip_low=0.2, clip_high=0.3)

        assert (1.0, 0.0) == (symmetric["clip_fraction"], wider["clip_fraction"])

    def test_unknown_aggregation(self) -> None:
        logprobs, mask, advantages = self._inputs()
        with pytest.raises(ValueError, match=r"'aggregation' must be one of \('token', 'sequence'\)"):
            clipped_pg_loss(logprobs, logprobs, advantages, mask, aggregation="sum")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tiny_lm() -> tuple[object, object]:
    from cookbook.grpo_gsm8k.offline.tiny_model import CHAT_TEMPLATE, build_model, train_tokenizer

    tokenizer = train_tokenizer(["Tom has 3 apples and gets 4 more.\n#### 7", CHAT_TEMPLATE], vocab_size=300)
    tokenizer.padding_side = "left"
    model = build_model(tokenizer, hidden_size=32, layers=2, seed=1)
    model.eval()
    return model, tokenizer


def test_training_log_probs_equal_the_sampling_distribution(tiny_lm: tuple[object, object]) -> None:
    """Left-padded prompts of different lengths score exactly as generate sampled them."""
    model, tokenizer = tiny_lm
    prompts = ["Tom has 3 apples", "Tom has 3 apples and gets 4 more. How many?"]
    encoded = tokenizer(prompts, return_tensors="pt", padding=True)  # type: ignore[operator]
    assert encoded["attention_mask"][0].sum() < encoded["attention_mask"][1].sum()
    torch.manual_seed(0)
    out = model.generate(  # type: ignore[attr-defined]
        **encoded,
        do_sample=True,
        temperature=0.7,
        top_k=0,
        max_new_tokens=6,
        num_return_sequences=2,
        eos_token_id=[tokenizer.eos_token_id],  # type: ignore[attr-defined]
        pad_token_id=tokenizer.pad_token_id,  # type: ignore[attr-defined]
        output_scores=True,
        return_dict_in_generate=True,
    )
    width = encoded["input_ids"].shape[1]
    completions = out.sequences[:, width:]
    sampled = torch.log_softmax(torch.stack(out.scores, 1).float(), -1)
    sampled = sampled.gather(-1, completions.unsqueeze(-1)).squeeze(-1)
    keep = completion_mask(completions, [tokenizer.eos_token_id])  # type: ignore[attr-defined]
    rows = range(len(completions))
    prompt_ids = [
        encoded["input_ids"][i // 2][encoded["attention_mask"][i // 2].bool()].tolist() for i in rows
    ]
    completion_ids = [completions[i][keep[i]].tolist() for i in rows]
    batch = collate(prompt_ids, completion_ids, tokenizer.pad_token_id)  # type: ignore[attr-defined]

    with torch.no_grad():
        scored = token_logprobs(model, batch, temperature=0.7)

    for i in rows:
        n = len(completion_ids[i])
        torch.testing.assert_close(scored[i, :n], sampled[i, :n], atol=1e-4, rtol=0)


def test_checksum_tracks_any_parameter_change(tiny_lm: tuple[object, object]) -> None:
    model, _ = tiny_lm
    before = parameter_checksum(model)
    assert before == parameter_checksum(model)
    parameter = next(iter(model.parameters()))  # type: ignore[attr-defined]
    with torch.no_grad():
        parameter[0, 0] += 1e-3

    assert before != parameter_checksum(model)
    with torch.no_grad():
        parameter[0, 0] -= 1e-3


def _groups() -> list[object]:
    from cookbook.grpo_gsm8k.data import Problem
    from cookbook.grpo_gsm8k.rollout import Group

    rewards = {"accuracy": [1.0, 0.0, 1.0, 0.0], "brevity": [0.1, 0.0, 0.0, 0.1]}
    problem = Problem(question="q", answer="#### 7", gold=7.0)
    completions = [[5, 6, 7], [8, 9], [5, 7], [6]]
    return [Group(problem, [1, 2, 3], completions, ["a", "b", "c", "d"], [False] * 4, rewards)]


@pytest.mark.parametrize("scale", [0.5, 2.0])
def test_the_update_multiplies_the_loss_by_the_sessions_loss_scale(
    tiny_lm: tuple[object, object], scale: float
) -> None:
    """``StepReport.loss_scale`` scales the gradient of the loss averaged over the trained groups."""
    import copy

    from cookbook.grpo_gsm8k.config import parse_config
    from cookbook.grpo_gsm8k.update import update_policy

    model, tokenizer = tiny_lm
    config = parse_config(["--num-generations", "4", "--max-grad-norm", "1e9"])
    norms = {}
    for factor in (1.0, scale):
        policy = copy.deepcopy(model)
        optimizer = torch.optim.SGD(policy.parameters(), lr=0.0)  # type: ignore[attr-defined]
        norms[factor] = update_policy(
            policy,
            optimizer,
            _groups(),
            config,
            pad_id=tokenizer.pad_token_id,
            device="cpu",
            loss_scale=factor,  # type: ignore[attr-defined]
        )

    assert norms[scale]["loss"] == pytest.approx(norms[1.0]["loss"])  # the loss is reported unscaled
    assert norms[scale]["grad_norm"] == pytest.approx(scale * norms[1.0]["grad_norm"], rel=1e-5)

"""GSM8K answer extraction, numeric comparison, the composite reward, and the problem generator."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cookbook.grpo_gsm8k.offline.problems import generate_problems
from cookbook.grpo_gsm8k.rewards import (
    answers_match,
    brevity_score,
    extract_answer,
    gold_answer,
    parse_number,
    score_group,
)

EXTRACTION_TABLE = [
    ("48 + 24 = 72\n#### 72", 72.0),
    ("#### 1,000", 1000.0),
    ("so she pays $1,234.50.\n#### $1,234.50", 1234.5),
    ("The answer is \\boxed{72}.", 72.0),
    ("\\boxed{1,000}", 1000.0),
    ("\\boxed{\\frac{3}{4}}", 0.75),
    ("\\boxed{72 \\text{ clips}}", 72.0),
    ("\\boxed{-5}", -5.0),
    ("#### 72.0", 72.0),
    ("####72", 72.0),
    ("#### -3", -3.0),
    ("#### .5", 0.5),
    # two answers: the last one in the text wins, whatever its marker
    ("#### 5\nwait, that is wrong.\n#### 7", 7.0),
    ("\\boxed{5} ... no: #### 7", 7.0),
    ("#### 5 ... no: \\boxed{7}", 7.0),
    # no final answer
    ("The answer is 72.", None),
    ("", None),
    ("#### ", None),
    ("#### seventy-two", None),
    ("\\boxed{}", None),
    ("\\boxed{72", None),  # unclosed box
]


class TestExtraction:
    @pytest.mark.parametrize(("completion", "expected"), EXTRACTION_TABLE)
    def test_table(self, completion: str, expected: float | None) -> None:
        assert expected == extract_answer(completion)

    def test_nested_braces_in_a_box(self) -> None:
        assert 0.5 == extract_answer("\\boxed{\\dfrac{1}{2}}")

    def test_an_unusable_last_answer_falls_back_to_the_previous_one(self) -> None:
        assert 4.0 == extract_answer("#### 4 and then \\boxed{x}")

    @pytest.mark.parametrize(
        ("completion", "expected"),
        [
            ("The answer is 72.", 72.0),
            ("4 - 1 = 3 apples left", 3.0),
            ("#### 5, so 7 apples in all", 5.0),  # a marker still wins over a later bare number
            ("no numbers at all", None),
        ],
    )
    def test_lenient_extraction_falls_back_to_the_last_number(
        self, completion: str, expected: float | None
    ) -> None:
        assert expected == extract_answer(completion, lenient=True)

    def test_lenient_scoring_credits_an_unformatted_right_answer(self) -> None:
        strict = score_group(["so 4 - 1 = 3"], 3.0, free_chars=300)
        lenient = score_group(["so 4 - 1 = 3"], 3.0, free_chars=300, lenient=True)

        assert ([0.0], [1.0]) == (strict["accuracy"], lenient["accuracy"])
        assert [0.5] == lenient["brevity"]

    @pytest.mark.parametrize(
        ("text", "expected"),
        [("1,000", 1000.0), ("72.0", 72.0), ("$72", 72.0), ("3/4", 0.75), ("1/0", None), ("abc", None)],
    )
    def test_parse_number(self, text: str, expected: float | None) -> None:
        assert expected == parse_number(text)


class TestGoldAndMatch:
    def test_gold_is_the_number_after_the_hashes(self) -> None:
        assert 72.0 == gold_answer("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72")

    def test_gold_with_commas(self) -> None:
        assert 1000.0 == gold_answer("... #### 1,000")

    def test_gold_without_an_answer_names_the_field(self) -> None:
        with pytest.raises(ValueError, match=r"'answer' must end in '#### N' \(got 'no answer here'\)"):
            gold_answer("no answer here")

    @pytest.mark.parametrize(
        ("completion", "gold", "expected"),
        [
            ("#### 72", 72.0, True),
            ("#### 72.0", 72.0, True),
            ("#### 072", 72.0, True),
            ("#### 1,000", 1000.0, True),
            ("\\boxed{72}", 72.0, True),
            ("#### 71", 72.0, False),
            ("#### 72.5", 72.0, False),
            ("no answer", 72.0, False),
            ("#### 5 #### 72", 72.0, True),
            ("#### 72 #### 5", 72.0, False),
        ],
    )
    def test_numeric_comparison(self, completion: str, gold: float, expected: bool) -> None:
        assert expected == answers_match(extract_answer(completion), gold)


class TestCompositeReward:
    def test_brevity_is_full_up_to_the_free_length_then_decays_to_zero(self) -> None:
        assert 1.0 == brevity_score("#### 7", free_chars=8)
        assert 0.5 == brevity_score("4 + 3 #### 7", free_chars=8)  # 12 chars: 4 over 8
        assert 0.0 == brevity_score("4 + 3 = 7\n#### 7", free_chars=8)  # 16 chars

    def test_brevity_needs_an_answer(self) -> None:
        assert 0.0 == brevity_score("7", free_chars=8)

    def test_components_and_weights(self) -> None:
        rewards = score_group(["#### 7", "4 + 3 = 7\n#### 7", "#### 6", "seven"], 7.0, free_chars=8)

        assert {"accuracy": [1.0, 1.0, 0.0, 0.0], "brevity": [0.5, 0.0, 0.5, 0.0]} == rewards

    def test_an_all_wrong_group_can_have_brevity_spread(self) -> None:
        """The phantom-gradient case: accuracy is flat, the total reward is not."""
        rewards = score_group(["#### 6", "4 + 3 = 6\n#### 6"], 7.0, free_chars=8)

        assert [0.0, 0.0] == rewards["accuracy"]
        assert rewards["brevity"][0] != rewards["brevity"][1]


class TestProblems:
    def test_every_answer_ends_in_a_gold_that_matches_the_arithmetic(self) -> None:
        rows = generate_problems(300, seed=3, max_value=9, kinds=("add", "sub", "two_step"), terse=0.3)
        for row in rows:
            equations = re.findall(r"(\d+) ([+-]) (\d+) = (\d+)", row["answer"])
            for left, op, right, result in equations:
                assert int(result) == (int(left) + int(right) if op == "+" else int(left) - int(right))
            assert row["answer"].rsplit("\n", 1)[-1].startswith("#### ")
            assert gold_answer(row["answer"]) >= 0

    def test_terse_solutions_give_only_the_final_line(self) -> None:
        rows = generate_problems(50, seed=0, terse=1.0)

        assert all(row["answer"].startswith("#### ") for row in rows)

    def test_same_seed_same_rows(self) -> None:
        assert generate_problems(20, seed=5) == generate_problems(20, seed=5)
        assert generate_problems(20, seed=5) != generate_problems(20, seed=6)

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"count": -1}, r"'count' must be >= 0 \(got -1\)"),
            ({"count": 1, "max_value": 1}, r"'max_value' must be >= 2 \(got 1\)"),
            ({"count": 1, "kinds": ("mul",)}, r"'kinds' must be a non-empty subset of .* \(got \['mul'\]\)"),
            ({"count": 1, "kinds": ()}, r"'kinds' must be a non-empty subset"),
            ({"count": 1, "terse": 1.5}, r"'terse' must be in \[0, 1\] \(got 1.5\)"),
        ],
    )
    def test_bad_arguments(self, kwargs: dict[str, object], message: str) -> None:
        with pytest.raises(ValueError, match=message):
            generate_problems(**kwargs)  # type: ignore[arg-type]


@given(st.integers(min_value=-(10**9), max_value=10**9))
def test_any_integer_round_trips_with_thousands_separators(value: int) -> None:
    assert float(value) == extract_answer(f"so the total is\n#### {value:,}")


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6))
def test_the_last_of_two_answers_wins(first: int, second: int) -> None:
    assert float(second) == extract_answer(f"#### {first}\nactually\n\\boxed{{{second}}}")

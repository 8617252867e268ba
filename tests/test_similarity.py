"""The default n-gram Jaccard scorer: reference definition and the vectorised implementation."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from group_admission import GroupAdmissionConfig, GroupAdmissionPolicy, ngram_jaccard
from group_admission._similarity import pairwise_similarities

TOKEN = re.compile(r"\w+|[^\w\s]")
alphabet = st.sampled_from([*list("ab cd,.!"), "é", "İ", "ß", "中", "文", "_", "٣", "\n", "—"])
texts = st.text(alphabet=alphabet, max_size=40)


@pytest.mark.parametrize(
    ("a", "b", "n", "expected"),
    [
        ("the cat sat", "the cat sat", 3, 1.0),
        ("The Cat sat", "the cat SAT", 3, 1.0),  # lower-cased first
        ("", "", 3, 1.0),  # two empty texts are identical
        ("", "a b c", 3, 0.0),
        ("a b", "a b", 3, 1.0),  # shorter than n: one gram of all tokens
        ("a b", "a c", 3, 0.0),
        ("x=1, y=2", "x = 1 , y = 2", 1, 1.0),  # punctuation is a token, spacing is not
        ("a b c d", "a b c e", 3, 1 / 3),
    ],
)
def test_reference_scores(a: str, b: str, n: int, expected: float) -> None:
    assert expected == pytest.approx(ngram_jaccard(a, b, n))


@given(group=st.lists(texts, min_size=2, max_size=6), n=st.integers(1, 5))
def test_vectorised_pairs_equal_the_reference(group: list[str], n: int) -> None:
    upper = np.triu_indices(len(group), 1)
    expected = [ngram_jaccard(group[i], group[j], n) for i, j in zip(*upper, strict=True)]

    assert expected == pairwise_similarities(group, n).tolist()


def test_long_and_wide_tokens_take_the_hashed_path_and_still_match() -> None:
    group = [
        "internationalization of 数学问题的答案",
        "internationalization of 数学问题的答案",
        "localisation",
    ]

    got = pairwise_similarities(group, 2).tolist()

    assert [1.0, 0.0, 0.0] == got


def test_many_distinct_tokens_renumber_without_overflow() -> None:
    # More distinct tokens than fit n ids in one int64 forces the window-by-window numbering.
    words = [f"w{i}" for i in range(3000)]
    group = [" ".join(words), " ".join(words[::-1]), " ".join(words[:1500])]

    got = pairwise_similarities(group, 8).tolist()

    assert [
        ngram_jaccard(group[0], group[1], 8),
        ngram_jaccard(group[0], group[2], 8),
        ngram_jaccard(group[1], group[2], 8),
    ] == got


def test_the_tokeniser_is_the_documented_regex() -> None:
    from group_admission._similarity import _TOKEN

    assert TOKEN.pattern == _TOKEN.pattern


@given(group=st.lists(texts, min_size=2, max_size=5), n=st.integers(1, 60))
def test_an_n_beyond_the_token_count_matches_the_reference(group: list[str], n: int) -> None:
    upper = np.triu_indices(len(group), 1)
    expected = [ngram_jaccard(group[i], group[j], n) for i, j in zip(*upper, strict=True)]

    assert expected == pairwise_similarities(group, n).tolist()


@pytest.mark.timeout(5)  # a hang guard, not a performance assertion
@pytest.mark.parametrize("n", [400, 10**9])
def test_a_huge_ngram_size_is_bounded_by_the_text(n: int) -> None:
    words = [f"w{i % 97}" for i in range(1000)]
    group = [" ".join(words), " ".join(words[:999]), " ".join(words), " ".join(reversed(words))]
    policy = GroupAdmissionPolicy(
        GroupAdmissionConfig(max_mean_pairwise_similarity=0.5, similarity_ngram_size=n)
    )

    got = pairwise_similarities(group, n).tolist()
    decision = policy.evaluate([0, 1, 0, 1], group)

    assert [ngram_jaccard(group[i], group[j], n) for i, j in zip(*np.triu_indices(4, 1), strict=True)] == got
    assert decision.mean_pairwise_similarity == pytest.approx(sum(got) / 6)

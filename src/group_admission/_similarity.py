r"""
Near-duplicate scoring for the redundancy gate.

The default scorer is the Jaccard similarity of token n-gram sets. Tokenisation: the text
is lower-cased, then split into maximal runs of word characters (Unicode letters, digits
and ``_``, as regex ``\w``) and single punctuation characters (anything that is neither a
word character nor whitespace); whitespace separates tokens and is dropped. This is the
regular expression ``\w+|[^\w\s]`` applied to ``text.lower()``. A text with fewer tokens
than ``n`` forms one gram of all its tokens; two texts without tokens score 1.0.

For a whole group, :func:`pairwise_similarities` computes every pair at once in numpy:
the texts are tokenised as arrays of code points, tokens of up to 8 Latin-1 characters are
numbered exactly by their packed bytes (longer tokens by Python's 64-bit string hash, so a
false match has a probability of about 1e-19 per token pair), n-grams are numbered
exactly, and the pairwise intersections come from one matrix product. An n beyond the
longest text's token count is the same as that count (every text is one gram of all its
tokens), and n-grams too wide to pack in an int64 are numbered by doubling, so the cost
is ``O(tokens * log(n))`` whatever n. It is tested against the plain set-based definition
in :func:`ngram_jaccard`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ._validation import check_count, describe, is_finite

__all__ = ["ngram_jaccard", "pairwise_similarities", "validate_scorer_value"]

Scorer = Callable[[str, str], float]

_TOKEN = re.compile(r"\w+|[^\w\s]")

# Token classes of the vectorised tokenizer.
_SPACE, _WORD, _PUNCT = 0, 1, 2


def _char_class(code: int) -> int:
    char = chr(code)
    if char.isalnum() or char == "_":  # exactly the characters regex \w matches
        return _WORD
    return _SPACE if char.isspace() else _PUNCT


_LATIN1_CLASS = np.array([_char_class(c) for c in range(256)], dtype=np.uint8)
# Masks that keep the first k bytes of a little-endian uint64, for k = 0..8.
_BYTE_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)
# Tokens of up to 8 Latin-1 characters are identified exactly by their bytes packed into
# one uint64; longer or wider tokens (rare in English, common in CJK text, where a whole
# clause is one \w+ run) fall back to Python's 64-bit string hash.
_PACK = 8


def _grams(text: str, n: int) -> set[tuple[str, ...]]:
    tokens = _TOKEN.findall(text.lower())
    if len(tokens) < n:
        return {tuple(tokens)} if tokens else set()
    return set(zip(*(tokens[i:] for i in range(n)), strict=False))


def ngram_jaccard(a: str, b: str, n: int = 3) -> float:
    """
    Jaccard similarity of the token n-gram sets of two texts, in ``[0, 1]``.

    This is the reference definition of the default redundancy scorer (see the module
    docstring for the tokenisation). Two texts without tokens score ``1.0``. A text with
    fewer than ``n`` tokens forms one gram of all its tokens, so any ``n`` at least the
    longer text's token count compares the whole texts: ``1.0`` when their tokens are
    equal, else ``0.0``.

    Raises:
        TypeError: ``a`` or ``b`` is not a string, or ``n`` is not an integer.
        ValueError: ``n < 1``.

    .. versionadded:: 0.1.0
    """
    for name, text in (("a", a), ("b", b)):
        if not isinstance(text, str):
            msg = f"'{name}' must be a string (got {describe(text)})"
            raise TypeError(msg)
    size = check_count(n, "n", 1)
    grams_a, grams_b = _grams(a, size), _grams(b, size)
    union = len(grams_a | grams_b)
    return len(grams_a & grams_b) / union if union else 1.0


def _classify(codes: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
    if len(codes) == 0 or int(codes.max()) < 256:
        return _LATIN1_CLASS[codes]
    classes = np.empty(len(codes), dtype=np.uint8)
    narrow = codes < 256
    classes[narrow] = _LATIN1_CLASS[codes[narrow]]
    # Wide characters are few distinct code points even in CJK text: classify each once.
    unique, inverse = np.unique(codes[~narrow], return_inverse=True)
    classes[~narrow] = np.array([_char_class(c) for c in unique.tolist()], dtype=np.uint8)[inverse]
    return classes


def _dense(keys: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], int]:
    unique, inverse = np.unique(keys, return_inverse=True)
    return inverse.astype(np.int64).reshape(-1), len(unique)


def _token_ids(
    joined: str,
    codes: npt.NDArray[np.uint32],
    starts: npt.NDArray[np.intp],
    ends: npt.NDArray[np.intp],
) -> tuple[npt.NDArray[np.int64], int]:
    """Number the tokens so that equal tokens, and only they, share an id."""
    lengths = ends - starts
    complex_mask = lengths > _PACK
    wide = codes > 255
    if wide.any():
        # A token holds a wide character iff the running count differs at its two ends.
        running = np.concatenate(([0], np.cumsum(wide)))
        complex_mask |= running[ends] != running[starts]
    # Read the 8 bytes at every token start as one little-endian uint64 (an unaligned,
    # overlapping view of the padded Latin-1 bytes), then keep the token's own bytes.
    padded = np.zeros(len(codes) + _PACK, dtype=np.uint8)
    padded[: len(codes)] = codes  # wide characters wrap, but their tokens are complex
    windows = np.ndarray(shape=(len(codes),), dtype="<u8", buffer=padded, strides=(1,))
    keys = (windows[starts] & _BYTE_MASKS[np.minimum(lengths, _PACK)]).astype(np.int64)
    if not complex_mask.any():
        return _dense(keys)
    simple_ids, simple_count = _dense(keys[~complex_mask])
    long_keys = np.array(
        [
            hash(joined[i:j])
            for i, j in zip(starts[complex_mask].tolist(), ends[complex_mask].tolist(), strict=True)
        ],
        dtype=np.int64,
    )
    long_ids, long_count = _dense(long_keys)
    ids = np.empty(len(starts), dtype=np.int64)
    ids[~complex_mask] = simple_ids
    ids[complex_mask] = long_ids + simple_count
    return ids, simple_count + long_count


def _window_ids(token_ids: npt.NDArray[np.int64], vocab: int, n: int) -> npt.NDArray[np.int64]:
    """
    Number every window of ``n`` consecutive tokens so that equal windows, and only they, match.

    With few distinct tokens the n ids pack into one int64 (radix ``vocab + 1``). Otherwise
    windows are numbered by doubling: a window of ``2k`` tokens is the pair of its two
    halves of ``k``, renumbered densely, and ``n`` is assembled from its binary digits, so
    any ``n`` costs ``O(log n)`` renumberings of the token stream.
    """
    windows = len(token_ids) - n + 1
    if n * math.log2(vocab + 1) < 62:
        radix, gram = np.int64(vocab + 1), np.zeros(windows, dtype=np.int64)
        for offset in range(n):
            gram = gram * radix + token_ids[offset : offset + windows]
        return gram
    power, power_size, power_count = token_ids, 1, vocab  # windows of 1, 2, 4, ... tokens
    result: npt.NDArray[np.int64] | None = None
    result_size = 0
    remaining = n
    while True:
        if remaining & 1:
            if result is None:
                result, result_size = power, power_size
            else:
                # Append the power-window that starts right after the current window.
                length = len(token_ids) - (result_size + power_size) + 1
                pairs = result[:length] * np.int64(power_count) + power[result_size : result_size + length]
                result = _dense(pairs)[0]
                result_size += power_size
        remaining >>= 1
        if not remaining:
            break
        length = len(token_ids) - 2 * power_size + 1
        pairs = power[:length] * np.int64(power_count) + power[power_size : power_size + length]
        power, power_count = _dense(pairs)
        power_size *= 2
    assert result is not None  # n >= 1 sets a bit
    return result[:windows]


def _gram_sets(texts: Sequence[str], n: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Return ``(text_index, gram_id, num_grams)`` for every gram occurrence of every text."""
    # A newline between texts is whitespace, so no token crosses from one text to the next.
    lowered = [text.lower() for text in texts]
    joined = "\n".join(lowered)
    codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0
    classes = _classify(codes)
    word = classes == _WORD
    punct = classes == _PUNCT
    # Tokens never overlap, so the k-th start pairs with the k-th end.
    starts = np.flatnonzero((word & ~np.concatenate(([False], word[:-1]))) | punct)
    ends = np.flatnonzero((word & ~np.concatenate((word[1:], [False]))) | punct) + 1
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 0
    token_ids, vocab = _token_ids(joined, codes, starts, ends)
    text_starts = np.cumsum([0] + [len(t) + 1 for t in lowered[:-1]])
    token_text = np.searchsorted(text_starts, starts, side="right") - 1

    # No text has more than ``longest`` tokens, and an n beyond that gives the same grams
    # (each text one gram of all its tokens), so the work never depends on n itself.
    counts = np.bincount(token_text, minlength=len(texts))
    n = min(n, int(counts.max()))
    # Full n-grams: windows of n tokens that start and end in the same text.
    windows = len(token_ids) - n + 1
    gram = _window_ids(token_ids, vocab, n)
    same_text = token_text[:windows] == token_text[n - 1 : n - 1 + windows]
    gram_text, (gram, size) = token_text[:windows][same_text], _dense(gram[same_text])

    # A text with fewer than n tokens forms one gram of all its tokens. Such texts are rare,
    # so they are numbered exactly in Python, after the full n-grams.
    short = np.flatnonzero((counts > 0) & (counts < n)).tolist()
    if short:
        first = np.concatenate(([0], np.cumsum(counts)[:-1]))
        numbering: dict[tuple[int, ...], int] = {}
        short_ids = [
            numbering.setdefault(
                tuple(token_ids[first[i] : first[i] + counts[i]].tolist()), size + len(numbering)
            )
            for i in short
        ]
        gram_text = np.concatenate((gram_text, short))
        gram = np.concatenate((gram, short_ids))
        size += len(numbering)
    return gram_text, gram, size


def _vectorised(texts: Sequence[str], n: int) -> npt.NDArray[np.float64]:
    text_index, gram_id, num_grams = _gram_sets(texts, n)
    count = len(texts)
    # Assigning 1.0 twice is harmless, so a gram repeated within a text counts once.
    incidence = np.zeros((count, num_grams), dtype=np.float32)
    incidence[text_index, gram_id] = 1.0
    # float32 counts are exact up to 2**24 shared grams.
    inter = (incidence @ incidence.T).astype(np.float64)
    sizes = np.diag(inter)
    union = sizes[:, None] + sizes[None, :] - inter
    safe = np.where(union > 0, union, 1.0)
    return np.where(union > 0, inter / safe, 1.0)


def validate_scorer_value(value: object, i: int, j: int) -> float:
    """Check one value returned by a user scorer: a finite real number in ``[0, 1]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        msg = (
            f"'scorer' must return a real number in [0, 1] "
            f"(got {value!r} of type {type(value).__name__} for completions {i} and {j})"
        )
        raise TypeError(msg)
    score = float(value) if is_finite(value) else math.inf  # an int beyond the float range too
    if not (math.isfinite(score) and 0.0 <= score <= 1.0):
        shown = describe(value) if isinstance(value, int) else repr(float(value))
        msg = f"'scorer' must return a finite value in [0, 1] (got {shown} for completions {i} and {j})"
        raise ValueError(msg)
    return score


def pairwise_similarities(
    texts: Sequence[str], n: int, scorer: Scorer | None = None
) -> npt.NDArray[np.float64]:
    """
    Return the similarity of every pair ``i < j`` of ``texts``, in ``np.triu_indices`` order.

    With ``scorer=None`` the default n-gram Jaccard is computed for all pairs at once.
    """
    count = len(texts)
    upper = np.triu_indices(count, 1)
    if scorer is None:
        return _vectorised(texts, n)[upper]
    pairs = zip(upper[0].tolist(), upper[1].tolist(), strict=True)
    return np.array(
        [validate_scorer_value(scorer(texts[i], texts[j]), i, j) for i, j in pairs],
        dtype=np.float64,
    )

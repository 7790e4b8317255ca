"""Perplexity (spec §1.5): chunking, the float64 log-softmax, errors.

Expected values are worked out by hand (closed forms in the comments), not
produced by the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from nanocompile.inference.perplexity import PerplexityResult, chunk_nll, perplexity

F32 = np.float32


def _zeros(vocab: int):  # type: ignore[no-untyped-def]
    def logits_fn(ids: np.ndarray) -> np.ndarray:
        return np.zeros((ids.size, vocab), dtype=F32)

    return logits_fn


@pytest.mark.parametrize(("vocab", "n", "chunk"), [(2, 2, 2), (1000, 300, 128), (151936, 40, 16)])
def test_uniform_model_is_exactly_vocab(vocab: int, n: int, chunk: int) -> None:
    ids = np.arange(n) % vocab
    result = perplexity(ids, _zeros(vocab), chunk=chunk)
    assert abs(result.ppl - vocab) <= 1e-12 * vocab
    assert result.nll == pytest.approx(result.scored * math.log(vocab), rel=1e-15)


def test_hand_computed_case() -> None:
    # Vocabulary 3, ids 0 1 2 0, one chunk:
    #   row 0 = [0, 1, 0] scores id 1: p = e / (e + 2)
    #   row 1 = [5, 5, 5] scores id 2: p = 1/3
    #   row 2 = [1000, 0, 1000] scores id 0: p = 1/2 (needs the max subtracted)
    table = np.array([[0, 1, 0], [5, 5, 5], [1000, 0, 1000], [7, 7, 7]], dtype=F32)
    calls: list[list[int]] = []

    def logits_fn(ids: np.ndarray) -> np.ndarray:
        calls.append(ids.tolist())
        return table[: ids.size]

    result = perplexity([0, 1, 2, 0], logits_fn)
    nll = math.log(math.e + 2) - 1 + math.log(3) + math.log(2)
    assert result.scored == 3
    assert result.chunks == 1
    assert result.nll == pytest.approx(nll, rel=1e-14)
    assert result.ppl == pytest.approx(math.exp(nll / 3), rel=1e-14)
    assert calls == [[0, 1, 2, 0]]


def _bigram(vocab: int):  # type: ignore[no-untyped-def]
    """Logits row t depends only on ids[t]: log-probabilities of a fixed bigram table."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((vocab, vocab)).astype(F32)
    calls: list[list[int]] = []

    def logits_fn(ids: np.ndarray) -> np.ndarray:
        calls.append(ids.tolist())
        return table[ids]

    return table, calls, logits_fn


def test_chunks_are_independent_and_their_first_tokens_unscored() -> None:
    vocab = 7
    table, calls, logits_fn = _bigram(vocab)
    ids = [3, 1, 4, 1, 5, 2, 6, 5, 3, 5]
    result = perplexity(ids, logits_fn, chunk=4)
    assert calls == [ids[0:4], ids[4:8], ids[8:10]]
    # Scored pairs: (3,1) (1,4) (1,1); (5,2) (2,6) (6,5); (3,5). Not (1,5) nor (5,3).
    pairs = [(3, 1), (1, 4), (4, 1), (5, 2), (2, 6), (6, 5), (3, 5)]
    expected = 0.0
    for prev, nxt in pairs:
        row = table[prev].astype(np.float64)
        expected -= row[nxt] - math.log(sum(math.exp(v) for v in row))
    assert result == PerplexityResult(
        ppl=pytest.approx(math.exp(expected / 7), rel=1e-12),  # type: ignore[arg-type]
        nll=pytest.approx(expected, rel=1e-12),  # type: ignore[arg-type]
        scored=7,
        chunks=3,
    )


@pytest.mark.parametrize(
    ("n", "chunk", "chunks"),
    [
        (2, 128, 1),
        (128, 128, 1),
        (129, 128, 2),
        (130, 128, 2),
        (512, 128, 4),
        (9, 4, 3),
        (10, 2, 5),
    ],
)
def test_chunk_counts(n: int, chunk: int, chunks: int) -> None:
    _, calls, logits_fn = _bigram(5)
    result = perplexity(np.arange(n) % 5, logits_fn, chunk=chunk)
    assert result.chunks == chunks
    assert result.scored == n - chunks
    # A trailing one-token chunk scores nothing and is not run.
    assert len(calls) == chunks - (n % chunk == 1)
    assert all(len(c) >= 2 for c in calls)


def test_minus_inf_on_a_target_gives_infinite_perplexity() -> None:
    def logits_fn(ids: np.ndarray) -> np.ndarray:
        return np.array([[0.0, -np.inf], [0.0, 0.0]], dtype=F32)

    assert perplexity([0, 1], logits_fn).ppl == math.inf


@pytest.mark.parametrize(
    ("ids", "chunk", "message"),
    [
        ([], 128, "at least 2 tokens, got 0"),
        ([5], 128, "at least 2 tokens, got 1"),
        ([[1, 2]], 128, "must be 1-D"),
        ([1.0, 2.0], 128, "must be integers"),
        ([1, -2], 128, "must be >= 0"),
        ([1, 2], 1, "chunk must be an integer >= 2, got 1"),
        ([1, 2], 0, "chunk must be an integer >= 2"),
        ([1, 2], True, "chunk must be an integer >= 2"),
        ([1, 2, 9], 128, "token id 9 is outside the vocabulary of 4"),
    ],
)
def test_bad_arguments(ids: list[int], chunk: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        perplexity(ids, _zeros(4), chunk=chunk)


@pytest.mark.parametrize(
    ("logits", "message"),
    [
        (np.zeros((2, 4), dtype=F32), r"must have shape \[3, vocab\], got \(2, 4\)"),
        (np.zeros(12, dtype=F32), r"must have shape \[3, vocab\], got \(12,\)"),
        (np.zeros((3, 0), dtype=F32), r"must have shape \[3, vocab\]"),
        (np.zeros((3, 4), dtype=np.int32), "must be floating point"),
        (np.full((3, 4), np.nan, dtype=F32), "contain NaN"),
        (np.full((3, 4), -np.inf, dtype=F32), "no finite maximum"),
    ],
)
def test_bad_logits(logits: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        perplexity([0, 1, 2], lambda ids: logits)


def test_chunk_nll_matches_perplexity_total() -> None:
    table, _, logits_fn = _bigram(6)
    ids = np.array([0, 5, 2, 2, 4, 1, 3] * 5)
    assert perplexity(ids, logits_fn, chunk=len(ids)).nll == chunk_nll(ids, table[ids])

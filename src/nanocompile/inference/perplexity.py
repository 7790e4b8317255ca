"""Perplexity of a token sequence under a model (spec §1.5).

The ids are split into non-overlapping chunks of ``chunk`` tokens (the last
may be shorter); each chunk is one independent, uncached forward pass, so
its first token has no context and is not scored. Token ``t + 1`` of a chunk
is scored by logits row ``t`` with a float64 log-softmax
(``x - max - log Σ exp(x - max)``); perplexity is ``exp(total NLL / scored)``,
so ``scored = len(ids) - chunks``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from nanocompile.inference.progress import SCORING, Progress

LogitsFn = Callable[[np.ndarray], np.ndarray]
"""``ids: i64[n] -> f32[n, vocab]``: one uncached forward pass over ``ids``."""

_ROWS = 16  # logits rows widened to float64 at a time (16 x 151936 x 8 B = 19 MB)


@dataclass(frozen=True)
class PerplexityResult:
    """``ppl = exp(nll / scored)``; ``nll`` is the total over scored tokens (nats)."""

    ppl: float
    nll: float
    scored: int
    chunks: int


def _as_ids(token_ids: Sequence[int] | np.ndarray) -> np.ndarray:
    ids = np.asarray(token_ids)
    if ids.ndim != 1:
        raise ValueError(f"token ids must be 1-D, got shape {ids.shape}")
    if ids.size < 2:
        raise ValueError(f"perplexity needs at least 2 tokens, got {ids.size}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"token ids must be integers, got {ids.dtype}")
    if (ids < 0).any():
        raise ValueError(f"token ids must be >= 0, got {int(ids.min())}")
    return ids.astype(np.int64)


def chunk_nll(ids: np.ndarray, logits: np.ndarray) -> float:
    """Summed NLL of ``ids[1:]`` under ``logits[:-1]`` (float64 log-softmax)."""
    n = ids.size
    if logits.ndim != 2 or logits.shape[0] != n or logits.shape[1] < 1:
        raise ValueError(
            f"logits for a chunk of {n} tokens must have shape [{n}, vocab], got {logits.shape}"
        )
    if not np.issubdtype(logits.dtype, np.floating):
        raise ValueError(f"logits must be floating point, got {logits.dtype}")
    vocab = logits.shape[1]
    targets = ids[1:]
    if (targets >= vocab).any():
        raise ValueError(f"token id {int(targets.max())} is outside the vocabulary of {vocab}")
    log_p: list[float] = []
    for start in range(0, n - 1, _ROWS):
        x = logits[start : min(start + _ROWS, n - 1)].astype(np.float64)
        if np.isnan(x).any():
            raise ValueError("logits contain NaN")
        top = x.max(axis=1)
        if not np.isfinite(top).all():
            raise ValueError("a logits row has no finite maximum (all -inf, or +inf)")
        log_z = np.log(np.exp(x - top[:, None]).sum(axis=1))
        rows = np.arange(x.shape[0])
        log_p.extend((x[rows, targets[start : start + x.shape[0]]] - top - log_z).tolist())
    return -math.fsum(log_p)


def perplexity(
    token_ids: Sequence[int] | np.ndarray, logits_fn: LogitsFn, chunk: int = 128,
    progress: Progress | None = None,
) -> PerplexityResult:
    """Chunked perplexity of ``token_ids`` under ``logits_fn`` (spec §1.5).

    A final chunk of a single token scores nothing and is not run, but it
    counts as a chunk (its token has no context). ``progress`` hears step
    ``SCORING`` in tokens, after each chunk.
    """
    if isinstance(chunk, bool) or not isinstance(chunk, int | np.integer) or chunk < 2:
        raise ValueError(f"chunk must be an integer >= 2, got {chunk!r}")
    ids = _as_ids(token_ids)
    total: list[float] = []
    chunks = 0
    if progress is not None:
        progress(SCORING, 0, int(ids.size))
    for start in range(0, ids.size, chunk):
        piece = ids[start : start + chunk]
        chunks += 1
        if piece.size >= 2:
            total.append(chunk_nll(piece, np.asarray(logits_fn(piece))))
        if progress is not None:
            progress(SCORING, min(start + chunk, int(ids.size)), int(ids.size))
    scored = ids.size - chunks
    nll = math.fsum(total)
    return PerplexityResult(ppl=_exp(nll / scored), nll=nll, scored=scored, chunks=chunks)


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf

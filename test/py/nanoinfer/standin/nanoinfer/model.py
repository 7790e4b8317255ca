"""``Qwen2``: spec §7's model interface over ``bench.numpy_engine.NumpyQwen2``."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from bench.numpy_engine import NumpyCache, NumpyQwen2

from .weights import ModelWeights


class Qwen2:
    """Qwen2 forward passes with a KV cache (the NumPy engine's arithmetic)."""

    def __init__(self, weights: ModelWeights) -> None:
        self.weights = weights
        self.config = weights.config
        self.engine = NumpyQwen2(weights.config, weights.hf_tensors())

    @classmethod
    def from_model_dir(cls, model_dir: str | os.PathLike[str]) -> Qwen2:
        """Load the snapshot in ``model_dir``."""
        return cls(ModelWeights.load(model_dir))

    def new_cache(self, capacity: int) -> NumpyCache:
        """An empty cache, ``keys``/``values`` ``[layers, kv_heads, capacity, head_dim]``."""
        return self.engine.new_cache(capacity)

    def forward(self, token_ids: Sequence[int] | np.ndarray,
                positions: Sequence[int] | np.ndarray | None = None, last_only: bool = False,
                cache: NumpyCache | None = None) -> np.ndarray:
        """Logits ``[seq, vocab]`` (``[1, vocab]`` when ``last_only``) after the cache's tokens.

        The NumPy engine places tokens right after the cache's, so ``positions``
        other than those are refused.
        """
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
        if positions is not None:
            start = 0 if cache is None else cache.length
            expected = np.arange(start, start + ids.size)
            if not np.array_equal(np.asarray(positions).reshape(-1), expected):
                raise ValueError("the stand-in supports only the positions right after the "
                                 f"cache ({start}..{start + ids.size - 1})")
        return self.engine.forward(ids, cache, all_logits=not last_only)

    def next_token_logits(self, ids: Sequence[int] | np.ndarray,
                          cache: NumpyCache | None = None) -> np.ndarray:
        """The last position's logits ``[vocab]``."""
        return self.forward(ids, last_only=True, cache=cache)[-1]

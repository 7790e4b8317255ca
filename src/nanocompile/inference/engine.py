"""Running a Qwen2 graph with a KV cache, on any backend.

A backend is anything with ``run(inputs) -> outputs`` over the graph
signature of ``nanocompile.models.qwen2``. The cache is a preallocated
``[layers, kv_heads, capacity, head_dim]`` pair of arrays and its length.

With the graph's ``kv = "state"`` form (``Engine.kv``), the arrays are the
program's state: passed whole as ``key_cache``/``value_cache`` with the
scalar ``past = length``, and written by the program at positions ``past ..
past + seq`` (a compiled program in place; the interpreter returns new
arrays, which replace them). A backend with ``runner`` (the compiled one)
makes one ``StepRunner`` per cache: every check and allocation once, then
one C call per step and nothing else in Python. With ``kv = "inputs"`` the
first ``length`` positions are copied out as ``past_keys``/``past_values``
and the graph's new ``keys``/``values`` appended after each call.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from nanocompile.backend.hugepages import HugeArena
from nanocompile.backend.runtime import (
    VECTOR_ALIGNMENT,
    OutOfMemoryError,
    allocate,
    format_bytes,
)
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.models.qwen2 import KV_FORMS, WEIGHT_FORMATS


class Backend(Protocol):
    """Runs one compiled (or interpreted) graph."""

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]: ...


class CacheFullError(ValueError):
    """The KV cache has no room for the tokens of a step."""


class F32Weights(Mapping[str, np.ndarray]):
    """A snapshot's weights widened exactly to f32 on first use, then kept, each
    widened copy starting on a cache line (``VECTOR_ALIGNMENT``: numpy's large
    arrays start 16 bytes into a page, and a misaligned 64-byte AVX-512 load of
    a weight row reads two lines), one after another in 2 MiB pages
    (``backend.hugepages.HugeArena``: as the mapped weight files, and as the
    tuner times them); tensors stored as F32 stay zero-copy views of the
    mapped file."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._cache: dict[str, np.ndarray] = {}
        self._arena = HugeArena()

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._cache:
            if name not in self.snapshot.expected_tensors():
                raise KeyError(name)
            if self.snapshot.dtype(name) == "F32":
                # a tensor stored as F32 stays the mapped file's bytes, wherever
                # the file puts them: no copy
                widened = self.snapshot.f32(name)
            else:
                # widened straight into its place, on a cache-line boundary, in
                # 2 MiB pages as the mapped weight files are (no temporary)
                shape = self.snapshot.shape(name)
                try:
                    kept = self._arena.take(shape, np.float32, VECTOR_ALIGNMENT)
                except OSError as e:
                    need = format_bytes(4 * math.prod(shape))
                    raise OutOfMemoryError(f"out of memory: tensor {name!r} widened needs "
                                           f"{need}") from e
                widened = self.snapshot.f32(name, out=kept)
            self._cache[name] = np.ascontiguousarray(widened)
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.snapshot.expected_tensors())

    def __len__(self) -> int:
        return len(self.snapshot.expected_tensors())

    def widened_bytes(self) -> int:
        """Bytes of the f32 copies made so far (a tensor stored as F32 is handed
        out as its mapped view: no copy)."""
        return sum(a.nbytes for name, a in self._cache.items()
                   if self.snapshot.dtype(name) != "F32")


def default_weights(snapshot: Snapshot) -> str:
    """The default weight format of ``snapshot``: ``"bf16"`` when it stores any
    expected tensor in bf16 (a Qwen2 release does), else ``"f32"``."""
    bf16 = any(snapshot.dtype(n) == "BF16" for n in snapshot.expected_tensors())
    return "bf16" if bf16 else "f32"


def check_weights(weights: str) -> str:
    """``weights`` if it names a weight format, else a ValueError."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHT_FORMATS)}, "
                         f"got {weights!r}")
    return weights


def wide_weights(snapshot: Snapshot) -> frozenset[str]:
    """The expected tensors ``snapshot`` stores otherwise than bf16 (f32, f16):
    in the bf16 format they stay f32 weights, widened (``SnapshotWeights``)."""
    return frozenset(n for n in snapshot.expected_tensors() if snapshot.dtype(n) != "BF16")


class SnapshotWeights(Mapping[str, np.ndarray]):
    """A snapshot's weights for a graph of weight format ``weights``
    (``models.qwen2``): with ``"bf16"``, each tensor stored in bf16 is its
    zero-copy, read-only view into the mapped file (uint16 bits: nothing is
    copied or widened; the kernels widen in registers) and any other tensor
    (``wide_weights``) is widened exactly to f32 on first use and kept; with
    ``"f32"``, every tensor is widened (``F32Weights``)."""

    def __init__(self, snapshot: Snapshot, weights: str = "bf16") -> None:
        self.snapshot = snapshot
        self.weights = check_weights(weights)
        self._f32 = F32Weights(snapshot)
        self._wide = wide_weights(snapshot) if weights == "bf16" else None

    def __getitem__(self, name: str) -> np.ndarray:
        if self._wide is None or name in self._wide:
            return self._f32[name]
        if name not in self.snapshot.expected_tensors():
            raise KeyError(name)
        return self.snapshot.raw(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.snapshot.expected_tensors())

    def __len__(self) -> int:
        return len(self.snapshot.expected_tensors())

    def widened_bytes(self) -> int:
        """Bytes of the f32 copies made so far."""
        return self._f32.widened_bytes()


@dataclass
class KVCache:
    """Keys (post-RoPE) and values of the tokens seen so far."""

    keys: np.ndarray
    values: np.ndarray
    length: int = 0
    # the step runners bound to these arrays, by backend (kv = "state")
    runners: dict[int, Any] = field(default_factory=dict, repr=False, compare=False)
    # tokens the engine has run through this cache (every step's, counted by _step)
    tokens_run: int = field(default=0, compare=False)

    @staticmethod
    def empty(cfg: Qwen2Config, capacity: int) -> KVCache:
        shape = [cfg.num_hidden_layers, cfg.num_key_value_heads, capacity, cfg.head_dim]
        what = f"a KV cache of {capacity} tokens (keys and values each)"
        return KVCache(allocate(what, shape, np.float32, zero=True),
                       allocate(what, shape, np.float32, zero=True))

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    def past(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.length
        return (np.ascontiguousarray(self.keys[:, :, :n]),
                np.ascontiguousarray(self.values[:, :, :n]))

    def append(self, keys: np.ndarray, values: np.ndarray) -> None:
        seq = keys.shape[2]
        if self.length + seq > self.capacity:
            raise CacheFullError(
                f"KV cache full: {self.length} + {seq} tokens exceed its capacity "
                f"{self.capacity}"
            )
        self.keys[:, :, self.length:self.length + seq] = keys
        self.values[:, :, self.length:self.length + seq] = values
        self.length += seq


@dataclass
class Engine:
    """A Qwen2 model on one backend: logits for token ids, with or without a cache."""

    config: Qwen2Config
    backend: Backend
    # The most tokens one step takes: a longer input runs as consecutive cached
    # steps of at most this many tokens (a long prompt's attention temporaries grow
    # with the square of the step). Each row's logits and keys are the same bits
    # either way in the C backend (a row's sums see the same terms in the same
    # order; the masked keys a one-step prefill adds contribute exact zeros);
    # None: one step, however long.
    chunk: int | None = None
    # the graph's KV form (models.qwen2.KV_FORMS): "state", the cache is the program's
    kv: str = "inputs"

    def __post_init__(self) -> None:
        if self.chunk is not None and self.chunk < 2:
            raise ValueError(f"chunk must be at least 2 tokens, got {self.chunk}")
        if self.kv not in KV_FORMS:
            raise ValueError(f"kv must be one of {', '.join(KV_FORMS)}, got {self.kv!r}")

    def new_cache(self, capacity: int) -> KVCache:
        return KVCache.empty(self.config, capacity)

    def forward(self, token_ids: Sequence[int] | np.ndarray,
                cache: KVCache | None = None, *, fresh: bool = True) -> np.ndarray:
        """Logits ``[seq, vocab]`` (or ``[1, vocab]`` for a last-only graph) for
        ``token_ids`` following the cache's tokens; the cache is extended.
        ``fresh=False`` may return the step runner's output buffer itself
        (valid until the cache's next step: a sampler that reads it at once
        saves the copy)."""
        if (cache is not None and type(token_ids) is list and len(token_ids) == 1
                and type(token_ids[0]) is int and cache.length < cache.capacity):
            # a decode step: straight to the cache's step runner (see StepRunner.step)
            runner = cache.runners.get(id(self.backend))
            if runner is not None and self.kv == "state":
                cache.tokens_run += 1
                logits = runner.step(token_ids, cache.length)["logits"]
                cache.length += 1
                return logits.copy() if fresh else logits
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
        if cache is None:
            cache = self.new_cache(len(ids))
        if cache.length + len(ids) > cache.capacity:
            raise CacheFullError(
                f"KV cache full: {cache.length} + {len(ids)} tokens exceed its capacity "
                f"{cache.capacity}"
            )
        if self.chunk is None or len(ids) <= self.chunk:
            logits = self._step(ids, cache)
            return logits.copy() if fresh and cache.runners else logits
        first = self._step(ids[:self.chunk], cache)
        if first.shape[0] == 1:  # a last-only graph: only the final step's row counts
            for start in range(self.chunk, len(ids), self.chunk):
                first = self._step(ids[start:start + self.chunk], cache)
            return first.copy() if fresh and cache.runners else first
        logits = allocate(f"the logits of {len(ids)} tokens", [len(ids), first.shape[1]],
                          first.dtype)
        logits[:self.chunk] = first
        for start in range(self.chunk, len(ids), self.chunk):
            logits[start:start + self.chunk] = self._step(ids[start:start + self.chunk], cache)
        return logits

    def _step(self, ids: np.ndarray, cache: KVCache) -> np.ndarray:
        cache.tokens_run += len(ids)
        if self.kv == "state":
            return self._state_step(ids, cache)
        past_keys, past_values = cache.past()
        out = self.backend.run({"token_ids": ids, "past_keys": past_keys,
                                "past_values": past_values})
        cache.append(out["keys"], out["values"])
        return out["logits"]

    def _state_step(self, ids: np.ndarray, cache: KVCache) -> np.ndarray:
        runner = cache.runners.get(id(self.backend))
        make = getattr(self.backend, "runner", None)
        if runner is None and make is not None:
            max_seq = min(self.chunk or cache.capacity, cache.capacity)
            runner = make({"key_cache": cache.keys, "value_cache": cache.values}, max_seq)
            cache.runners[id(self.backend)] = runner
        if runner is not None:
            logits = runner.step(ids, cache.length)["logits"]
        else:
            out = self.backend.run({"token_ids": ids, "past": cache.length,
                                    "key_cache": cache.keys, "value_cache": cache.values})
            cache.keys, cache.values = out["key_cache"], out["value_cache"]
            logits = out["logits"]
        cache.length += len(ids)
        return logits

    def greedy(self, prompt_ids: Sequence[int], n_tokens: int,
               cached: bool = True) -> list[int]:
        """``n_tokens`` argmax tokens after the prompt (with the cache, or by
        recomputing the whole sequence each step)."""
        ids = list(prompt_ids)
        out: list[int] = []
        cache = self.new_cache(len(ids) + n_tokens) if cached else None
        step_ids = ids
        for _ in range(n_tokens):
            if cached:
                logits = self.forward(step_ids, cache)
            else:
                logits = self.forward(ids + out)
            token = int(np.argmax(logits[-1]))
            out.append(token)
            step_ids = [token]
        return out

"""Prefix reuse: the KV cache of one generation kept for the next.

A chat's next turn, or a prompt that repeats the start of the last one, has
its first tokens' keys and values in the cache already: ``PrefixCache``
keeps the cache of the last generation with the token ids it holds, and
hands the next generation that cache with its length set to the longest
common prefix (always leaving the prompt's last token to run, whose logits
choose the first new token). Only the rest of the prompt is prefilled.

The logits are the same bits as a fresh prefill's: in the compiled program a
row's keys, values and logits do not depend on how the rows before it were
split into steps (``Engine.chunk``; tested in ``test_prefix.py``).

One generation at a time holds the cache (``take``/``keep`` under a
lock): a generation that finds it held gets a fresh cache, reusing nothing.
A prefix cache too small for the next generation is replaced by a larger one
(at least twice its capacity), the reused rows copied over once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from nanocompile.inference.engine import Engine, KVCache


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of ``a`` and ``b``."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class Lease:
    """A cache for one generation: ``reused`` prompt tokens are in it already."""

    cache: KVCache
    reused: int
    owner: PrefixCache | None = None


@dataclass
class PrefixCache:
    """The KV cache of the last generation of ``engine`` and its token ids."""

    engine: Engine
    limit: int | None = None  # the most positions a grown cache gets (the model's context)
    cache: KVCache | None = None
    ids: list[int] = field(default_factory=list)  # the tokens in cache[:len(ids)]
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, prompt: Sequence[int], capacity: int) -> Lease:
        """A cache of at least ``capacity`` positions holding the longest prefix
        of ``prompt`` the kept cache has (at most ``len(prompt) - 1`` tokens);
        a fresh one, reusing nothing, when another generation holds it."""
        if not self._lock.acquire(blocking=False):
            return Lease(self.engine.new_cache(capacity), 0)
        try:
            reused = min(common_prefix(self.ids, prompt), len(prompt) - 1)
            if self.cache is None or self.cache.capacity < capacity:
                grown = capacity if self.cache is None else max(capacity,
                                                                2 * self.cache.capacity)
                if self.limit is not None:
                    grown = max(capacity, min(grown, self.limit))
                fresh = self.engine.new_cache(grown)
                if reused and self.cache is not None:
                    fresh.keys[:, :, :reused] = self.cache.keys[:, :, :reused]
                    fresh.values[:, :, :reused] = self.cache.values[:, :, :reused]
                self.cache = fresh
            self.cache.length = reused
            self.ids = list(prompt[:reused])
            return Lease(self.cache, reused, self)
        except BaseException:
            self._lock.release()
            raise

    def keep(self, lease: Lease, fed: Sequence[int]) -> None:
        """End ``lease``: ``fed`` are the tokens run through its cache so far, in
        order (the prompt, then the generated tokens fed back); the first
        ``cache.length`` of them are its contents."""
        if lease.owner is not self:
            return
        lease.owner = None
        self.ids = list(fed[:lease.cache.length])
        self._lock.release()

    def clear(self) -> None:
        """Forget the kept cache (its memory is freed when no lease holds it)."""
        with self._lock:
            self.cache = None
            self.ids = []

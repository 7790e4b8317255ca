"""The generation loop: prefill a prompt, then decode one token at a time.

One graph serves both phases (spec §2.3: ``past = 0`` for the prefill,
``seq = 1`` for each decode step); the engine's KV cache carries the
context between steps. Tokens are chosen by a :class:`~nanocompile.inference.sampling.Sampler`
on the NumPy side and streamed as text through a
:class:`~nanocompile.tokenizer.tokenizer.StreamDecoder`, which holds back the
bytes of a character split across tokens until it is whole.

Only ids the tokenizer knows are ever drawn: the embedding's padding rows
(151,665..151,935 for Qwen2.5) get ``-inf`` before sampling, so decoding can
never meet an id without a token. This changes nothing for greedy choice
unless a padding row wins, which no trained (or synthetic) model does.

Stop strings end generation when the decoded text contains one of them; the
text stops right before it. While a stream's tail could still become a stop
string, that tail is held back from ``on_token``, so a client never sees text
the stop string then takes away. A ``cancel`` callback, asked before every
forward pass, ends generation early (a disconnected client, a Ctrl-C); a
long prompt prefills in the engine's chunks, so cancellation and progress
come between chunks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from nanocompile.inference.engine import CacheFullError, Engine, KVCache
from nanocompile.inference.prefix import Lease, PrefixCache
from nanocompile.inference.progress import PREFILL, Progress
from nanocompile.inference.sampling import Sampler
from nanocompile.tokenizer.tokenizer import Tokenizer

StopReason = Literal["stop_token", "stop_string", "max_tokens", "context", "cancelled"]
"""Why generation ended: a stop token was drawn (it is not part of the output), the
text reached a stop string (cut off before it), ``max_tokens`` tokens were
generated, the context is full, or ``cancel()`` said so."""

TokenCallback = Callable[[str], object]
"""Called with each piece of text as soon as it is complete (never with "")."""

CancelCheck = Callable[[], bool]
"""Asked before every forward pass: True ends generation (stop reason "cancelled")."""

MAX_STOP_STRINGS = 16  # more would make the held-back tail search slow for nothing


class ContextLengthError(CacheFullError):
    """The prompt does not fit the model's context (or the chosen context length)."""


@dataclass(frozen=True)
class GenerationResult:
    """What one generation produced and how long it took.

    ``token_ids`` are the generated ids (the prompt and a final stop token are
    not included); ``text`` is their decoded text. ``prefill_seconds`` covers
    the prompt's forward pass and the first token's choice; ``decode_seconds``
    the rest, whose ``decode_steps`` forward passes give ``decode_tok_per_s``
    (0.0 when there were none).
    """

    text: str
    token_ids: list[int]
    prompt_tokens: int
    prefill_seconds: float
    decode_seconds: float
    decode_tok_per_s: float
    stop_reason: StopReason
    decode_steps: int = 0
    # the prompt tokens not run through the engine (found in the prefix cache), from the
    # engine's own count of the tokens it ran through the cache
    cached_prompt_tokens: int = 0


class _Stream:
    """The stream decoder and the callback, collecting the text as it goes and
    cutting it before the first stop string."""

    def __init__(self, tokenizer: Tokenizer, on_token: TokenCallback | None,
                 stops: tuple[str, ...] = ()) -> None:
        self.decoder = tokenizer.stream_decoder()
        self.on_token = on_token
        self.stops = stops
        self.text = ""
        self.emitted = 0  # characters of ``text`` handed to ``on_token``
        self.stopped = False  # a stop string was found: ``text`` ends before it

    def push(self, token_id: int) -> bool:
        """Decode one token; True when the text now reaches a stop string."""
        return self._add(self.decoder.push(token_id), final=False)

    def close(self) -> str:
        """The whole text (up to any stop string), the held-back tail emitted."""
        if not self.stopped:
            self._add(self.decoder.flush(), final=True)
        return self.text

    def _add(self, piece: str, *, final: bool) -> bool:
        self.text += piece
        cut = self._first_stop()
        if cut is not None:
            self.text, self.stopped = self.text[:cut], True
        end = len(self.text) if final or self.stopped else len(self.text) - self._held()
        self._emit(end)
        return self.stopped

    def _first_stop(self) -> int | None:
        """Where the earliest stop string starts (never before ``emitted``: a stop
        string that began in emitted text would have been held back or found)."""
        found = [i for i in (self.text.find(s, self.emitted) for s in self.stops) if i >= 0]
        return min(found) if found else None

    def _held(self) -> int:
        """How many final characters could still begin a stop string."""
        longest = 0
        for stop in self.stops:
            for k in range(min(len(stop) - 1, len(self.text) - self.emitted), longest, -1):
                if self.text.endswith(stop[:k]):
                    longest = k
                    break
        return longest

    def _emit(self, end: int) -> None:
        if end <= self.emitted:
            return
        piece = self.text[self.emitted:end]
        self.emitted = end
        if self.on_token is not None:
            self.on_token(piece)


def check_stops(stop: str | Sequence[str]) -> tuple[str, ...]:
    """``stop`` (one string or several) as a tuple of non-empty strings, else a
    ValueError."""
    stops = (stop,) if isinstance(stop, str) else tuple(stop)
    bad = [s for s in stops if not isinstance(s, str) or not s]
    if bad:
        raise ValueError(f"stop strings must be non-empty strings, got {bad[0]!r}")
    if len(stops) > MAX_STOP_STRINGS:
        raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings, got {len(stops)}")
    return stops


def check_prompt(prompt_ids: Sequence[int], context: int) -> None:
    """Raise ``ContextLengthError`` unless the prompt leaves room for a token."""
    n = len(prompt_ids)
    if n == 0:
        raise ValueError("the prompt is empty: give at least one token")
    if n >= context:
        raise ContextLengthError(
            f"the prompt has {n} tokens but the context holds {context}, "
            f"so at most {context - 1} prompt tokens leave room to generate"
        )


def generate_tokens(
    engine: Engine,
    tokenizer: Tokenizer,
    prompt_ids: Sequence[int],
    *,
    max_tokens: int,
    sampler: Sampler,
    stop_ids: Collection[int] = (),
    context: int,
    on_token: TokenCallback | None = None,
    stop: str | Sequence[str] = (),
    cancel: CancelCheck | None = None,
    progress: Progress | None = None,
    prefix: PrefixCache | None = None,
) -> GenerationResult:
    """Generate up to ``max_tokens`` tokens after ``prompt_ids``.

    ``context`` bounds prompt plus generated tokens (the model's
    ``max_position_embeddings`` or less); generation stops early at any id in
    ``stop_ids``, when the text reaches a string of ``stop`` (the text ends
    before it; the token that completed it is the last of ``token_ids``) or
    when ``cancel()`` returns True (asked before each forward pass).
    ``progress`` hears the prefill (step ``PREFILL``, in tokens, chunk by
    chunk). Raises ``ContextLengthError`` if the prompt leaves no room.
    ``prefix``: the cache of earlier generations (``inference.prefix``): the
    prompt's longest prefix found there is not run again (the same bits), and
    this generation's cache is kept there for the next.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    prompt = [int(i) for i in prompt_ids]
    check_prompt(prompt, context)
    stream = _Stream(tokenizer, on_token, check_stops(stop))
    budget = min(max_tokens, context - len(prompt))
    capacity = len(prompt) + budget - 1
    lease = prefix.take(prompt, capacity) if prefix is not None else \
        Lease(engine.new_cache(capacity), 0)
    generated: list[int] = []
    try:
        return _generate(engine, tokenizer, prompt, budget, max_tokens, sampler, stop_ids,
                         stream, lease, generated, cancel, progress)
    finally:
        if prefix is not None:
            prefix.keep(lease, prompt + generated)


def _generate(engine: Engine, tokenizer: Tokenizer, prompt: list[int], budget: int,
              max_tokens: int, sampler: Sampler, stop_ids: Collection[int], stream: _Stream,
              lease: Lease, generated: list[int], cancel: CancelCheck | None,
              progress: Progress | None) -> GenerationResult:
    cache = lease.cache

    def choose(logits: np.ndarray) -> int:
        row = _known_tokens_only(logits[-1], tokenizer.vocab_size)
        penalized = sampler.params.repetition_penalty != 1.0
        return sampler.sample(row, prompt + generated if penalized else None)

    def cancelled() -> bool:
        return cancel is not None and bool(cancel())

    prefilled = 0  # tokens of the prompt the engine ran (its count, not the lease's)

    def result(reason: StopReason, prefill: float, decode: float, steps: int) -> GenerationResult:
        return GenerationResult(
            text=stream.close(), token_ids=generated, prompt_tokens=len(prompt),
            prefill_seconds=prefill, decode_seconds=decode,
            decode_tok_per_s=steps / decode if steps and decode > 0 else 0.0,
            stop_reason=reason, decode_steps=steps,
            cached_prompt_tokens=len(prompt) - prefilled if prefilled else 0)

    start = time.perf_counter()
    before = cache.tokens_run
    logits = _prefill(engine, prompt, lease.reused, cache, cancelled, progress)
    prefilled = cache.tokens_run - before
    if logits is None:
        return result("cancelled", time.perf_counter() - start, 0.0, 0)
    token = choose(logits)
    prefill_seconds = time.perf_counter() - start
    start = time.perf_counter()
    steps = 0
    reason: StopReason = "max_tokens" if budget == max_tokens else "context"
    while True:
        if token in stop_ids:
            reason = "stop_token"
            break
        generated.append(token)
        if stream.push(token):
            reason = "stop_string"
            break
        if len(generated) == budget:
            break
        if cancelled():
            reason = "cancelled"
            break
        token = choose(engine.forward([token], cache, fresh=False))  # sampled at once
        steps += 1
    return result(reason, prefill_seconds, time.perf_counter() - start, steps)


def _prefill(engine: Engine, prompt: list[int], reused: int, cache: KVCache,
             cancelled: Callable[[], bool], progress: Progress | None) -> np.ndarray | None:
    """The logits of the prompt's tokens after the ``reused`` ones the cache has,
    run in the engine's chunks (the same bits as one call: ``Engine.forward``
    steps through the same chunks); None if cancelled."""
    n = len(prompt)
    chunk = engine.chunk or n
    if progress is not None:
        progress(PREFILL, reused, n)
    logits = None
    for start in range(reused, n, chunk):
        if cancelled():
            return None
        logits = engine.forward(prompt[start:start + chunk], cache)
        if progress is not None:
            progress(PREFILL, min(start + chunk, n), n)
    return logits


def _known_tokens_only(row: np.ndarray, n_tokens: int) -> np.ndarray:
    """``row`` with ids at or past ``n_tokens`` (padding rows) set to -inf."""
    if row.shape[0] <= n_tokens:
        return row
    out = row.copy()
    out[n_tokens:] = -np.inf
    return out

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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from nanocompile.inference.engine import CacheFullError, Engine
from nanocompile.inference.sampling import Sampler
from nanocompile.tokenizer.tokenizer import Tokenizer

StopReason = Literal["stop_token", "max_tokens", "context"]
"""Why generation ended: a stop token was drawn (it is not part of the output),
``max_tokens`` tokens were generated, or the context is full."""

TokenCallback = Callable[[str], object]
"""Called with each piece of text as soon as it is complete (never with "")."""


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


@dataclass
class _Stream:
    """The stream decoder and the callback, collecting the text as it goes."""

    tokenizer: Tokenizer
    on_token: TokenCallback | None

    def __post_init__(self) -> None:
        self.decoder = self.tokenizer.stream_decoder()
        self.pieces: list[str] = []

    def push(self, token_id: int) -> None:
        self._emit(self.decoder.push(token_id))

    def close(self) -> str:
        self._emit(self.decoder.flush())
        return "".join(self.pieces)

    def _emit(self, piece: str) -> None:
        if not piece:
            return
        self.pieces.append(piece)
        if self.on_token is not None:
            self.on_token(piece)


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
) -> GenerationResult:
    """Generate up to ``max_tokens`` tokens after ``prompt_ids``.

    ``context`` bounds prompt plus generated tokens (the model's
    ``max_position_embeddings`` or less); generation stops early at any id in
    ``stop_ids``. Raises ``ContextLengthError`` if the prompt leaves no room.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    prompt = [int(i) for i in prompt_ids]
    check_prompt(prompt, context)
    budget = min(max_tokens, context - len(prompt))
    cache = engine.new_cache(len(prompt) + budget - 1)
    stream = _Stream(tokenizer, on_token)
    generated: list[int] = []

    def choose(logits: np.ndarray) -> int:
        row = _known_tokens_only(logits[-1], tokenizer.vocab_size)
        penalized = sampler.params.repetition_penalty != 1.0
        return sampler.sample(row, prompt + generated if penalized else None)

    start = time.perf_counter()
    token = choose(engine.forward(prompt, cache))
    prefill_seconds = time.perf_counter() - start
    start = time.perf_counter()
    steps = 0
    reason: StopReason = "max_tokens" if budget == max_tokens else "context"
    while True:
        if token in stop_ids:
            reason = "stop_token"
            break
        generated.append(token)
        stream.push(token)
        if len(generated) == budget:
            break
        token = choose(engine.forward([token], cache))
        steps += 1
    decode_seconds = time.perf_counter() - start
    return GenerationResult(
        text=stream.close(),
        token_ids=generated,
        prompt_tokens=len(prompt),
        prefill_seconds=prefill_seconds,
        decode_seconds=decode_seconds,
        decode_tok_per_s=steps / decode_seconds if steps and decode_seconds > 0 else 0.0,
        stop_reason=reason,
        decode_steps=steps,
    )


def _known_tokens_only(row: np.ndarray, n_tokens: int) -> np.ndarray:
    """``row`` with ids at or past ``n_tokens`` (padding rows) set to -inf."""
    if row.shape[0] <= n_tokens:
        return row
    out = row.copy()
    out[n_tokens:] = -np.inf
    return out

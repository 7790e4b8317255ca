"""The generation loop's stop strings, cancellation and prefill progress (issue 21),
on a scripted backend whose argmax is the next token of a known text: the
expected texts are cut from that text by hand, not by the code under test.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.inference.engine import Engine
from nanocompile.inference.generate import (
    MAX_STOP_STRINGS,
    GenerationResult,
    check_stops,
    generate_tokens,
)
from nanocompile.inference.progress import PREFILL
from nanocompile.inference.sampling import Sampler, SamplingParams
from nanocompile.tokenizer.tokenizer import Tokenizer

TEXT = "Hello world. The end. More text after it"


class Scripted:
    """Logits whose argmax is the next token of ``script`` once the ``prompt``
    tokens are in; empty KV rows."""

    def __init__(self, config: Qwen2Config, script: list[int], prompt: int) -> None:
        self.config, self.script, self.prompt = config, script, prompt
        self.steps: list[int] = []  # the tokens of each forward pass

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        cfg = self.config
        seq = inputs["token_ids"].shape[0]
        self.steps.append(seq)
        logits = np.zeros((1, cfg.vocab_size), np.float32)
        logits[0, self.script[min(max(sum(self.steps) - self.prompt, 0),
                                  len(self.script) - 1)]] = 1
        kv = np.zeros((cfg.num_hidden_layers, cfg.num_key_value_heads, seq, cfg.head_dim),
                      np.float32)
        return {"logits": logits, "keys": kv, "values": kv}


@pytest.fixture(scope="module")
def parts(tiny_snapshot: Path) -> tuple[Qwen2Config, Tokenizer, list[int]]:
    tokenizer = Tokenizer.from_dir(tiny_snapshot)
    config = Qwen2Config.from_file(tiny_snapshot / "config.json")
    script = tokenizer.encode(TEXT)
    assert tokenizer.decode(script) == TEXT
    assert len(script) > 8
    return config, tokenizer, script


def run(parts: tuple[Qwen2Config, Tokenizer, list[int]], *, prompt: int = 2,
        chunk: int | None = None, **kwargs: object) -> tuple[GenerationResult, list[str],
                                                             Scripted]:
    config, tokenizer, script = parts
    backend = Scripted(config, script, prompt)
    pieces: list[str] = []
    result = generate_tokens(Engine(config, backend, chunk=chunk), tokenizer,
                             list(range(1, prompt + 1)), max_tokens=len(script),
                             sampler=Sampler(SamplingParams(temperature=0)), context=1000,
                             on_token=pieces.append, **kwargs)  # type: ignore[arg-type]
    return result, pieces, backend


def test_without_stops_the_whole_script(parts: tuple[Qwen2Config, Tokenizer, list[int]]
                                        ) -> None:
    result, pieces, _ = run(parts)
    assert result.text == "".join(pieces) == TEXT
    assert result.stop_reason == "max_tokens"


@pytest.mark.parametrize("stop", ["The end", ". M", "world", "Hello", "t after it"])
def test_a_stop_string_cuts_the_text_before_it(parts: tuple[Qwen2Config, Tokenizer, list[int]],
                                               stop: str) -> None:
    result, pieces, _ = run(parts, stop=[stop])
    want = TEXT[:TEXT.index(stop)]
    assert result.text == want
    assert "".join(pieces) == want  # nothing of the stop string was streamed first
    assert result.stop_reason == "stop_string"
    tokenizer = parts[1]
    # the ids run up to the token that completed the stop string, no further
    assert TEXT.startswith(tokenizer.decode(result.token_ids))
    assert stop in tokenizer.decode(result.token_ids)
    assert stop not in tokenizer.decode(result.token_ids[:-1])


def test_the_earliest_of_several_stops_wins(parts: tuple[Qwen2Config, Tokenizer, list[int]]
                                            ) -> None:
    result, _, _ = run(parts, stop=["after", "end.", "zzz"])
    assert result.text == "Hello world. The "


def test_a_held_back_tail_is_streamed_at_the_end(parts: tuple[Qwen2Config, Tokenizer,
                                                              list[int]]) -> None:
    """The text ends in a prefix of a stop string ("it" of "it!"): held back while it
    could still become one, emitted when generation ends."""
    result, pieces, _ = run(parts, stop="it!")
    assert result.text == "".join(pieces) == TEXT
    assert result.stop_reason == "max_tokens"
    assert pieces[-1].endswith("it")


@pytest.mark.parametrize(("stop", "message"), [
    ([""], "stop strings must be non-empty strings, got ''"),
    ([3], "stop strings must be non-empty strings, got 3"),
    (["x"] * (MAX_STOP_STRINGS + 1), f"at most {MAX_STOP_STRINGS} stop strings"),
])
def test_bad_stop_strings(stop: list[object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_stops(stop)  # type: ignore[arg-type]
    assert check_stops("ab") == ("ab",)


def test_cancel_stops_between_steps(parts: tuple[Qwen2Config, Tokenizer, list[int]]) -> None:
    tokenizer = parts[1]
    asked = [0]

    def after_three() -> bool:
        asked[0] += 1
        return asked[0] > 3  # the prefill's one question, then two decode steps

    result, pieces, backend = run(parts, cancel=after_three)
    assert result.stop_reason == "cancelled"
    assert len(result.token_ids) == 3
    assert result.text == "".join(pieces) == tokenizer.decode(result.token_ids)
    assert len(backend.steps) == 3  # prefill + 2 decode steps; the 4th was not run


def test_cancel_before_the_prefill_runs_nothing(parts: tuple[Qwen2Config, Tokenizer,
                                                             list[int]]) -> None:
    result, pieces, backend = run(parts, cancel=lambda: True)
    assert (result.stop_reason, result.token_ids, result.text, pieces, backend.steps) == (
        "cancelled", [], "", [], [])


def test_prefill_runs_in_chunks_with_progress(parts: tuple[Qwen2Config, Tokenizer, list[int]]
                                              ) -> None:
    calls: list[tuple[str, int, int]] = []
    result, _, backend = run(parts, prompt=10, chunk=4,
                             progress=lambda *a: calls.append(a))  # type: ignore[arg-type]
    assert backend.steps[:3] == [4, 4, 2]
    assert set(backend.steps[3:]) == {1}
    assert calls == [(PREFILL, 0, 10), (PREFILL, 4, 10), (PREFILL, 8, 10), (PREFILL, 10, 10)]
    assert result.text == TEXT


def test_cancel_between_prefill_chunks(parts: tuple[Qwen2Config, Tokenizer, list[int]]) -> None:
    asked = [0]

    def after_one_chunk() -> bool:
        asked[0] += 1
        return asked[0] > 1

    result, _, backend = run(parts, prompt=10, chunk=4, cancel=after_one_chunk)
    assert result.stop_reason == "cancelled"
    assert backend.steps == [4]
    assert result.token_ids == []

"""Long prompts prefill in chunks (``Engine.chunk``; issue 14, point 3).

A prompt longer than the chunk runs as consecutive cached steps, so the
attention temporaries of one step are ``chunk x context``, not ``context^2``.
In the C backend every row's logits and keys are the same bits as in one step:
a row's sums see the same terms in the same order, and the masked keys a
one-step prefill adds contribute exact zeros. (The interpreter's matmul is
BLAS, whose blocking may depend on the row count: there the claim is a
tolerance, 1e-5 of the largest logit, as for every other interpreter-vs-C
comparison of this suite.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nanocompile.backend.runtime import CompiledBackend
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program
from nanocompile.inference.engine import Engine, F32Weights
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

PROMPT = np.random.default_rng(14).integers(0, 151643, 45).tolist()


@pytest.fixture(scope="module")
def parts(tiny_snapshot: Path) -> dict[str, object]:
    snap = Snapshot.open(tiny_snapshot)
    weights = F32Weights(snap)
    out: dict[str, object] = {"config": snap.config}
    for last_only in (False, True):
        graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=last_only))
        out[f"c-{last_only}"] = CompiledBackend(compile_program(graph, weights, schedule=True))
        out[f"interp-{last_only}"] = InterpreterBackend(graph, weights)
    return out


def _run(parts: dict[str, object], backend: str, chunk: int | None
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    engine = Engine(parts["config"], parts[backend], chunk=chunk)  # type: ignore[arg-type]
    cache = engine.new_cache(len(PROMPT) + 2)
    logits = engine.forward(PROMPT, cache)
    step = engine.forward([int(np.argmax(logits[-1]))], cache)  # a cached step after it
    return np.concatenate([logits, step]), cache.keys, cache.values


@pytest.mark.parametrize("last_only", [False, True], ids=["all-rows", "last-only"])
@pytest.mark.parametrize("chunk", [2, 16, 44])
def test_chunked_prefill_is_bitwise_in_c(parts: dict[str, object], chunk: int,
                                         last_only: bool) -> None:
    whole = _run(parts, f"c-{last_only}", None)
    chunked = _run(parts, f"c-{last_only}", chunk)
    for what, a, b in zip(("logits", "keys", "values"), whole, chunked, strict=True):
        assert a.shape == b.shape, what
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), what


def test_chunked_prefill_in_the_interpreter(parts: dict[str, object]) -> None:
    whole = _run(parts, "interp-False", None)
    chunked = _run(parts, "interp-False", 16)
    for a, b in zip(whole, chunked, strict=True):
        scale = max(1.0, float(np.abs(a).max()))
        assert np.abs(a - b).max() <= 1e-5 * scale


def test_chunk_must_hold_two_tokens(parts: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="at least 2"):
        Engine(parts["config"], parts["c-True"], chunk=1)  # type: ignore[arg-type]

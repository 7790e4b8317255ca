"""The whole model in int8 (issue 18, "Must show" item 2): the graph after
``quantize-int8`` interpreted exactly (``InterpreterBackend(..., exact=True)``:
spec §5's kernel A and the C's own sum orders, in NumPy) and the compiled C
program give the same bits.

Claims, with the int8 embedding/LM head and without (``embedding=f32``):

* every position's logits of a prompt, then of each cached greedy decode
  step, and the KV cache after them, bit for bit, with the C at 1 and 2
  threads (the tiny model on the host's arch, every other arch this CPU runs
  and the f32 embedding in the full suite; the full-size model in a slow test);
* so the same greedy tokens (each step runs on its own argmax);
* the weights are the int8 format the tests' own ``_int8_reference`` computes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from _arches import arch_params
from _int8_reference import quantize_rows
from _prompts import prompt_ids

from nanocompile.api import Int8Weights, int8_weights
from nanocompile.backend.runtime import CompiledBackend, CompiledProgram
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import CompileOptions, Pipeline, compile_loop, int8_pass, quantize_graph
from nanocompile.inference.engine import Engine, KVCache, SnapshotWeights
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.targets.arch import Arch, host_arch

THREADS = (1, 2)
DECODE_STEPS = 3  # cached greedy steps after the prompt


class Int8Model:
    """The int8 graph of one snapshot (all positions), its weights and the exact
    interpreter on it."""

    def __init__(self, directory: Path, cache: Path, embedding: bool) -> None:
        self.dir = directory
        self.snap = Snapshot.open(directory)
        self.quantize = int8_pass(embedding)
        self.graph = build_qwen2(self.snap.config, Qwen2GraphOptions(weights="bf16"))
        self.quantized = quantize_graph(self.graph, self.quantize)
        self.weights = int8_weights(self.snap, self.quantized, SnapshotWeights(self.snap, "bf16"),
                                    cache_dir=cache)
        self.interp = Engine(self.snap.config,
                             InterpreterBackend(self.quantized, self.weights, exact=True))
        self._reference: dict[str, Run] = {}

    def program(self, arch: Arch) -> CompiledProgram:
        """The C program of the int8 graph, scheduled for ``arch``."""
        options = CompileOptions(arch=arch.name, quantize=self.quantize)
        return compile_loop(Pipeline(self.graph, options).kernels, self.weights)

    def reference(self, key: str) -> Run:
        """The exact interpreter's run after prompt ``key`` (computed once)."""
        if key not in self._reference:
            self._reference[key] = greedy_run(self.interp, prompt_ids(self.dir, key))
        return self._reference[key]


@dataclass
class Run:
    """A prompt and greedy decode steps: each step's logits, the tokens, the cache."""

    logits: list[np.ndarray]
    tokens: list[int]
    cache: KVCache


def greedy_run(engine: Engine, ids: list[int]) -> Run:
    """The prompt (every position's logits), then ``DECODE_STEPS`` cached steps, each
    on the argmax of the step before (so equal logits at every step show equal
    greedy tokens)."""
    cache = engine.new_cache(len(ids) + DECODE_STEPS)
    logits = [engine.forward(ids, cache)]
    tokens = [int(np.argmax(logits[-1][-1]))]
    for _ in range(DECODE_STEPS):
        logits.append(engine.forward([tokens[-1]], cache))
        tokens.append(int(np.argmax(logits[-1][-1])))
    return Run(logits, tokens, cache)


def _bitwise(model: Int8Model, arch: Arch, key: str) -> None:
    want = model.reference(key)
    n = want.cache.length
    assert want.logits[0].shape == (n - DECODE_STEPS, model.snap.config.vocab_size)
    program = model.program(arch)
    compiled = Engine(model.snap.config, CompiledBackend(program))
    for threads in THREADS:
        assert program.set_threads(threads) == threads
        got = greedy_run(compiled, prompt_ids(model.dir, key))
        for step, (g, w) in enumerate(zip(got.logits, want.logits, strict=True)):
            np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32),
                                          err_msg=f"{arch.name}, step {step}, {threads} thr")
        assert got.tokens == want.tokens
        assert got.cache.length == n
        for g, w in ((got.cache.keys, want.cache.keys), (got.cache.values, want.cache.values)):
            np.testing.assert_array_equal(g[:, :, :n].view(np.uint32), w[:, :, :n].view(np.uint32),
                                          err_msg=f"{arch.name} cache, {threads} thr")


# the f32 embedding in the full suite only (the 3-minute budget: ~3 s a model, most of it
# the exact interpreter)
@pytest.fixture(scope="module", params=[True, pytest.param(False, marks=pytest.mark.slow)],
                ids=["int8-embedding", "f32-embedding"])
def tiny(request: pytest.FixtureRequest, tiny_snapshot: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Int8Model:
    return Int8Model(tiny_snapshot, tmp_path_factory.mktemp("int8-cache"), request.param)


def test_tiny_weights_are_spec_int8(tiny: Int8Model) -> None:
    assert isinstance(tiny.weights, Int8Weights)
    for name, (source, part) in tiny.weights.sources.items():
        q, scale = quantize_rows(tiny.snap.f32(source))
        want = q if part == "int8" else scale
        got = tiny.weights[name]
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    embedded = "model.embed_tokens.weight" in {s for s, _ in tiny.weights.sources.values()}
    assert embedded == ("embedding=int8" in tiny.quantize)


def _other_arches() -> list[object]:
    return [p for p in arch_params() if p.values[0].name != host_arch().name]


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_tiny_int8_c_is_bitwise_the_exact_interpreter(tiny: Int8Model) -> None:
    """The host's arch (the widest this CPU runs)."""
    _bitwise(tiny, host_arch(), "france")


@pytest.mark.slow  # ~1 s of gcc per arch and model: the 3-minute budget
@pytest.mark.parametrize("arch", _other_arches())
def test_tiny_int8_c_is_bitwise_on_the_other_arches(tiny: Int8Model, arch: Arch) -> None:
    _bitwise(tiny, arch, "france")


@pytest.mark.slow  # the full-size model interpreted exactly: minutes
@pytest.mark.parametrize("embedding", [True, False], ids=["int8-embedding", "f32-embedding"])
def test_full_size_int8_c_is_bitwise_the_exact_interpreter(
        full_snapshot: Path, tmp_path_factory: pytest.TempPathFactory, embedding: bool) -> None:
    model = Int8Model(full_snapshot, tmp_path_factory.mktemp("int8-cache-full"), embedding)
    _bitwise(model, host_arch(), "france")

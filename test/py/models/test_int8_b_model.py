"""The whole model with spec §5 kernel B (W8A8, ``quantize-int8{kernel=b}``;
issue 18, "Must show" item 2): the graph after the pass interpreted exactly
(``InterpreterBackend(..., exact=True)``: ``graph.matmul_i8``, ``graph.round``
and the sequential offset sum in NumPy, ``interpreter/exact.py``) and the
compiled C program give the same bits.

Claims, with the int8 embedding (its LM head kernel A: kernel B keeps the LM
head's activations f32), with it and spec §5's switch (``head=b``: the LM head
kernel B too, its activations quantized) and without it (``embedding=f32``):

* the graph has kernel B's projections (``graph.matmul_i8``, seven per layer,
  and the LM head with ``head=b``);
* every position's logits of a prompt, then of each cached greedy decode step,
  and the KV cache after them, bit for bit, the C at 1 and 2 threads (the tiny
  model on the host's arch; every other arch and the f32 embedding in the full
  suite, the full-size model in a slow test);
* so the same greedy tokens (each step runs on its own argmax).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from _arches import arch_params
from _prompts import prompt_ids

from nanocompile.api import int8_weights
from nanocompile.backend.runtime import CompiledBackend, CompiledProgram
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import CompileOptions, Pipeline, compile_loop, int8_pass, quantize_graph
from nanocompile.dialects import graph as g
from nanocompile.inference.engine import Engine, KVCache, SnapshotWeights
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.targets.arch import Arch, host_arch

THREADS = (1, 2)
DECODE_STEPS = 3  # cached greedy steps after the prompt
PROJECTIONS_PER_LAYER = 7  # q, k, v, o, gate, up, down


class KernelBModel:
    """The kernel-B graph of one snapshot, its weights and the exact interpreter."""

    def __init__(self, directory: Path, cache: Path, embedding: bool, head: str = "a") -> None:
        self.dir = directory
        self.snap = Snapshot.open(directory)
        self.embedding, self.head = embedding, head
        self.quantize = int8_pass(embedding, kernel="b", head=head)
        self.graph = build_qwen2(self.snap.config, Qwen2GraphOptions(weights="bf16"))
        self.quantized = quantize_graph(self.graph, self.quantize)
        self.weights = int8_weights(self.snap, self.quantized, SnapshotWeights(self.snap, "bf16"),
                                    cache_dir=cache)
        self.interp = Engine(self.snap.config,
                             InterpreterBackend(self.quantized, self.weights, exact=True))
        self._reference: dict[str, Run] = {}

    def program(self, arch: Arch) -> CompiledProgram:
        options = CompileOptions(arch=arch.name, quantize=self.quantize)
        return compile_loop(Pipeline(self.graph, options).kernels, self.weights)

    def reference(self, key: str) -> Run:
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
    cache = engine.new_cache(len(ids) + DECODE_STEPS)
    logits = [engine.forward(ids, cache)]
    tokens = [int(np.argmax(logits[-1][-1]))]
    for _ in range(DECODE_STEPS):
        logits.append(engine.forward([tokens[-1]], cache))
        tokens.append(int(np.argmax(logits[-1][-1])))
    return Run(logits, tokens, cache)


def _bitwise(model: KernelBModel, arch: Arch, key: str) -> None:
    want = model.reference(key)
    n = want.cache.length
    program = model.program(arch)
    compiled = Engine(model.snap.config, CompiledBackend(program))
    for threads in THREADS:
        assert program.set_threads(threads) == threads
        got = greedy_run(compiled, prompt_ids(model.dir, key))
        for step, (gl, wl) in enumerate(zip(got.logits, want.logits, strict=True)):
            np.testing.assert_array_equal(gl.view(np.uint32), wl.view(np.uint32),
                                          err_msg=f"{arch.name}, step {step}, {threads} thr")
        assert got.tokens == want.tokens
        for gc, wc in ((got.cache.keys, want.cache.keys),
                       (got.cache.values, want.cache.values)):
            np.testing.assert_array_equal(gc[:, :, :n].view(np.uint32),
                                          wc[:, :, :n].view(np.uint32),
                                          err_msg=f"{arch.name} cache, {threads} thr")


# the f32 embedding in the full suite only (the 3-minute budget: seconds a model,
# most of them the exact interpreter)
@pytest.fixture(scope="module", params=[(True, "a"), pytest.param((False, "a"),
                                                                   marks=pytest.mark.slow),
                                         (True, "b")],
                ids=["int8-embedding", "f32-embedding", "int8-dot-head"])
def tiny(request: pytest.FixtureRequest, tiny_snapshot: Path,
         tmp_path_factory: pytest.TempPathFactory) -> KernelBModel:
    embedding, head = request.param
    return KernelBModel(tiny_snapshot, tmp_path_factory.mktemp("int8-b-cache"), embedding, head)


def test_tiny_graph_has_kernel_b_projections(tiny: KernelBModel) -> None:
    func = next(op for op in tiny.quantized.ops if isinstance(op, g.GraphFuncOp))
    cores = [op for op in func.block.ops if isinstance(op, g.MatmulI8Op)]
    heads = 1 if tiny.head == "b" else 0  # the LM head on kernel B too
    assert len(cores) == PROJECTIONS_PER_LAYER * tiny.snap.config.num_hidden_layers + heads
    kernel_a = [op for op in func.block.ops if isinstance(op, g.MatmulOp)
                and op.order_name == "blocks32"]
    # kernel A is left for the int8 LM head without the switch only
    assert len(kernel_a) == (1 if tiny.embedding and tiny.head == "a" else 0)


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_tiny_kernel_b_c_is_bitwise_the_exact_interpreter(tiny: KernelBModel) -> None:
    """The host's arch (the widest this CPU runs)."""
    _bitwise(tiny, host_arch(), "france")


def _other_arches() -> list[object]:
    return [p for p in arch_params() if p.values[0].name != host_arch().name]


@pytest.mark.slow  # ~1 s of gcc per arch and model: the 3-minute budget
@pytest.mark.parametrize("arch", _other_arches())
def test_tiny_kernel_b_c_is_bitwise_on_the_other_arches(tiny: KernelBModel, arch: Arch) -> None:
    _bitwise(tiny, arch, "france")


@pytest.mark.slow  # the full-size model interpreted exactly: minutes
def test_full_size_kernel_b_c_is_bitwise_the_exact_interpreter(
        full_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    model = KernelBModel(full_snapshot, tmp_path_factory.mktemp("int8-b-cache-full"), True)
    _bitwise(model, host_arch(), "france")


@pytest.mark.slow  # the full-size model interpreted exactly: minutes
def test_full_size_kernel_b_head_c_is_bitwise_the_exact_interpreter(
        full_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """spec §5's switch: the LM head (151,936 x 896) on kernel B as well."""
    model = KernelBModel(full_snapshot, tmp_path_factory.mktemp("int8-b-head-full"), True, "b")
    _bitwise(model, host_arch(), "france")

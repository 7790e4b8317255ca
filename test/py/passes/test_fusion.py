"""Phase 3: fusion, with kernels and bytes counted exactly and results bitwise.

Claims:
* kernel launches: 13 per block (rms_norm; q, k, v projections with bias;
  RoPE q; RoPE k; scores with scale and mask; softmax; context; o_proj +
  residual; rms_norm; gate + up + SwiGLU in one k loop; down + residual) and
  7 outside (embedding gather, cos table, sin table, final rms_norm, LM head,
  keys, values): 319 per step, as spec §3;
* the fused decode graph's bytes polynomial equals spec §3's fused reference
  exactly; its ``past`` coefficient is the KV cache's bytes per token (each
  cached key and value read once per step); every coefficient is <= the
  unfused program's;
* fused C == unfused C bit for bit (prefill, cached steps, the cache), and the
  optimized graph == the original graph bit for bit in the interpreter:
  fusion moves operations between kernels, it never reorders the operations
  that produce a value.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
from _prompts import PROMPTS, prompt_ids

from nanocompile.analysis.work import WorkCount, count_work
from nanocompile.backend.runtime import CompiledBackend
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.checkpoint.synth import synthetic_config
from nanocompile.compiler import compile_program, lower_to_loop, optimize_graph
from nanocompile.inference.engine import Engine, F32Weights
from nanocompile.interpreter import run_graph
from nanocompile.ir.symbolic import parse_expr
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

CFG = Qwen2Config.from_dict(synthetic_config())


@cache
def fused_work(layers: int) -> WorkCount:
    graph = build_qwen2(CFG, Qwen2GraphOptions(n_layers=layers, last_only=True))
    return count_work(lower_to_loop(optimize_graph(graph)))


@cache
def unfused_work(layers: int) -> WorkCount:
    graph = build_qwen2(CFG, Qwen2GraphOptions(n_layers=layers, last_only=True))
    return count_work(lower_to_loop(graph))


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_kernel_calls_per_block_and_per_step() -> None:
    per_block = fused_work(2).launches - fused_work(1).launches
    assert per_block == 13
    assert fused_work(1).launches - per_block == 7
    assert fused_work(24).launches == 13 * 24 + 7 == 319


def test_distinct_kernels() -> None:
    # gather, cos, sin, rms_norm (all 49 norms), q projection, k/v projection
    # (same shapes), RoPE q, RoPE k, scores, softmax, context, o_proj +
    # residual, gate/up/SwiGLU, down + residual, LM head, keys, values
    assert fused_work(1).distinct_kernels == fused_work(24).distinct_kernels == 17


def test_fused_bytes_polynomial_is_the_reference() -> None:
    fused = fused_work(24).bytes_moved
    assert fused == parse_expr(
        "5376*past*seq + 5376*seq*seq + 24576*past + 2644488*seq + 1976742656")
    kv_bytes_per_token = CFG.num_hidden_layers * 2 * CFG.num_key_value_heads * CFG.head_dim * 4
    assert fused.coefficient("past") == kv_bytes_per_token == 24576


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_every_coefficient_at_most_unfused() -> None:
    fused, unfused = fused_work(24).bytes_moved, unfused_work(24).bytes_moved
    for mono in ("past*seq", "seq*seq", "past", "seq", ""):
        assert 0 <= fused.coefficient(mono) <= unfused.coefficient(mono), mono
    assert fused.symbols == unfused.symbols


class Pair:
    """The same snapshot compiled fused and unfused."""

    def __init__(self, directory: Path) -> None:
        snap = Snapshot.open(directory)
        self.dir = directory
        self.cfg = snap.config
        self.weights = F32Weights(snap)
        self.graph = build_qwen2(self.cfg)
        self.fused = Engine(self.cfg, CompiledBackend(
            compile_program(self.graph, self.weights, fuse=True)))
        self.unfused = Engine(self.cfg, CompiledBackend(
            compile_program(self.graph, self.weights, fuse=False)))

    def check_bitwise(self, ids: list[int], steps: list[int]) -> None:
        f_cache = self.fused.new_cache(len(ids) + len(steps))
        u_cache = self.unfused.new_cache(len(ids) + len(steps))
        for chunk in [ids, *[[s] for s in steps]]:
            f = self.fused.forward(chunk, f_cache)
            u = self.unfused.forward(chunk, u_cache)
            np.testing.assert_array_equal(f.view(np.uint32), u.view(np.uint32))
        n = f_cache.length
        np.testing.assert_array_equal(f_cache.keys[:, :, :n].view(np.uint32),
                                      u_cache.keys[:, :, :n].view(np.uint32))
        np.testing.assert_array_equal(f_cache.values[:, :, :n].view(np.uint32),
                                      u_cache.values[:, :, :n].view(np.uint32))


@pytest.fixture(scope="module")
def tiny(tiny_snapshot: Path) -> Pair:
    return Pair(tiny_snapshot)


@pytest.mark.parametrize("key", list(PROMPTS))
def test_tiny_fused_equals_unfused_bitwise(tiny: Pair, key: str) -> None:
    tiny.check_bitwise(prompt_ids(tiny.dir, key), [11, 42, 151643])


def test_tiny_optimized_graph_equals_original_in_interpreter(tiny: Pair) -> None:
    optimized = optimize_graph(tiny.graph)
    for key in PROMPTS:
        ids = np.array(prompt_ids(tiny.dir, key), np.int64)
        past = np.zeros((2, 2, 0, 16), np.float32)
        inputs = {"token_ids": ids, "past_keys": past, "past_values": past}
        a = run_graph(tiny.graph, inputs, tiny.weights)
        b = run_graph(optimized, inputs, tiny.weights)
        for name in a:
            np.testing.assert_array_equal(a[name].view(np.uint32), b[name].view(np.uint32))


@pytest.mark.slow
def test_full_size_fused_equals_unfused_bitwise(full_snapshot: Path) -> None:
    pair = Pair(full_snapshot)
    pair.check_bitwise(prompt_ids(full_snapshot, "france"), [11, 42])


@pytest.mark.slow
def test_full_size_optimized_graph_equals_original_in_interpreter(full_snapshot: Path) -> None:
    snap = Snapshot.open(full_snapshot)
    weights = F32Weights(snap)
    graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=True))
    optimized = optimize_graph(graph)
    ids = np.array(prompt_ids(full_snapshot, "fibonacci"), np.int64)
    past = np.zeros((24, 2, 0, 64), np.float32)
    inputs = {"token_ids": ids, "past_keys": past, "past_values": past}
    a, b = run_graph(graph, inputs, weights), run_graph(optimized, inputs, weights)
    for name in a:
        np.testing.assert_array_equal(a[name].view(np.uint32), b[name].view(np.uint32))

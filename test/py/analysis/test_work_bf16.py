"""The bytes polynomial of the fused decode step with bf16 weights (issue 17).

The f32 format's fused polynomial is spec §3's reference (``passes/
test_fusion.py`` checks it):

    5376*past*seq + 5376*seq*seq + 24576*past + 2644488*seq + 1976742656

With bf16 weights every weight element is read at 2 bytes instead of 4:

* the constant term holds every weight once (494,032,768 parameters: the
  LM head reads the tied embedding whole, each projection and norm its
  weight, each bias its vector): it drops by 2 x 494,032,768;
* the ``seq`` term holds the embedding rows the gather reads (896 elements
  per token): it drops by 2 x 896;
* what stays f32, unchanged: the activations each kernel writes and reads,
  the KV cache (the ``past`` term: each cached key and value, f32, read once
  per step), the attention terms (``past*seq``, ``seq*seq``: scores and
  probabilities), the logits row, and the scalar constants and RoPE
  inverse frequencies computed in the graph. The synthetic snapshot (like
  the Qwen2.5 release) stores every tensor in bf16, norms and biases
  included, so no weight stays f32 (a snapshot storing one otherwise keeps
  it an f32 weight: ``models/test_qwen2_bf16.py``).
"""

from __future__ import annotations

from functools import cache

import pytest

from nanocompile.analysis.work import WorkCount, count_work
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.synth import synthetic_config
from nanocompile.compiler import Pipeline, lower_to_loop, optimize_graph
from nanocompile.ir.symbolic import parse_expr
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

CFG = Qwen2Config.from_dict(synthetic_config())
PARAMS = 494_032_768  # analysis/test_work.py derives it from the config
F32_FUSED = "5376*past*seq + 5376*seq*seq + 24576*past + 2644488*seq + 1976742656"


@cache
def fused_work(weights: str) -> WorkCount:
    graph = build_qwen2(CFG, Qwen2GraphOptions(last_only=True, weights=weights))
    return count_work(lower_to_loop(optimize_graph(graph)))


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_bf16_decode_bytes_polynomial() -> None:
    bf16 = fused_work("bf16").bytes_moved
    assert bf16 == parse_expr(
        "5376*past*seq + 5376*seq*seq + 24576*past + 2642696*seq + 988677120")
    assert parse_expr(F32_FUSED) - bf16 == parse_expr(f"{2 * PARAMS} + {2 * 896}*seq")
    assert fused_work("f32").bytes_moved == parse_expr(F32_FUSED)


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_weight_term_halves() -> None:
    """The weights' 4 bytes per parameter in the f32 constant term become 2."""
    f32, bf16 = fused_work("f32").bytes_moved, fused_work("bf16").bytes_moved
    fixed = f32.const_value - 4 * PARAMS  # logits row, last hidden row, scalars
    assert bf16.const_value == 2 * PARAMS + fixed
    assert bf16.coefficient("past") == f32.coefficient("past") == 24576  # the f32 cache


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_bf16_step_launches_the_f32_kernels() -> None:
    """The widening is inside the kernels: 319 launches, 17 distinct kernels,
    as the f32 format (no kernel widens a copy)."""
    for weights in ("f32", "bf16"):
        work = fused_work(weights)
        assert (work.launches, work.distinct_kernels) == (319, 17), weights


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_schedules_keep_the_bytes() -> None:
    """The default schedules read the weights in place: the scheduled bf16
    program moves the bytes of the fused one (one layer: a quick schedule)."""
    graph = build_qwen2(CFG, Qwen2GraphOptions(n_layers=1, last_only=True, weights="bf16"))
    pipeline = Pipeline(graph)
    assert count_work(pipeline.kernels).bytes_moved == \
        count_work(pipeline.module("loop")).bytes_moved

"""Phase 4 (first primitive): ``parallel`` on the persistent thread pool.

Claims: each precondition of ``parallel`` is refused with its own error and
leaves the kernel exactly as it was; a scheduled program is bitwise equal to
the unscheduled one at 1, 2, 3 and 8 threads (no sum is ever split between
threads: each iteration computes what it did serially).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _arches import arch_params
from _prompts import prompt_ids
from xdsl.context import Context
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from nanocompile.backend.runtime import CompiledBackend
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program, lower_to_loop, optimize_graph, schedule_loop
from nanocompile.dialects import get_all_dialects, loop
from nanocompile.inference.engine import Engine, F32Weights
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.schedule.primitives import (
    CarriesValues,
    LoopNotFound,
    NestedParallel,
    ScheduleError,
    SharedWrite,
    parallel,
)
from nanocompile.targets.arch import AVX2, AVX512, Arch

KERNEL = """
loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms ["n"] access ["w", "r"]
    footprints [#loop.fp<[n, 4], [4, 1]>, #loop.fp<[n, 4], [4, 1]>] {
  %n = loop.sym "n"
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  loop.for "d0" %i = %c0 to %n {
    %z = arith.constant 0.0 : f32
    %s = loop.for "k" %kk = %c0 to %c4 iter(%acc = %z) -> (f32) {
      %x = loop.load %1[%i, %kk] strides [4, 1] : f32
      %t = arith.addf %acc, %x : f32
      loop.yield %t : f32
    }
    loop.for "d1" %j = %c0 to %c4 {
      %a = loop.load %1[%i, %j] strides [4, 1] : f32
      %e = arith.mulf %a, %s : f32
      loop.store %e, %0[%i, %j] strides [4, 1] : f32
      STORE
    }
  }
}
"""


def kernel(shared_store: bool = False) -> loop.KernelOp:
    """The test kernel; with ``shared_store`` every iteration also writes element 0."""
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    store = "loop.store %e, %0[%c0, %c0] strides [4, 1] : f32" if shared_store else ""
    module = Parser(ctx, KERNEL.replace("STORE", store)).parse_module()
    op = module.body.block.first_op
    assert isinstance(op, loop.KernelOp)
    return op


@pytest.mark.parametrize(
    ("name", "grain", "error", "message"),
    [
        ("nope", 1, LoopNotFound, "0 loops named 'nope'"),
        ("k", 1, CarriesValues, "carries 1 value"),
        ("d1", 1, SharedWrite, "does not depend on the loop's index"),
        ("d0", 0, ScheduleError, "grain must be >= 1"),
    ],
)
def test_each_precondition_is_refused_and_leaves_the_kernel(name: str, grain: int,
                                                            error: type, message: str) -> None:
    k = kernel(shared_store=error is SharedWrite)
    before = str(k)
    with pytest.raises(error, match=message):
        parallel(k, name, grain)
    assert str(k) == before


def test_nested_parallel_is_refused() -> None:
    k = kernel()
    parallel(k, "d0", 4)
    before = str(k)
    with pytest.raises(NestedParallel, match="enclosing loop 'd0' is already parallel"):
        parallel(k, "d1", 1)
    assert str(k) == before


def test_parallel_marks_the_loop() -> None:
    k = kernel()
    parallel(k, "d0", 8)
    assert "parallel 8" in str(k)


def _module(layers: int | None = None) -> ModuleOp:
    from nanocompile.checkpoint.config import Qwen2Config
    from nanocompile.checkpoint.synth import synthetic_config

    cfg = Qwen2Config.from_dict(synthetic_config())
    return lower_to_loop(optimize_graph(build_qwen2(cfg, Qwen2GraphOptions(n_layers=layers,
                                                                           last_only=True))))


# Why a default candidate may be refused on the model's kernels (each falls back
# to the next candidate): per-lane index compares (RoPE, the causal mask) have
# no vector form; the scores' row jam meets the causal mask's loop.if; the
# context's k runs to past + seq, no whole groups of 16 lanes; softmax has two
# loops named "k" (its max and its sum), so its sum's lanes are not vectorized.
FALLBACKS = ("arith.cmpi on lane-varying values has no exact integer form",
             "holds a loop.if", "the trip count is not a known multiple of 16 lanes",
             "2 loops named 'k'")


def _matmul_k(kernel: loop.KernelOp) -> loop.ForOp | None:
    """The kernel's matmul reduction: the loop "k" of math.fma (None if none)."""
    for op in kernel.walk():
        if isinstance(op, loop.ForOp) and op.loop_name.data == "k" and any(
                isinstance(inner, xmath.FmaOp) for inner in op.body.block.ops):
            return op
    return None


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=lambda a: a.name)
def test_default_schedules_parallelize_the_matmuls(arch: Arch) -> None:
    scheduled, fallbacks = schedule_loop(_module(1), arch)
    assert all(any(reason in f for reason in FALLBACKS) for f in fallbacks), fallbacks
    kernels = [op for op in scheduled.ops if isinstance(op, loop.KernelOp)]
    parallel_kernels = sorted(k.sym_name.data for k in kernels if any(
        isinstance(f, loop.ForOp) and f.parallel is not None for f in k.walk()))
    # q, k/v, o and down projections, gate/up, LM head, scores, context; the
    # softmax rows (per head), the RoPE tables cos, sin and the first rms_norm
    # (its own kernel: the positions in chunks, since session 23)
    assert len(parallel_kernels) == 12, parallel_kernels
    assert "fused_mul" in parallel_kernels
    # no packed copies: every weight is read where it lies
    assert not [b for p in scheduled.ops if isinstance(p, loop.ProgramOp)
                for b in p.buffers() if b.kind.data == "packed"]
    vector = f"vector<{arch.f32_lanes}xf32>"
    matmul_k = {k.sym_name.data: _matmul_k(k) for k in kernels if _matmul_k(k) is not None}
    assert len(matmul_k) == 8, sorted(matmul_k)
    # q, k/v, o, gate/up, down, LM head and the scores: k's 16 lanes as vectors
    # (k steps by 16); the context: the columns as vector lanes (d2 steps by the
    # width), k's 16 partial sums 16 explicit vectors (k steps by 16 over the
    # whole groups of the symbolic positions)
    in_columns = sorted(name for name, k in matmul_k.items()
                        if isinstance(d2 := k.parent_op(), loop.ForOp)
                        and d2.step.data == arch.f32_lanes
                        and [str(v.type) for v in k.inits] == [vector] * 16)
    by_lanes = sorted(name for name, k in matmul_k.items()
                      if k.lanes is None and k.step.data == 16 and name not in in_columns
                      and all(str(v.type) == vector for v in k.inits))
    assert len(by_lanes) == 7, by_lanes
    assert len(in_columns) == 1, in_columns


def _bitwise_at_threads(directory: Path, steps: list[int],
                        thread_counts: tuple[int, ...] = (1, 2, 3, 8)) -> str:
    """Unfused = fused = scheduled (host arch, or ``NANOCOMPILE_ARCH``) bit for bit:
    the prompt's logits, each cached step's and the cache, the scheduled program
    at each thread count; returns its C source."""
    snap = Snapshot.open(directory)
    weights = F32Weights(snap)
    graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=True))
    unfused = Engine(snap.config, CompiledBackend(compile_program(graph, weights, fuse=False)))
    fused = Engine(snap.config, CompiledBackend(compile_program(graph, weights)))
    program = compile_program(graph, weights, schedule=True)
    threaded = Engine(snap.config, CompiledBackend(program))
    ids = prompt_ids(directory, "chat")
    chunks = [ids, *[[s] for s in steps]]
    ref_cache = unfused.new_cache(len(ids) + len(steps))
    refs = [unfused.forward(chunk, ref_cache) for chunk in chunks]
    n = ref_cache.length

    def same(cache: object, outs: list[np.ndarray], what: str) -> None:
        for out, ref in zip(outs, refs, strict=True):
            np.testing.assert_array_equal(out.view(np.uint32), ref.view(np.uint32),
                                          err_msg=what)
        for got, want in ((cache.keys, ref_cache.keys),  # type: ignore[attr-defined]
                          (cache.values, ref_cache.values)):  # type: ignore[attr-defined]
            np.testing.assert_array_equal(got[:, :, :n].view(np.uint32),
                                          want[:, :, :n].view(np.uint32), err_msg=what)

    cache = fused.new_cache(len(ids) + len(steps))
    same(cache, [fused.forward(chunk, cache) for chunk in chunks], "fused")
    for threads in thread_counts:
        assert program.set_threads(threads) == threads
        cache = threaded.new_cache(len(ids) + len(steps))
        same(cache, [threaded.forward(chunk, cache) for chunk in chunks],
             f"scheduled, {threads} threads")
    return program.source


def test_tiny_model_bitwise_at_1_2_3_8_threads(tiny_snapshot: Path) -> None:
    _bitwise_at_threads(tiny_snapshot, [11, 42])


VECTOR_C_TYPE = {"scalar": None, "avx2": "__m256", "avx512": "__m512"}


@pytest.mark.parametrize("arch", arch_params())
def test_tiny_model_bitwise_on_every_arch(tiny_snapshot: Path, arch: Arch,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """unfused = fused = scheduled for scalar, AVX2 and AVX-512, bit for bit, at 1,
    2, 3 and 8 threads (each arch where the CPU runs it)."""
    monkeypatch.setenv("NANOCOMPILE_ARCH", arch.name)
    source = _bitwise_at_threads(tiny_snapshot, [11, 42])
    # The kernels, after the prelude (whose AVX-512 helpers include the AVX2 ones: the
    # 8-lane exp is in both): the arch's vectors; a narrower one only where a
    # reduction folds its lanes by halves (loop.half, loop.foldhalf: 8 and 4 lanes
    # after 16), never loaded or FMAd.
    kernels = source.split("static __attribute__((noinline))", 1)[1]
    for name, c_type in VECTOR_C_TYPE.items():
        if c_type is None:
            continue
        present = f"const {c_type} " in kernels
        if name == arch.name:
            assert present, name
        elif not (arch.name == "avx512" and name == "avx2"):  # folds may hold 8 lanes
            assert not present, name
    if arch.name == "avx512":
        assert "_mm256_loadu_ps(" not in kernels
        assert "_mm256_fmadd_ps(" not in kernels
    assert "nc_parallel_for(" in kernels


@pytest.mark.slow
@pytest.mark.parametrize("arch", arch_params())
def test_full_size_model_bitwise_on_every_arch(full_snapshot: Path, arch: Arch,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The full-size model: unfused = fused = scheduled on each arch at 1, 2, 3
    and 8 threads (prompt, a cached step, the cache)."""
    monkeypatch.setenv("NANOCOMPILE_ARCH", arch.name)
    _bitwise_at_threads(full_snapshot, [11])

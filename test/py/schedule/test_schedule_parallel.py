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


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=lambda a: a.name)
def test_default_schedules_parallelize_the_matmuls(arch: Arch) -> None:
    scheduled, fallbacks = schedule_loop(_module(1), arch)
    # refused candidates: vectorizing RoPE, the causal mask and the scores
    # (per-lane index compares), each falling back to the next candidate
    assert all("vectorize" in f for f in fallbacks), fallbacks
    parallel_kernels = sorted(op.sym_name.data for op in scheduled.ops
                              if isinstance(op, loop.KernelOp) and any(
                                  isinstance(f, loop.ForOp) and f.parallel is not None
                                  for f in op.walk()))
    # q, k/v, o and down projections, gate/up, LM head, scores, context
    assert len(parallel_kernels) == 8
    packed = {op.kernel_name for p in scheduled.ops if isinstance(p, loop.ProgramOp)
              for op in p.launches() for v in op.views
              if v.owner.source.owner.kind.data == "packed"}
    assert len(packed) == 6  # q, k/v, o, gate/up, down, LM head: packed and vectorized


def _bitwise_at_threads(directory: Path, steps: list[int],
                        thread_counts: tuple[int, ...] = (1, 2, 3, 8)) -> str:
    """The scheduled program (host arch) equals the unscheduled one bit for bit:
    prompt, cached steps and the cache, at each thread count; its C source."""
    snap = Snapshot.open(directory)
    weights = F32Weights(snap)
    graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=True))
    serial = Engine(snap.config, CompiledBackend(compile_program(graph, weights)))
    program = compile_program(graph, weights, schedule=True)
    threaded = Engine(snap.config, CompiledBackend(program))
    ids = prompt_ids(directory, "chat")
    ref_cache = serial.new_cache(len(ids) + len(steps))
    refs = [serial.forward(chunk, ref_cache) for chunk in [ids, *[[s] for s in steps]]]
    n = ref_cache.length
    for threads in thread_counts:
        assert program.set_threads(threads) == threads
        cache = threaded.new_cache(len(ids) + len(steps))
        for chunk, ref in zip([ids, *[[s] for s in steps]], refs, strict=True):
            out = threaded.forward(chunk, cache)
            np.testing.assert_array_equal(out.view(np.uint32), ref.view(np.uint32),
                                          err_msg=f"{threads} threads")
        for got, want in ((cache.keys, ref_cache.keys), (cache.values, ref_cache.values)):
            np.testing.assert_array_equal(got[:, :, :n].view(np.uint32),
                                          want[:, :, :n].view(np.uint32))
    return program.source


def test_tiny_model_bitwise_at_1_2_3_8_threads(tiny_snapshot: Path) -> None:
    _bitwise_at_threads(tiny_snapshot, [11, 42])


VECTOR_C_TYPE = {"scalar": None, "avx2": "__m256", "avx512": "__m512"}


@pytest.mark.parametrize("arch", arch_params())
def test_tiny_model_bitwise_on_every_arch(tiny_snapshot: Path, arch: Arch,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """scalar = AVX2 = AVX-512 = unscheduled, bit for bit, at 1, 2 and 3 threads
    (each arch where the CPU runs it)."""
    monkeypatch.setenv("NANOCOMPILE_ARCH", arch.name)
    source = _bitwise_at_threads(tiny_snapshot, [11, 42], (1, 2, 3))
    for name, c_type in VECTOR_C_TYPE.items():  # the arch's vectors (in kernels), only those
        if c_type is not None:
            assert (f"const {c_type} " in source) == (name == arch.name), name
    assert "nc_parallel_for(" in source.split("static __attribute__((noinline))", 1)[1]


@pytest.mark.slow
def test_full_size_model_bitwise_at_1_2_3_8_threads(full_snapshot: Path) -> None:
    _bitwise_at_threads(full_snapshot, [11])

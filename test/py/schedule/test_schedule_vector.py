"""vectorize, privatize and pack (phase 4): bitwise against the unscheduled
kernel over every tile tail, in bounds, and one refusal per precondition.

The program under test is two projections ``out = (x @ W1.T + b1) @ W2.T``:
the first one's result is a temporary, so the guarded arena (guard bytes
around it, checked after the run) sees any write outside it.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, VectorType
from xdsl.parser import Parser

from nanocompile.backend.guarded_arena import GuardedArena
from nanocompile.backend.runtime import CompiledProgram
from nanocompile.compiler import lower_to_loop, optimize_graph, schedule_loop
from nanocompile.dialects import get_all_dialects, loop, sched
from nanocompile.frontend.composites import linear
from nanocompile.frontend.tensor import GraphBuilder
from nanocompile.passes.apply_schedule import apply_schedules
from nanocompile.schedule.pack import PackLayout, PackSource, check_pack
from nanocompile.schedule.primitives import (
    CarriesValues,
    DynamicTripCount,
    NotPerfectlyNested,
    ReadsOwnWrites,
    ScheduleError,
)
from nanocompile.schedule.privatize import privatize
from nanocompile.schedule.vectorize import (
    CrossLaneReduction,
    LaneBranch,
    LaneIndexArithmetic,
    NonContiguous,
    NoVectorForm,
    UniformStore,
    vectorize,
)
from nanocompile.targets.arch import AVX2, SCALAR


def two_projections(k: int, n: int) -> ModuleOp:
    gb = GraphBuilder("mm")
    x = gb.input("x", "f32", ["seq", k])
    h = linear(x, gb.weight("w1", [n, k]), gb.weight("b1", [n]))
    gb.output("out", linear(h, gb.weight("w2", [8, n])))
    return lower_to_loop(optimize_graph(gb.finish_module()))


def _weights(k: int, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"w1": rng.standard_normal((n, k)).astype(np.float32),
            "b1": rng.standard_normal(n).astype(np.float32),
            "w2": rng.standard_normal((8, n)).astype(np.float32)}


def _first_matmul(module: ModuleOp) -> loop.KernelOp:
    """The kernel writing the temporary (the first launch)."""
    program = next(op for op in module.ops if isinstance(op, loop.ProgramOp))
    name = program.launches()[0].kernel_name
    return next(op for op in module.ops if isinstance(op, loop.KernelOp)
                and op.sym_name.data == name)


def _scheduled(module: ModuleOp, directives: list[sched.Directive]) -> ModuleOp:
    out = module.clone()
    kernel = _first_matmul(out)
    out.body.block.add_op(sched.ScheduleOp.from_directives(kernel.sym_name.data, directives))
    apply_schedules(out)
    out.verify()
    return out


GRID = [
    ("pack + vectorize 8", lambda w: [sched.Pack(1, 8), sched.Vectorize("d1", 8)]),
    ("pack + split + vectorize + privatize + parallel", lambda w: [
        sched.Pack(1, 8), sched.Split("d1", w, "d1o", "d1i"), sched.Vectorize("d1i", 8),
        sched.Privatize("k"), sched.Parallel("d1o")]),
    ("rows x columns jam with a peeled row", lambda w: [
        sched.Pack(1, 8), sched.Split("d1", w, "d1o", "d1i"), sched.Reorder(("d1o", "d0")),
        sched.Split("d0", 2, "d0o", "d0i", peel=True), sched.Vectorize("d1i", 8),
        sched.Privatize("k"), sched.Privatize("k"), sched.Vectorize("d1i_tail", 8),
        sched.Privatize("k_tail"), sched.Parallel("d1o")]),
    ("pack 4 + split + reorder + vectorize 4 + privatize", lambda w: [
        sched.Pack(1, 4), sched.Split("d1", w, "d1o", "d1i"),
        sched.Reorder(("d1o", "d0")), sched.Vectorize("d1i", 4), sched.Privatize("k")]),
]


@pytest.mark.parametrize(("k", "n", "tile"), [(5, 16, 16), (16, 24, 8), (9, 48, 16), (16, 64, 32)])
def test_vector_schedules_are_bitwise_and_in_bounds(k: int, n: int, tile: int) -> None:
    rng = np.random.default_rng(k * 100 + n)
    module = two_projections(k, n)
    weights = _weights(k, n, rng)
    reference = CompiledProgram(module, weights)
    for label, directives in GRID:
        program = CompiledProgram(_scheduled(module, directives(tile)), weights)
        guarded = GuardedArena(program)
        for seq in (1, 2, 3, 7):
            x = rng.standard_normal((seq, k)).astype(np.float32)
            x[0, 0] = np.float32(np.nan) if seq == 7 else x[0, 0]
            want = reference.run({"x": x})["out"]
            got = guarded.run({"x": x})["out"]
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (label, seq)


def test_pack_relays_the_weight_and_keeps_the_bytes() -> None:
    module = _scheduled(two_projections(16, 24), [sched.Pack(1, 8)])
    program = next(op for op in module.ops if isinstance(op, loop.ProgramOp))
    packed = [b for b in program.buffers() if b.kind.data == "packed"]
    assert len(packed) == 1
    assert packed[0].buffer_name.data == "w1"
    assert [str(d) for d in packed[0].result.type.dims] == ["3", "16", "8"]
    rng = np.random.default_rng(1)
    weights = _weights(16, 24, rng)
    compiled = CompiledProgram(module, weights)
    relaid = compiled._packed[("w1", 8)]
    assert np.array_equal(relaid[2, 5], weights["w1"][16:24, 5])  # P[n/8, k, n%8] = W[n, k]


def _unchanged(action, kernel: loop.KernelOp, error: type[ScheduleError]) -> None:
    before = str(kernel)
    with pytest.raises(error):
        action(kernel)
    assert str(kernel) == before


def test_vectorize_refusals_leave_the_kernel() -> None:
    module = two_projections(16, 24)
    kernel = _first_matmul(module)
    _unchanged(lambda k: vectorize(k, "k", 8), kernel, CrossLaneReduction)
    _unchanged(lambda k: vectorize(k, "d0", 8), kernel, NonContiguous)
    # unpacked, d1 reads W.T with stride K per lane: only the loads through
    # the packed layout are contiguous
    _unchanged(lambda k: vectorize(k, "d1", 8), kernel, NonContiguous)


LANE_KERNELS = {
    "index": (LaneIndexArithmetic, """
    %c2 = arith.constant 2 : index
    loop.for "d0" %i = %c0 to %c16 {
      %j = arith.muli %i, %c2 : index
      %x = loop.load %1[%j] strides [1] : f32
      loop.store %x, %0[%i] strides [1] : f32
    }"""),
    "store": (UniformStore, """
    loop.for "d0" %i = %c0 to %c16 {
      %x = loop.load %1[%i] strides [1] : f32
      loop.store %x, %0[%c0] strides [1] : f32
    }"""),
    "branch": (LaneBranch, """
    loop.for "d0" %i = %c0 to %c16 {
      %v = loop.load %2[%i] strides [1] : f32
      %zero = arith.constant 0.0 : f32
      %lt = arith.cmpf olt, %v, %zero : f32
      %x = loop.if %lt -> (f32) {
        %a = loop.load %1[%i] strides [1] : f32
        loop.yield %a : f32
      } else {
        %b = loop.load %2[%i] strides [1] : f32
        loop.yield %b : f32
      }
      loop.store %x, %0[%i] strides [1] : f32
    }"""),
    "type": (NoVectorForm, """
    loop.for "d0" %i = %c0 to %c16 {
      %x = loop.load %1[%i] strides [1] : f32
      %y = arith.fptosi %x : f32 to i32
      %z = arith.sitofp %y : i32 to f32
      loop.store %z, %0[%i] strides [1] : f32
    }"""),
}


def _kernel(body: str) -> loop.KernelOp:
    text = f"""builtin.module {{
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms []
      access ["w", "r", "r"]
      footprints [#loop.fp<[16], [1]>, #loop.fp<[32], [1]>, #loop.fp<[16], [1]>] {{
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index{body}
  }}
}}"""
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    module = Parser(ctx, text).parse_module()
    return next(op for op in module.ops if isinstance(op, loop.KernelOp))


@pytest.mark.parametrize("case", sorted(LANE_KERNELS))
def test_each_vectorize_precondition_is_refused(case: str) -> None:
    error, body = LANE_KERNELS[case]
    _unchanged(lambda k: vectorize(k, "d0", 8), _kernel(body), error)


def test_privatize_refusals_leave_the_kernel() -> None:
    module = two_projections(16, 24)
    kernel = _first_matmul(module)
    _unchanged(lambda k: privatize(k, "d0"), kernel, NotPerfectlyNested)  # not in a loop
    _unchanged(lambda k: privatize(k, "d1"), kernel, DynamicTripCount)  # d0 runs to seq
    carried = _kernel("""
    %z = arith.constant 0.0 : f32
    %s = loop.for "d0" %i = %c0 to %c16 iter(%a = %z) -> (f32) {
      %t = loop.for "k" %j = %c0 to %c16 iter(%b = %a) -> (f32) {
        %x = loop.load %1[%j] strides [1] : f32
        %y = arith.addf %b, %x : f32
        loop.yield %y : f32
      }
      loop.yield %t : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32""")
    _unchanged(lambda k: privatize(k, "k"), carried, CarriesValues)
    own = _kernel("""
    loop.for "d0" %i = %c0 to %c16 {
      %z = arith.constant 0.0 : f32
      %t = loop.for "k" %j = %c0 to %c16 iter(%b = %z) -> (f32) {
        %x = loop.load %0[%j] strides [1] : f32
        %y = arith.addf %b, %x : f32
        loop.yield %y : f32
      }
      loop.store %t, %0[%i] strides [1] : f32
    }""")
    _unchanged(lambda k: privatize(k, "k"), own, ReadsOwnWrites)


def test_pack_refusals() -> None:
    module = two_projections(16, 24)
    kernel = _first_matmul(module)
    with pytest.raises(PackLayout):
        check_pack(module, kernel, 2, 8)  # x: [seq, K] rows, not a transposed weight
    with pytest.raises(PackLayout):
        check_pack(module, kernel, 1, 16)  # 24 columns are not tiles of 16
    gb = GraphBuilder("mm")
    x = gb.input("x", "f32", ["seq", 16])
    gb.output("out", linear(x, gb.input("w", "f32", [24, 16])))
    from_input = lower_to_loop(optimize_graph(gb.finish_module()))
    with pytest.raises(PackSource):  # an input changes every call: only weights are packed
        check_pack(from_input, _first_matmul(from_input), 1, 8)


@pytest.mark.parametrize("arch", [SCALAR, AVX2], ids=lambda a: a.name)
def test_default_schedules_fall_back_and_stay_bitwise(arch) -> None:
    rng = np.random.default_rng(7)
    module = two_projections(16, 64)
    weights = _weights(16, 64, rng)
    scheduled, _ = schedule_loop(module, arch)
    text = str(scheduled)
    assert ("vector<8xf32>" in text) == arch.vector
    reference, program = CompiledProgram(module, weights), CompiledProgram(scheduled, weights)
    x = rng.standard_normal((3, 16)).astype(np.float32)
    want, got = reference.run({"x": x})["out"], program.run({"x": x})["out"]
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_uniform_branch_without_results_vectorizes_every_lane() -> None:
    """Regression: a loop.if on a uniform condition that loads and stores per
    lane but yields nothing was cloned as scalar code (lane 0 only)."""
    kernel = _kernel("""
    %g = loop.load %2[%c0] strides [1] : f32
    %zero = arith.constant 0.0 : f32
    %pos = arith.cmpf ogt, %g, %zero : f32
    loop.for "d0" %i = %c0 to %c16 {
      loop.if %pos -> () {
        %x = loop.load %1[%i] strides [1] : f32
        %y = arith.mulf %x, %x : f32
        loop.store %y, %0[%i] strides [1] : f32
        loop.yield
      } else {
        loop.yield
      }
    }""")
    vectorize(kernel, "d0", 8)
    stores = [op for op in kernel.walk() if isinstance(op, loop.StoreOp)]
    loads = [op for op in kernel.walk() if isinstance(op, loop.LoadOp) and op.ptr is kernel.args[1]]
    assert len(stores) == 1
    assert isinstance(stores[0].value.type, VectorType)
    assert [op.lanes for op in loads] == [8]


def test_vectorize_refuses_a_recurrence_through_memory() -> None:
    kernel = _kernel("""
    %c1 = arith.constant 1 : index
    loop.for "d0" %i = %c0 to %c16 {
      %a = loop.load %0[%i] strides [1] : f32
      %x = loop.load %1[%i] strides [1] : f32
      %s = arith.addf %a, %x : f32
      %j = arith.addi %i, %c1 : index
      loop.store %s, %0[%j] strides [1] : f32
    }""")
    _unchanged(lambda k: vectorize(k, "d0", 8), kernel, ReadsOwnWrites)


def test_privatize_refuses_stores_inside_the_reduction_loop() -> None:
    kernel = _kernel("""
    %c3 = arith.constant 3 : index
    loop.for "d1" %i = %c0 to %c3 {
      loop.for "k" %j = %c0 to %c3 {
        %x = loop.load %1[%i] strides [1] : f32
        %a = arith.addi %i, %j : index
        loop.store %x, %0[%a] strides [1] : f32
      }
    }""")
    _unchanged(lambda k: privatize(k, "k"), kernel, NotPerfectlyNested)


def test_arch_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from nanocompile.targets.arch import ArchError, arch_named, host_arch

    monkeypatch.setenv("NANOCOMPILE_ARCH", "scalar")
    assert host_arch() == SCALAR
    monkeypatch.setenv("NANOCOMPILE_ARCH", "foo")
    with pytest.raises(ArchError, match="NANOCOMPILE_ARCH: unknown arch 'foo'"):
        host_arch()
    with pytest.raises(ArchError, match="needs CPU flags avx2"):
        arch_named("avx2", frozenset({"sse2"}))


def test_apply_schedule_refusals_are_located(tmp_path) -> None:
    """nc-opt names the file:line:col of the directive (or schedule) that failed."""
    import subprocess
    import sys

    text = """builtin.module {
  sched.schedule @nope {
    sched.parallel "d0"
  }
}
"""
    path = tmp_path / "nope.mlir"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "nanocompile.tools.nc_opt", str(path), "-p",
                           "apply-schedule"], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert f"{path}:2:3: apply-schedule: sched.schedule @nope: no loop.kernel" in proc.stderr

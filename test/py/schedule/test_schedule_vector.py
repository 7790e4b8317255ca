"""vectorize, privatize and pack (phase 4): bitwise against the unscheduled
kernel over every tile tail, in bounds, and one refusal per precondition.

The program under test is two projections ``out = (x @ W1.T + b1) @ W2.T``:
the first one's result is a temporary, so the guarded arena (guard bytes
around it, checked after the run) sees any write outside it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from _arches import arch_params, missing_reason, slow_off_host
from _schedule_helpers import unchanged as _unchanged
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp, VectorType
from xdsl.parser import Parser

from nanocompile.backend.guarded_arena import GuardedArena
from nanocompile.compiler import compile_loop, lower_to_loop, optimize_graph, schedule_loop
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
)
from nanocompile.schedule.privatize import privatize
from nanocompile.schedule.vectorize import (
    CrossLaneReduction,
    LaneBranch,
    LaneIndexArithmetic,
    NonContiguous,
    NoVectorForm,
    RaggedLanes,
    UniformStore,
    vectorize,
)
from nanocompile.targets.arch import AVX2, AVX512, SCALAR, Arch


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


def _grid(lanes: int) -> list[tuple[str, object]]:
    """Vector schedules of the first projection with ``lanes``-lane vectors."""
    return [
        (f"pack + vectorize {lanes}", lambda w: [sched.Pack(1, lanes),
                                                 sched.Vectorize("d1", lanes)]),
        ("pack + split + vectorize + privatize + parallel", lambda w: [
            sched.Pack(1, lanes), sched.Split("d1", w, "d1o", "d1i"),
            sched.Vectorize("d1i", lanes), sched.Privatize("k"), sched.Parallel("d1o")]),
        ("rows x columns jam with a peeled row", lambda w: [
            sched.Pack(1, lanes), sched.Split("d1", w, "d1o", "d1i"),
            sched.Reorder(("d1o", "d0")), sched.Split("d0", 2, "d0o", "d0i", peel=True),
            sched.Vectorize("d1i", lanes), sched.Privatize("k"), sched.Privatize("k"),
            sched.Vectorize("d1i_tail", lanes), sched.Privatize("k_tail"),
            sched.Parallel("d1o")]),
    ]


GRID = [
    *_grid(8),
    ("pack 4 + split + reorder + vectorize 4 + privatize", lambda w: [
        sched.Pack(1, 4), sched.Split("d1", w, "d1o", "d1i"),
        sched.Reorder(("d1o", "d0")), sched.Vectorize("d1i", 4), sched.Privatize("k")]),
]
# per arch: (k, n, tile) with whole vectors of its lanes in every tile
SHAPES = {AVX2: [(5, 16, 16), (16, 24, 8), (9, 48, 16), (16, 64, 32)],
          AVX512: [(5, 16, 16), (9, 48, 16), (16, 64, 32), (7, 128, 64)]}
GRIDS = {AVX2: GRID, AVX512: _grid(16)}
# the shape an arch other than the host's keeps in the quick suite (its grid on
# an odd K and three tiles of two vectors of 8); its other shapes: the full suite's
OFF_HOST_QUICK = (9, 48, 16)


def _arch_cases() -> list[object]:
    cases = []
    for param in arch_params((AVX2, AVX512)):
        arch = param.values[0]
        cases += [pytest.param(arch, *shape, id=f"{arch.name}-{'-'.join(map(str, shape))}",
                               marks=[*param.marks, *(slow_off_host(arch)
                                                      if shape != OFF_HOST_QUICK else [])])
                  for shape in SHAPES[arch]]
    return cases


@pytest.mark.parametrize(("arch", "k", "n", "tile"), _arch_cases())
def test_vector_schedules_are_bitwise_and_in_bounds(arch: Arch, k: int, n: int,
                                                    tile: int) -> None:
    grid = GRIDS[arch]
    rng = np.random.default_rng(k * 100 + n)
    module = two_projections(k, n)
    weights = _weights(k, n, rng)
    reference = compile_loop(module, weights)
    for label, directives in grid:
        program = compile_loop(_scheduled(module, directives(tile)), weights)
        guarded = GuardedArena(program)
        for seq in (1, 2, 3, 7):
            x = rng.standard_normal((seq, k)).astype(np.float32)
            x[0, 0] = np.float32(np.nan) if seq == 7 else x[0, 0]
            want = reference.run({"x": x})["out"]
            got = guarded.run({"x": x})["out"]
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (label, seq)


# One kernel with every vector op the C target prints, one output row per op:
# (row name, the scalar ops computing %r from a = x[i], b = y[i], the uniform
# g = y[0] and its condition g > 0).
LANE_OPS = [
    ("add", "%r = arith.addf %a, %b : f32"),
    ("sub", "%r = arith.subf %a, %b : f32"),
    ("mul", "%r = arith.mulf %a, %b : f32"),
    ("div", "%r = arith.divf %a, %b : f32"),
    ("neg", "%r = arith.negf %a : f32"),
    ("sqrt", "%r = math.sqrt %a : f32"),
    ("max", "%r = arith.maximumf %a, %b : f32"),
    ("exp", "%r = math.exp %a : f32"),
    ("sin", "%r = math.sin %a : f32"),
    ("cos", "%r = math.cos %a : f32"),
    *[(f"select {p}", f"%m = arith.cmpf {p}, %a, %b : f32\n%r = arith.select %m, %a, %b : f32")
      for p in ("ole", "une", "olt", "oge", "ogt", "oeq")],
    ("splat", "%k = arith.constant -0.0 : f32\n%s = arith.subf %k, %a : f32\n"
              "%r = arith.mulf %s, %g : f32"),
    ("uniform select", "%r = arith.select %up, %a, %b : f32"),
    # a block index (i div 4: by 4 lanes a uniform load, by 8 or 16 the 2 or 4
    # values each in 4 lanes, loop.vpack; kernel B's scales in vectors of 16)
    ("block load", "%four = arith.constant 4 : index\n%q = arith.divsi %i, %four : index\n"
                   "%s = loop.load %2[%q] strides [1] : f32\n%r = arith.mulf %a, %s : f32"),
]
LANE_N = 53  # 3 vectors of 16 (6 of 8, 13 of 4) and a scalar tail


def _lane_ops_module() -> ModuleOp:
    n, rows = LANE_N, len(LANE_OPS)
    body = []
    for row, (_, ops) in enumerate(LANE_OPS):  # each row's own values get a suffix
        body += re.sub(r"%(?!(?:a|b|g|up|i|2)\b)(\w+)", rf"%\1_{row}", ops).split("\n")
        body += [f"%c_{row} = arith.constant {row} : index",
                 f"loop.store %r_{row}, %0[%c_{row}, %i] strides [{n}, 1] : f32"]
    loop_body = "\n      ".join(body)
    vec = f"!loop.buf<[{n}], f32>"
    view = f"!loop.view<[{n}], f32>"
    out = f"[{rows}, {n}]"
    text = f"""builtin.module {{
  loop.kernel @ops(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms []
      access ["w", "r", "r"]
      footprints [#loop.fp<{out}, [{n}, 1]>, #loop.fp<[{n}], [1]>, #loop.fp<[{n}], [1]>] {{
    %c0 = arith.constant 0 : index
    %cn = arith.constant {n} : index
    %g = loop.load %2[%c0] strides [1] : f32
    %zero = arith.constant 0.0 : f32
    %up = arith.cmpf ogt, %g, %zero : f32
    loop.for "d0" %i = %c0 to %cn {{
      %a = loop.load %1[%i] strides [1] : f32
      %b = loop.load %2[%i] strides [1] : f32
      {loop_body}
    }}
  }}
  loop.program @p syms [] {{
    %x = loop.buffer input "x" : {vec}
    %vx = loop.view %x layout <0, [1]> : {vec} -> {view}
    %y = loop.buffer input "y" : {vec}
    %vy = loop.view %y layout <0, [1]> : {vec} -> {view}
    %o = loop.buffer output "out" : !loop.buf<{out}, f32>
    %vo = loop.view %o layout <0, [{n}, 1]> : !loop.buf<{out}, f32> -> !loop.view<{out}, f32>
    loop.launch @ops(%vo, %vx, %vy) : !loop.view<{out}, f32>, {view}, {view}
    loop.output "out" = %o : !loop.buf<{out}, f32>
  }}
}}"""
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return Parser(ctx, text).parse_module()


def _special_values(rng: np.random.Generator) -> np.ndarray:
    """NaNs (quiet and signalling, payloads, both signs), infinities, signed
    zeros, subnormals, the extremes, then ordinary values."""
    bits = np.array([0x7FC00000, 0xFFC00001, 0x7FA00005, 0xFF800123, 0x7F800000, 0xFF800000,
                     0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF,
                     0x3F800000, 0xBF800000], np.uint32).view(np.float32)
    rest = (rng.standard_normal(LANE_N - len(bits)) * 4).astype(np.float32)
    return np.concatenate([bits, rest])


@pytest.mark.parametrize(("lanes", "arch"), [
    pytest.param(w, a, id=str(w), marks=[pytest.mark.skip(reason=r)] if (r := missing_reason(a))
                 else []) for w, a in ((4, AVX2), (8, AVX2), (16, AVX512))])
def test_every_vector_op_gives_the_scalar_bits(lanes: int, arch: Arch) -> None:
    """Each vector op of the C target, lane by lane, against the scalar C of the
    same op on special values (NaN payloads, signed zeros, infinities,
    subnormals) paired with each other: bitwise, except where IEEE leaves the
    payload open (two NaNs meeting in a commutative add or mul: a NaN either way)."""
    module = _lane_ops_module()
    vectorized = module.clone()
    vectorize(next(op for op in vectorized.ops if isinstance(op, loop.KernelOp)), "d0", lanes)
    assert f"vector<{lanes}xf32>" in str(vectorized)
    reference, program = compile_loop(module, {}), compile_loop(vectorized, {})
    rng = np.random.default_rng(lanes)
    x = _special_values(rng)
    for shift in range(0, LANE_N, 3):  # pair every value with many others
        for g in (np.float32(1.5), np.float32(-2.0)):  # the uniform condition both ways
            y = np.roll(x, shift)
            y[0] = g
            want = reference.run({"x": x, "y": y})["out"]
            got = program.run({"x": x, "y": y})["out"]
            for row, (name, _) in enumerate(LANE_OPS):
                w, v = want[row], got[row]
                same = w.view(np.uint32) == v.view(np.uint32)
                if name in ("add", "mul"):
                    same |= np.isnan(x) & np.isnan(y) & np.isnan(v)
                assert same.all(), (name, shift, np.flatnonzero(~same))


def test_pack_relays_the_weight_and_keeps_the_bytes() -> None:
    module = _scheduled(two_projections(16, 24), [sched.Pack(1, 8)])
    program = next(op for op in module.ops if isinstance(op, loop.ProgramOp))
    packed = [b for b in program.buffers() if b.kind.data == "packed"]
    assert len(packed) == 1
    assert packed[0].buffer_name.data == "w1"
    assert [str(d) for d in packed[0].result.type.dims] == ["3", "16", "8"]
    rng = np.random.default_rng(1)
    weights = _weights(16, 24, rng)
    compiled = compile_loop(module, weights)
    relaid = compiled._packed[("w1", 8)]
    assert np.array_equal(relaid[2, 5], weights["w1"][16:24, 5])  # P[n/8, k, n%8] = W[n, k]


def test_vectorize_refusals_leave_the_kernel() -> None:
    module = two_projections(16, 24)
    kernel = _first_matmul(module)
    _unchanged(lambda k: vectorize(k, "d0", 8), kernel, NonContiguous)
    # unpacked, d1 reads W.T with stride K per lane: only the loads through
    # the packed layout are contiguous
    _unchanged(lambda k: vectorize(k, "d1", 8), kernel, NonContiguous)
    # k is a lanes loop: vectorizing it keeps its order, in whole groups of
    # 16 lanes only (K = 20: the last group is short; K symbolic: the leftover
    # iterations as scalars on their lanes, test_schedule_lanes.py)
    _unchanged(lambda k: vectorize(k, "k", 8), _first_matmul(two_projections(20, 24)),
               RaggedLanes)
    # a sum in sequential order is no lanes loop: across lanes it is refused; so
    # is a max whose running value is read by anything but the next max (a
    # row's max alone has an exact vector form: test_schedule_row_max.py)
    _unchanged(lambda k: vectorize(k, "k", 8), _sequential_sum(), CrossLaneReduction)
    _unchanged(lambda k: vectorize(k, "m", 8), _row_max(twice=True), CrossLaneReduction)
    vectorize(kernel, "k", 8)  # K = 16: one group of 16 lanes, two vectors of 8
    assert "vector<8xf32>" in str(kernel)


def _row_max(twice: bool = False) -> loop.KernelOp:
    """The kernel of ``max(x, -1)`` (its loop "m" carrying the running max); with
    ``twice`` the running max also feeds a second max of itself."""
    gb = GraphBuilder("max")
    gb.output("out", gb.input("x", "f32", ["seq", 16]).max(-1))
    module = lower_to_loop(optimize_graph(gb.finish_module()))
    kernel = _first_matmul(module)
    m = next(op for op in kernel.walk() if isinstance(op, loop.ForOp)
             and op.loop_name.data == "m")
    assert m.inits
    assert m.lanes is None
    if twice:
        (acc,) = m.iter_args
        last = m.body.block.last_op
        assert isinstance(last, loop.YieldOp)
        again = arith.MaximumfOp(last.values[0], acc)
        m.body.block.insert_op_before(again, last)
        last.operands = [again.result]
    return kernel


def _sequential_sum() -> loop.KernelOp:
    """A loop "k" carrying a sum in index order (not a lanes loop)."""
    return _kernel("""
    %z = arith.constant 0.0 : f32
    %s = loop.for "k" %j = %c0 to %c16 iter(%a = %z) -> (f32) {
      %x = loop.load %1[%j] strides [1] : f32
      %y = arith.addf %a, %x : f32
      loop.yield %y : f32
    }
    loop.store %s, %0[%c0] strides [1] : f32""")


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
    "block store": (NonContiguous, """
    %c4 = arith.constant 4 : index
    loop.for "d0" %i = %c0 to %c16 {
      %x = loop.load %1[%i] strides [1] : f32
      %q = arith.divsi %i, %c4 : index
      loop.store %x, %0[%q] strides [1] : f32
    }"""),
    "block compare": (LaneIndexArithmetic, """
    %c4 = arith.constant 4 : index
    loop.for "d0" %i = %c0 to %c16 {
      %q = arith.divsi %i, %c4 : index
      %lt = arith.cmpi slt, %q, %c4 : index
      %x = loop.load %1[%i] strides [1] : f32
      %z = arith.constant 0.0 : f32
      %y = arith.select %lt, %x, %z : f32
      loop.store %y, %0[%i] strides [1] : f32
    }"""),
    "block arithmetic": (LaneIndexArithmetic, """
    %c4 = arith.constant 4 : index
    loop.for "d0" %i = %c0 to %c16 {
      %q = arith.divsi %i, %c4 : index
      %j = arith.muli %q, %c4 : index
      %x = loop.load %1[%j] strides [1] : f32
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


@pytest.mark.parametrize("arch", arch_params())
def test_default_schedules_fall_back_and_stay_bitwise(arch: Arch) -> None:
    rng = np.random.default_rng(7)
    module = two_projections(16, 64)
    weights = _weights(16, 64, rng)
    scheduled, _ = schedule_loop(module, arch)
    text = str(scheduled)
    for lanes in (8, 16):  # the arch's vectors, only those
        assert (f"vector<{lanes}xf32>" in text) == (arch.f32_lanes == lanes), lanes
    reference, program = compile_loop(module, weights), compile_loop(scheduled, weights)
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


def test_arch_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from nanocompile.targets.arch import ArchError, arch_named, cpu_flags, host_arch, widest_arch

    monkeypatch.setenv("NANOCOMPILE_ARCH", "scalar")
    assert host_arch() == SCALAR
    monkeypatch.setenv("NANOCOMPILE_ARCH", "foo")
    with pytest.raises(ArchError, match="NANOCOMPILE_ARCH: unknown arch 'foo'"):
        host_arch()
    with pytest.raises(ArchError, match="needs CPU flags avx2"):
        arch_named("avx2", frozenset({"sse2"}))
    with pytest.raises(ArchError, match="arch 'avx512' needs CPU flags avx512f, which this CPU"):
        arch_named("avx512", frozenset({"avx2", "fma"}))
    assert arch_named("avx512", frozenset({"avx2", "avx512f"})) == AVX512
    # without the variable: the widest arch the flags allow
    assert widest_arch(frozenset({"sse2", "avx2", "avx512f", "avx512bw"})) == AVX512
    assert widest_arch(frozenset({"sse2", "avx2", "fma"})) == AVX2
    assert widest_arch(frozenset({"sse2"})) == SCALAR
    monkeypatch.delenv("NANOCOMPILE_ARCH")
    assert host_arch() == widest_arch(cpu_flags())
    flags = "flags\t\t: fpu sse2 avx2 avx512f\n"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\n" + flags)
    assert cpu_flags(cpuinfo) == {"fpu", "sse2", "avx2", "avx512f"}


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

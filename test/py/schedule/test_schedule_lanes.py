"""Lanes loops under the schedules (issue 16): a matmul's ``k`` is a lanes loop
(``loop.for "k" ... lanes 16``: 16 partial sums, iteration ``k`` updating
partial ``k mod 16`` by one ``math.fma``, then the halving tree), and every
schedule keeps that order.

Claims, each on a small projection ``out = x @ W.T`` run through the C backend:

* the unscheduled kernel (the scalar lanes loop) computes exactly that order:
  bitwise equal to ``_fma_reference.lanes_matmul``, a NumPy model written
  independently of nanocompile (and, for lanes 2, 4, 8 and 16 from a non-zero
  lower bound, to the order written out here);
* vectorized by 4, 8 and 16 (each where this CPU runs it), privatized (rows,
  columns, both; before or after vectorizing), and the default projection
  candidates of each arch at 1, 2, 3 and 8 threads: the same bits;
* ``K`` a constant no multiple of 16 (1, 7, 20, 33): ``vectorize`` refuses
  (``RaggedLanes``) and leaves the kernel unchanged; the scalar lanes loop runs
  (its last group of lanes short) and gives the reference's bits, scheduled
  or not; ``K`` symbolic: the whole groups run as vectors, the leftover
  iterations as scalars on their lanes, the reference's bits;
* the default projection schedule does what it says: per 16 values of ``k``,
  ``rows * columns`` FMAs on vectors and ``rows + columns`` distinct vector
  loads per vector of lanes, no packed weight;
* ``split`` and ``unroll`` of a lanes loop and ``parallel`` inside one are
  refused (``LanesLoop``), as is ``vectorize`` by a width that does not
  divide the lanes, each leaving the kernel as it was.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from _arches import TITLES, missing_reason, slow_off_host
from _fma_reference import MATMUL_LANES, fma_f32, lanes_matmul
from _numerics import assert_bitwise, random_f32, rng_for
from _schedule_helpers import loop_named as _loop
from _schedule_helpers import only_kernel as _kernel
from _schedule_helpers import scheduled_copy as _scheduled
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, VectorType, f32
from xdsl.ir import SSAValue
from xdsl.parser import Parser

from nanocompile.backend.guarded_arena import GuardedArena
from nanocompile.backend.runtime import CompiledProgram
from nanocompile.compiler import compile_loop, lower_to_loop, optimize_graph, schedule_loop
from nanocompile.dialects import get_all_dialects, loop, sched
from nanocompile.frontend.composites import linear
from nanocompile.frontend.tensor import GraphBuilder
from nanocompile.schedule.defaults import (
    MATMUL_TILES,
    MatmulTile,
    default_schedules,
    hand_knobs,
)
from nanocompile.schedule.primitives import (
    CarriesValues,
    LanesLoop,
    ScheduleError,
    parallel,
    split,
    unroll,
)
from nanocompile.schedule.vectorize import RaggedLanes, vectorize
from nanocompile.targets.arch import AVX2, AVX512, SCALAR, Arch, cpu_flags, host_arch

N = 24  # output columns: whole tiles of 2, 3, 4 and 6 columns
SEQS = (1, 2, 3, 7)  # rows: decode, a tail of every row tile, several tiles
THREADS = (1, 2, 3, 8)

# The CPU flags the C of each vector width needs: a 4- or 8-lane FMA is
# _mm_fmadd_ps / _mm256_fmadd_ps (AVX2 and FMA3), a 16-lane one _mm512_fmadd_ps.
WIDTH_FLAGS = {4: ("avx2", "fma"), 8: ("avx2", "fma"), 16: ("avx512f",)}
WIDTH_TITLE = {4: "SSE FMA", 8: TITLES["avx2"], 16: TITLES["avx512"]}


def _missing(width: int) -> str | None:
    """Why vectors of ``width`` lanes cannot run here, None when they can."""
    missing = [f for f in WIDTH_FLAGS[width] if f not in cpu_flags()]
    if not missing:
        return None
    return (f"the CPU has no {', '.join(missing)} ({WIDTH_TITLE[width]} lanes path "
            "untested here)")


def _width_params(widths: tuple[int, ...] = (4, 8, 16)) -> list[object]:
    return [pytest.param(w, id=f"w{w}", marks=[pytest.mark.skip(reason=r)]
                         if (r := _missing(w)) else []) for w in widths]


def _arch_width(arch: Arch) -> list[object]:
    """``arch`` skipped without its vectors' flags, in the full suite only when it
    is not the host's (``slow_off_host``)."""
    reason = _missing(arch.f32_lanes) if arch.vector else None
    return [pytest.param(arch, id=arch.name,
                         marks=[pytest.mark.skip(reason=reason)] if reason else
                         slow_off_host(arch))]


def projection(k: int | str, n: int = N) -> ModuleOp:
    """``out = x @ W.T``, ``x: [seq, k]``; ``W: [n, k]`` a weight, or an input when
    ``k`` is a symbol (a weight's shape is constant)."""
    gb = GraphBuilder("mm")
    x = gb.input("x", "f32", ["seq", k])
    w = gb.weight("w", [n, k]) if isinstance(k, int) else gb.input("w", "f32", [n, k])
    gb.output("out", linear(x, w))
    return lower_to_loop(optimize_graph(gb.finish_module()))


def _inputs(k: int, seq: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``x [seq, k]`` and ``W [N, k]``: normal values of magnitudes 1e-3 .. 1e3 (no
    NaN: which NaN payload an FMA keeps is the instruction's choice)."""
    return (random_f32(rng, (seq, k), specials=False),
            random_f32(rng, (N, k), specials=False))


def _run(program: CompiledProgram, x: np.ndarray, w: np.ndarray, symbolic: bool) -> np.ndarray:
    inputs = {"x": x, "w": w} if symbolic else {"x": x}
    return GuardedArena(program).run(inputs)["out"]


def _check(module: ModuleOp, k: int, label: str, threads: tuple[int, ...] = (1,)) -> None:
    """``module``'s program gives ``lanes_matmul``'s bits on every row count and
    thread count (outputs and temporaries guarded)."""
    rng = rng_for(f"lanes {label} {k}", 0)
    w = random_f32(rng, (N, k), specials=False)
    program = compile_loop(module, {"w": w})
    for n in threads:
        assert program.set_threads(n) == n, (label, n)
        for seq in SEQS:
            x = random_f32(rng, (seq, k), specials=False)
            assert_bitwise(_run(program, x, w, False), lanes_matmul(x, w.T),
                           f"{label}, K={k}, seq={seq}, {n} threads")


# --------------------------------------------------------------------------
# the unscheduled kernel: the documented order, for any K


def test_lanes_order_is_the_reference_constant() -> None:
    """The reference's lane count is the IR's: every matmul ``k`` is a lanes 16
    loop of ``math.fma`` (the reference hard-codes 16, independently)."""
    kernel = _kernel(projection(48))
    k = _loop(kernel, "k")
    assert k.lanes is not None
    assert k.lanes.data == MATMUL_LANES
    assert [type(op) for op in k.body.block.ops if not isinstance(op, loop.LoadOp)] \
        == [xmath.FmaOp, loop.YieldOp]


@pytest.mark.parametrize("k", [1, 7, 16, 20, 33, 48])
def test_unscheduled_lanes_loop_is_the_reference(k: int) -> None:
    """K < 16 (lanes left at +0.0), K = 1, whole groups and a short last group."""
    _check(projection(k), k, "unscheduled")


def test_symbolic_k_is_the_reference_at_every_k() -> None:
    module = projection("kk")
    program = compile_loop(module, {})
    rng = rng_for("lanes symbolic", 0)
    for k in (1, 5, 16, 33):
        for seq in (1, 3):
            x, w = _inputs(k, seq, rng)
            assert_bitwise(_run(program, x, w, True), lanes_matmul(x, w.T),
                           f"symbolic K={k}, seq={seq}")


def _dot_module(lb: int, ub: int, lanes: int) -> ModuleOp:
    """``o = 0.5 + sum_{lb <= i < ub} a[i] * b[i]`` as a lanes loop of ``lanes``."""
    text = f"""builtin.module {{
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms []
      access ["w", "r", "r"]
      footprints [#loop.fp<[1], [1]>, #loop.fp<[64], [1]>, #loop.fp<[64], [1]>] {{
    %c0 = arith.constant 0 : index
    %lb = arith.constant {lb} : index
    %ub = arith.constant {ub} : index
    %half = arith.constant 0.5 : f32
    %s = loop.for "k" %k = %lb to %ub lanes {lanes} iter(%acc = %half) -> (f32) {{
      %x = loop.load %1[%k] strides [1] : f32
      %y = loop.load %2[%k] strides [1] : f32
      %f = math.fma %x, %y, %acc : f32
      loop.yield %f : f32
    }}
    loop.store %s, %0[%c0] strides [1] : f32
  }}
  loop.program @p syms [] {{
    %a = loop.buffer input "a" : !loop.buf<[64], f32>
    %va = loop.view %a layout <0, [1]> : !loop.buf<[64], f32> -> !loop.view<[64], f32>
    %b = loop.buffer input "b" : !loop.buf<[64], f32>
    %vb = loop.view %b layout <0, [1]> : !loop.buf<[64], f32> -> !loop.view<[64], f32>
    %o = loop.buffer output "o" : !loop.buf<[1], f32>
    %vo = loop.view %o layout <0, [1]> : !loop.buf<[1], f32> -> !loop.view<[1], f32>
    loop.launch @dot(%vo, %va, %vb)
        : !loop.view<[1], f32>, !loop.view<[64], f32>, !loop.view<[64], f32>
    loop.output "o" = %o : !loop.buf<[1], f32>
  }}
}}"""
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return Parser(ctx, text).parse_module()


def _dot_reference(a: np.ndarray, b: np.ndarray, lb: int, ub: int, lanes: int) -> np.float32:
    """``loop.ForOp``'s lanes order written out: lane ``(i - lb) mod lanes``, each
    lane from the init, then the halving tree."""
    partial = np.full(lanes, 0.5, np.float32)
    for i in range(lb, ub):
        lane = (i - lb) % lanes
        partial[lane] = fma_f32(a[i], b[i], partial[lane])
    half = lanes // 2
    while half >= 1:
        partial = (partial[:half] + partial[half:2 * half]).astype(np.float32)
        half //= 2
    return partial[0]


@pytest.mark.parametrize(("lb", "ub", "lanes"), [
    (3, 35, 16), (5, 21, 8), (1, 9, 4), (7, 11, 2), (2, 13, 16), (0, 64, 16)])
def test_every_lane_count_and_lower_bound(lb: int, ub: int, lanes: int) -> None:
    """Lanes 2, 4, 8 and 16 from a non-zero lower bound (iteration ``i`` in lane
    ``(i - lb) mod L``): the scalar lanes loop and each vector width that divides
    the lanes (where this CPU runs it, the trip count a whole number of lane
    groups) give the written-out order's bits."""
    rng = rng_for("lanes dot", lb * 100 + ub)
    a, b = random_f32(rng, (64,), specials=False), random_f32(rng, (64,), specials=False)
    want = np.array([_dot_reference(a, b, lb, ub, lanes)])
    module = _dot_module(lb, ub, lanes)
    assert_bitwise(compile_loop(module, {}).run({"a": a, "b": b})["o"], want, "scalar")
    whole = (ub - lb) % lanes == 0
    for width in [w for w in (4, 8, 16) if whole and lanes % w == 0 and _missing(w) is None]:
        vectorized = module.clone()
        vectorize(_kernel(vectorized), "k", width)
        vectorized.verify()
        got = compile_loop(vectorized, {}).run({"a": a, "b": b})["o"]
        assert_bitwise(got, want, f"vectorized by {width}")


# --------------------------------------------------------------------------
# vector widths and jams: the same bits


def _vector_schedules(width: int) -> list[tuple[str, list[sched.Directive]]]:
    """Schedules of the projection's ``k`` in vectors of ``width`` lanes (N whole
    tiles of 2, 3 and 4 columns)."""
    v, p = sched.Vectorize, sched.Privatize
    return [
        (f"vectorize k by {width}", [v("k", width)]),
        ("vectorize k + parallel rows' columns", [v("k", width), sched.Parallel("d1")]),
        ("columns jam", [sched.Split("d1", 4, "d1o", "d1i", peel=True), v("k", width),
                         p("k"), sched.Parallel("d1o")]),
        ("jam, then vectorize the jammed lanes loop", [
            sched.Split("d1", 3, "d1o", "d1i", peel=True), p("k"), v("k", width)]),
        ("rows x columns with the leftover rows", [
            sched.Split("d1", 2, "d1o", "d1i", peel=True), sched.Reorder(("d1o", "d0")),
            sched.Split("d0", 3, "d0o", "d0i", peel=True), v("k", width), v("k_tail", width),
            p("k"), p("k"), p("k_tail"), sched.Parallel("d1o")]),
    ]


def _k_width_params() -> list[object]:
    """K = 48 (three groups of lanes) at every width; K = 16 (one group) at the
    host's width, at the other widths in the full suite only (the non-slow
    suite's 3-minute budget)."""
    params = []
    for k in (16, 48):
        for param in _width_params():
            width = param.values[0]
            slow = [pytest.mark.slow] if k == 16 and width != host_arch().f32_lanes else []
            params.append(pytest.param(k, width, id=f"{k}-{param.id}",
                                       marks=[*param.marks, *slow]))
    return params


@pytest.mark.parametrize(("k", "width"), _k_width_params())
def test_vector_schedules_give_the_scalar_lanes_bits(width: int, k: int) -> None:
    module = projection(k)
    for label, directives in _vector_schedules(width):
        scheduled = _scheduled(module, directives)
        text = str(_kernel(scheduled))
        assert f"vector<{width}xf32>" in text, label
        assert " lanes 16" not in text, label  # the lanes are vector lanes now
        _check(scheduled, k, label)


SCALAR_JAMS = [
    ("columns jam of the scalar lanes loop", [
        sched.Split("d1", 4, "d1o", "d1i", peel=True), sched.Privatize("k"),
        sched.Parallel("d1o")]),
    ("rows x columns of the scalar lanes loop", [
        sched.Split("d1", 2, "d1o", "d1i", peel=True), sched.Reorder(("d1o", "d0")),
        sched.Split("d0", 3, "d0o", "d0i", peel=True), sched.Privatize("k"),
        sched.Privatize("k"), sched.Privatize("k_tail")]),
]


@pytest.mark.parametrize("k", [20, 48])
def test_privatize_keeps_the_lanes(k: int) -> None:
    """Jammed without vectors, ``k`` stays a lanes 16 loop carrying one value per
    copy, each with its own partial sums (any K: nothing needs whole groups)."""
    module = projection(k)
    for label, directives in SCALAR_JAMS:
        scheduled = _scheduled(module, directives)
        kernel = _kernel(scheduled)
        jammed = _loop(kernel, "k")
        assert jammed.lanes is not None, label
        assert jammed.lanes.data == MATMUL_LANES, label
        assert len(jammed.inits) in (4, 6), label  # 4 columns; 3 rows x 2 columns
        assert "vector" not in str(kernel), label
        _check(scheduled, k, label)


def test_columns_jam_with_a_column_tail_mixes_vector_and_scalar_lanes() -> None:
    """26 columns in tiles of 4: the 2 peeled columns keep the scalar lanes loop
    (``k_tail``) next to the vectorized tiles, in one kernel."""
    gb = GraphBuilder("mm")
    x_in = gb.input("x", "f32", ["seq", 32])
    gb.output("out", linear(x_in, gb.weight("w", [26, 32])))
    module = lower_to_loop(optimize_graph(gb.finish_module()))
    width = next((w for w in (16, 8) if _missing(w) is None), None)
    if width is None:
        pytest.skip(_missing(8) or "")
    scheduled = _scheduled(module, [sched.Split("d1", 4, "d1o", "d1i", peel=True),
                                    sched.Vectorize("k", width), sched.Privatize("k"),
                                    sched.Parallel("d1o")])
    kernel = _kernel(scheduled)
    tail = _loop(kernel, "k_tail")
    assert tail.lanes is not None
    assert tail.lanes.data == MATMUL_LANES
    assert _loop(kernel, "k").lanes is None
    rng = rng_for("lanes column tail", 0)
    w = random_f32(rng, (26, 32), specials=False)
    program = compile_loop(scheduled, {"w": w})
    for seq in SEQS:
        x = random_f32(rng, (seq, 32), specials=False)
        assert_bitwise(_run(program, x, w, False), lanes_matmul(x, w.T), f"seq={seq}")


# --------------------------------------------------------------------------
# the default schedules, every thread count


TILES = [None, MatmulTile(2, 3), MatmulTile(4, 2)]


@pytest.mark.parametrize("arch", [*_arch_width(AVX2), *_arch_width(AVX512)])
def test_default_candidates_are_bitwise_at_every_thread_count(arch: Arch) -> None:
    """Every default candidate of the projection (the arch's register tile and
    two others), each at 1, 2, 3 and 8 threads."""
    module = projection(48)
    seen: list[list[sched.Directive]] = []
    for tile in TILES:
        for directives in default_schedules(_kernel(module), arch, min_chunk=1, tile=tile):
            if directives in seen:
                continue
            seen.append(directives)
            _check(_scheduled(module, directives), 48, f"{arch.name} {directives}", THREADS)
    assert len(seen) >= 2 * len(TILES)  # the row jam and the columns jam of each tile


@pytest.mark.parametrize("k", [7, 20])
def test_default_schedules_fall_back_to_the_scalar_lanes_loop(k: int) -> None:
    """No whole groups of lanes: every vector candidate is refused (RaggedLanes)
    on both vector archs; what remains (the pool) runs the scalar lanes loop,
    bitwise at every thread count."""
    module = projection(k)
    for arch in (AVX2, AVX512):
        scheduled, refusals = schedule_loop(module, arch)
        assert refusals
        assert all("not a known multiple of 16 lanes" in r for r in refusals), refusals
        kernel = _kernel(scheduled)
        assert "vector" not in str(kernel)
        assert _loop(kernel, "k").lanes is not None
        assert any(op.parallel is not None for op in kernel.walk()
                   if isinstance(op, loop.ForOp))
    _check(scheduled, k, f"fallback K={k}", THREADS)


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=lambda a: a.name)
def test_symbolic_k_vectorizes_with_its_lanes_as_scalars_after_the_groups(arch: Arch
                                                                          ) -> None:
    """K symbolic: the default tile vectorizes ``k`` over the whole groups of 16
    (``_vectorize_ragged_lanes``), then each leftover iteration updates its
    lane as a scalar under a ``loop.if`` and the halving tree adds the lanes:
    the reference's bits (``lanes_matmul``) at K with and without leftovers,
    below one group, at every thread count."""
    reason = missing_reason(arch)
    if reason:
        pytest.skip(reason)
    scheduled, refusals = schedule_loop(projection("kk"), arch)
    assert not refusals
    kernel = _kernel(scheduled)
    assert f"vector<{arch.f32_lanes}xf32>" in str(kernel)
    assert sum(isinstance(op, loop.IfOp) for op in kernel.walk()) >= 15
    program = compile_loop(scheduled, {})
    rng = rng_for("lanes symbolic vectorized", 0)
    for n in THREADS:
        assert program.set_threads(n) == n
        for kk in (1, 15, 16, 17, 20, 33, 64, 100):
            x, w = _inputs(kk, 7, rng)
            assert_bitwise(_run(program, x, w, True), lanes_matmul(x, w.T),
                           f"{arch.name} symbolic K={kk}, {n} threads")


@pytest.mark.parametrize("arch", [SCALAR, AVX2, AVX512], ids=lambda a: a.name)
def test_default_schedule_reads_weights_in_place(arch: Arch) -> None:
    """No arch packs a weight: the program has no packed buffer and the kernel
    still reads W through the lowered layout (rows along k, stride 1)."""
    module = projection(64, 48)
    scheduled, _ = schedule_loop(module, arch)
    (program,) = [op for op in scheduled.ops if isinstance(op, loop.ProgramOp)]
    assert [b.kind.data for b in program.buffers()].count("packed") == 0
    assert str(_kernel(scheduled).footprints) == str(_kernel(module).footprints)


# --------------------------------------------------------------------------
# what the default projection schedule builds


def _affine(value: SSAValue) -> tuple[frozenset[tuple[SSAValue, int]], int]:
    """An index value as ``sum(coef * atom) + const`` (atoms: block arguments and
    other opaque values), so equal addresses compare equal whatever SSA values
    spell them."""
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return frozenset(), owner.value.value.data
    if isinstance(owner, arith.AddiOp | arith.SubiOp):
        (a, ca), (b, cb) = _affine(owner.lhs), _affine(owner.rhs)
        sign = 1 if isinstance(owner, arith.AddiOp) else -1
        terms = Counter(dict(a))
        for atom, coef in b:
            terms[atom] += sign * coef
        return frozenset((t, c) for t, c in terms.items() if c), ca + sign * cb
    if isinstance(owner, arith.MuliOp):
        (a, ca), (b, cb) = _affine(owner.lhs), _affine(owner.rhs)
        if not b:
            return frozenset((t, c * cb) for t, c in a), ca * cb
        if not a:
            return frozenset((t, c * ca) for t, c in b), ca * cb
    return frozenset({(value, 1)}), 0  # a block argument, loop.sym, ...


def _distinct_loads(body: list[loop.LoadOp], ptr: SSAValue) -> int:
    return len({tuple(_affine(i) for i in op.indices) for op in body if op.ptr is ptr})


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=lambda a: a.name)
def test_default_projection_schedule_is_a_register_tile(arch: Arch) -> None:
    """Per 16 values of ``k`` (one step of the vectorized loop) the row tile
    issues ``rows * columns * V`` vector FMAs and loads ``(rows + columns) * V``
    distinct vectors, ``V = 16 / lanes`` vectors per row of lanes; the leftover
    rows (``k_tail``) one row's worth. The results leave ``k`` as the tree's
    last vector, summed by one ``loop.lanesum`` each. (The plain candidate: the
    hand point's first is the strided decode tile, test_schedule_strided_knob.py.)"""
    module = projection(64, 48)
    kernel = _kernel(module)
    hand = hand_knobs(kernel, arch)
    assert hand is not None
    assert hand.strided
    plain = default_schedules(kernel, arch, knobs=hand.replace(strided=False))[0]
    scheduled = _scheduled(module, plain)
    tile, per_row = MATMUL_TILES[arch.name], MATMUL_LANES // arch.f32_lanes
    vector = VectorType(f32, [arch.f32_lanes])
    new = _kernel(scheduled)
    # the reads: x ([seq, K], rows) and W.T ([K, N], its rows along k)
    (new_x,) = [a for a, fp in zip(new.args, new.footprints.data, strict=True)
                if [str(d) for d in fp.dims] == ["seq", "64"]]
    (new_w,) = [a for a, fp in zip(new.args, new.footprints.data, strict=True)
                if [str(d) for d in fp.dims] == ["64", "48"]]
    assert [str(fp) for fp in new.footprints.data] == [str(fp) for fp in
                                                      kernel.footprints.data]
    for name, rows in (("k", tile.rows), ("k_tail", 1)):
        k = _loop(new, name)
        assert k.lanes is None, name
        assert k.step.data == MATMUL_LANES, name
        body = list(k.body.block.ops)
        fmas = [op for op in body if isinstance(op, xmath.FmaOp)]
        assert len(fmas) == rows * tile.columns * per_row, name
        assert all(op.result.type == vector for op in fmas), name
        assert len(k.inits) == rows * tile.columns * per_row, name
        loads = [op for op in body if isinstance(op, loop.LoadOp)]
        assert all(op.result.type == vector for op in loads), name
        assert _distinct_loads(loads, new_x) == rows * per_row, name
        assert _distinct_loads(loads, new_w) == tile.columns * per_row, name
        after = [op for op in k.parent_block().ops if isinstance(op, loop.LaneSumOp)]
        assert len(after) == rows * tile.columns, name


# --------------------------------------------------------------------------
# refusals


def _unchanged(action: Callable[[loop.KernelOp], None], kernel: loop.KernelOp,
               error: type[ScheduleError], match: str) -> None:
    before = str(kernel)
    with pytest.raises(error, match=match):
        action(kernel)
    assert str(kernel) == before


def test_split_and_unroll_of_a_lanes_loop_are_refused() -> None:
    kernel = _kernel(projection(32))
    fixed = "a lanes loop's order is fixed by its lanes"
    _unchanged(lambda k: split(k, "k", 4, "ko", "ki"), kernel, LanesLoop, f"split 'k': {fixed}")
    _unchanged(lambda k: split(k, "k", 16, "ko", "ki", peel=True), kernel, LanesLoop, fixed)
    _unchanged(lambda k: unroll(k, "k"), kernel, LanesLoop, f"unroll 'k': {fixed}")
    _unchanged(lambda k: unroll(k, "k", 4), kernel, LanesLoop, fixed)
    assert issubclass(LanesLoop, CarriesValues)  # what a generic caller catches


def test_vectorize_needs_whole_groups_of_lanes() -> None:
    for k in (1, 7, 20):
        kernel = _kernel(projection(k))
        _unchanged(lambda kk: vectorize(kk, "k", 8), kernel, RaggedLanes,
                   "the trip count is not a known multiple of 16 lanes")


def _parse(body: str, lanes: int) -> loop.KernelOp:
    text = f"""builtin.module {{
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"]
      footprints [#loop.fp<[17], [1]>, #loop.fp<[32], [1]>] {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c32 = arith.constant 32 : index
    %z = arith.constant 0.0 : f32
    %s = loop.for "k" %k = %c0 to %c32 lanes {lanes} iter(%acc = %z) -> (f32) {{
      %x = loop.load %1[%k] strides [1] : f32{body}
      %t = arith.addf %acc, %x : f32
      loop.yield %t : f32
    }}
    loop.store %s, %0[%c0] strides [1] : f32
  }}
}}"""
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return _kernel(Parser(ctx, text).parse_module())


@pytest.mark.parametrize(("lanes", "width"), [(4, 8), (8, 16), (2, 4)])
def test_vectorize_width_must_divide_the_lanes(lanes: int, width: int) -> None:
    _unchanged(lambda k: vectorize(k, "k", width), _parse("", lanes), RaggedLanes,
               f"width {width} does not divide the loop's {lanes} lanes")


def test_vectorize_width_dividing_the_lanes_applies() -> None:
    """The positive side of the test above: 8 lanes by 4 are two vectors."""
    kernel = _parse("", 8)
    vectorize(kernel, "k", 4)
    k = _loop(kernel, "k")
    assert k.step.data == 8
    assert k.lanes is None
    assert [str(v.type) for v in k.inits] == ["vector<4xf32>"] * 2


def test_parallel_inside_a_lanes_loop_is_refused() -> None:
    kernel = _parse("""
      loop.for "d0" %j = %c0 to %c4 {
        %o = arith.addi %j, %c1 : index
        loop.store %x, %0[%o] strides [1] : f32
      }""", 16)
    _unchanged(lambda k: parallel(k, "d0"), kernel, LanesLoop,
               "parallel 'd0': enclosing loop 'k' is a lanes loop")
    _unchanged(lambda k: parallel(k, "k"), kernel, CarriesValues, "carries 1 value")


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_default_schedules_of_an_empty_sum(arch: Arch) -> None:
    """K = 0 (found by the graphs fuzz campaign: the row-block size divided by the
    row length): the candidates are listed without the row blocks, no crash."""
    kernel = _kernel(projection(0))
    candidates = default_schedules(kernel, arch)
    assert candidates
    assert not any(isinstance(d, sched.Split) and d.outer == "d0b"
                   for c in candidates for d in c)


@pytest.mark.parametrize("arch", [pytest.param(a, id=a.name, marks=slow_off_host(a))
                                  for a in (AVX2, AVX512)])
def test_long_rows_are_blocked_and_keep_the_order(arch: Arch) -> None:
    """K = 4864 (down_proj's rows): the first candidate sweeps the column tiles
    over blocks of rows (``ROW_BLOCK_BYTES``); it applies and gives the
    reference's bits on 1 and 2 threads at row counts around a block's edge."""
    reason = _missing(arch.f32_lanes)
    if reason:
        pytest.skip(reason)
    module = projection(4864)
    first = default_schedules(_kernel(module), arch)[0]
    assert isinstance(first[0], sched.Split), first
    assert first[0].outer == "d0b", first
    block = first[0].factor
    assert block % MATMUL_TILES[arch.name].rows == 0
    assert 4 * 4864 * block <= 1 << 20
    scheduled = _scheduled(module, first)
    rng = rng_for("lanes row blocks", 0)
    w = random_f32(rng, (N, 4864), specials=False)
    program = compile_loop(scheduled, {"w": w})
    for n in (1, 2):
        assert program.set_threads(n) == n
        for seq in (1, block - 1, block + 7):
            x = random_f32(rng, (seq, 4864), specials=False)
            assert_bitwise(_run(program, x, w, False), lanes_matmul(x, w.T),
                           f"row blocks of {block}, seq={seq}, {n} threads")

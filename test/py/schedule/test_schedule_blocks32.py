"""Lanes loops with a tree and a tail (issue 18): spec §5 kernel A's order
(``graph.matmul ... order = "blocks32"``) as a lanes loop ``lanes 32 tail 8
tree [3, 4, 2, 0, 1]``, and every schedule keeping it.

Claims:

* the lowering's order is spec §5's, checked against the spec's wording
  written out here (lane of each iteration; the tree's adds on four
  accumulators of 8 lanes);
* any lanes loop with a tree and a tail (random trees of 4, 8, 16 and 32
  lanes, tails, non-zero lower bounds) computes the order written out here
  from ``loop.ForOp``'s docstring, scalar and vectorized by every width its
  tree allows (4, 8, 16, where this CPU runs it; a tree that starts with the
  vectors' top lane bits halves them first, ``loop.foldhalf``; a trip count
  that is a multiple of the lanes runs no tail, so the tail's groups do not
  bound the width); a width it does not allow is refused (``LanesTree``,
  ``RaggedLanes``), the kernel unchanged;
* ``loop.lanesum`` with every tree of 4, 8 and 16 lanes (the C helpers'
  narrowing and lane permutes) adds the pairs of the written-out tree;
* ``privatize`` keeps the tree and the tail; the default schedules of a
  kernel-A projection vectorize ``k`` by 8 on AVX2, by 16 on AVX-512 where K
  is a multiple of 32 (by 8 where a group of 8 follows the last block),
  privatize before vectorizing, read the int8 weight in place, and every
  candidate is bitwise ``_int8_reference.kernel_a`` at 1, 2, 3 and 8 threads.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from _arches import TITLES
from _fma_reference import fma_f32
from _int8_reference import kernel_a, kernel_a_dot, quantize_rows
from _numerics import assert_bitwise, random_f32, rng_for
from _schedule_helpers import kernel_a_projection as _kernel_a_module
from _schedule_helpers import scheduled_copy as _scheduled
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.parser import Parser

from nanocompile.compiler import compile_loop, lower_to_loop, optimize_graph
from nanocompile.dialects import get_all_dialects, loop, sched
from nanocompile.dialects import graph as g
from nanocompile.frontend.tensor import GraphBuilder
from nanocompile.schedule.defaults import (
    DECODE_COLUMNS,
    PAIR_TILES,
    STRIDED_DECODE_COLUMNS,
    WIDE_TILES,
    MatmulTile,
    default_schedules,
    hand_knobs,
    k_width,
)
from nanocompile.schedule.knobs import ProjectionKnobs
from nanocompile.schedule.primitives import NameTaken, NotPerfectlyNested, ScheduleError
from nanocompile.schedule.privatize import privatize
from nanocompile.schedule.vectorize import LanesTree, RaggedLanes, vectorize
from nanocompile.targets.arch import AVX2, AVX512, SCALAR, Arch, cpu_flags

SPEC_TREE = (3, 4, 2, 0, 1)  # spec §5: (c0 + c1) + (c2 + c3), v[i] + v[i + 4], then s
THREADS = (1, 2, 3, 8)
WIDTH_FLAGS = {4: ("avx2", "fma"), 8: ("avx2", "fma"), 16: ("avx512f",)}
WIDTH_TITLE = {4: "SSE FMA", 8: TITLES["avx2"], 16: TITLES["avx512"]}


def _missing(width: int) -> str | None:
    missing = [f for f in WIDTH_FLAGS[width] if f not in cpu_flags()]
    if not missing:
        return None
    return (f"the CPU has no {', '.join(missing)} ({WIDTH_TITLE[width]} lanes path "
            "untested here)")


def _arch_param(arch: Arch) -> object:
    reason = _missing(arch.f32_lanes)
    return pytest.param(arch, id=arch.name,
                        marks=[pytest.mark.skip(reason=reason)] if reason else [])


def _parse(text: str) -> ModuleOp:
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return Parser(ctx, text).parse_module()


def _kernel(module: ModuleOp, name: str | None = None) -> loop.KernelOp:
    (kernel,) = [op for op in module.ops if isinstance(op, loop.KernelOp)
                 and (name is None or op.sym_name.data == name)]
    return kernel


def _loop(kernel: loop.KernelOp, name: str) -> loop.ForOp:
    (found,) = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
                and op.loop_name.data == name]
    return found


def _unchanged(action: Callable[[loop.KernelOp], None], kernel: loop.KernelOp,
               error: type[ScheduleError], match: str) -> None:
    before = str(kernel)
    with pytest.raises(error, match=match):
        action(kernel)
    assert str(kernel) == before


# --------------------------------------------------------------------------
# the order, written out from the docstrings and the spec (independently of
# loop.LaneOrder and loop.tree_steps)


def written_lane(j: int, n: int, lanes: int, tail: int) -> int:
    """``loop.ForOp``: iteration ``j`` of ``n`` updates lane ``j mod L`` while
    ``j < J = L * floor(n / L)``, then lane ``(j - J) mod R``."""
    whole = lanes * (n // lanes)
    return j % lanes if j < whole else (j - whole) % tail


def written_tree(values: np.ndarray, tree: tuple[int, ...]) -> np.float32:
    """Combining bit ``b`` adds, for every lane ``j`` still live whose bit
    ``b`` is clear, ``v[j] + v[j | 1 << b]`` (lower lane on the left); the
    lanes with bit ``b`` set die. Lane 0 is the result."""
    v = [np.float32(x) for x in values]
    live = list(range(len(v)))
    with np.errstate(invalid="ignore", over="ignore"):
        for bit in tree:
            for j in live:
                if not j & (1 << bit):
                    v[j] = np.float32(v[j] + v[j | (1 << bit)])
            live = [j for j in live if not j & (1 << bit)]
    assert live == [0]
    return v[0]


def test_the_lowered_order_is_spec_5() -> None:
    """The lanes loop of a blocks32 matmul (K = 75: two blocks, a group of 8,
    a tail of 3) runs over K8 = 72 with spec §5's lane for every iteration and
    spec §5's tree of the four accumulators."""
    k_loop = _loop(_kernel(_kernel_a_module(75, 8)), "k")
    assert k_loop.lanes is not None
    assert k_loop.tail is not None
    assert k_loop.tree is not None
    lanes, tail = k_loop.lanes.data, k_loop.tail.data
    tree = tuple(b.data for b in k_loop.tree.data)
    assert (lanes, tail, tree) == (32, 8, SPEC_TREE)
    ub = k_loop.ub.owner
    assert ub.value.value.data == 72  # type: ignore[union-attr]
    # spec §5: column o + 8a + l of a whole block goes to c_a[l]; leftover whole
    # groups of 8 go to c0; lane 8a + l of the loop is c_a[l]
    for n in (8, 32, 40, 72, 96, 120):
        blocks = n // 32
        for j in range(n):
            a, lane = ((j % 32) // 8, j % 8) if j < 32 * blocks else (0, (j - 32 * blocks) % 8)
            assert written_lane(j, n, lanes, tail) == 8 * a + lane, (n, j)
    rng = rng_for("blocks32 tree", 0)
    c = random_f32(rng, (4, 8), specials=False)  # c[a][l]
    v = [np.float32((c[0, i] + c[1, i]) + (c[2, i] + c[3, i])) for i in range(8)]
    s = [np.float32(v[i] + v[i + 4]) for i in range(4)]
    want = np.float32((s[0] + s[1]) + (s[2] + s[3]))
    assert written_tree(c.reshape(32), tree).view(np.uint32) == want.view(np.uint32)


# --------------------------------------------------------------------------
# any tree and tail: scalar and every width


def _dot_module(lb: int, ub: int, lanes: int, tail: int | None,
                tree: tuple[int, ...] | None) -> ModuleOp:
    """``o = 0.5 + sum_{lb <= i < ub} a[i] * f32(q[i])`` as a lanes loop."""
    order = f"lanes {lanes}" + (f" tail {tail}" if tail else "") + (
        f" tree [{', '.join(map(str, tree))}]" if tree is not None else "")
    return _parse(f"""builtin.module {{
  loop.kernel @dot(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<i8>) syms []
      access ["w", "r", "r"]
      footprints [#loop.fp<[1], [1]>, #loop.fp<[256], [1]>, #loop.fp<[256], [1]>] {{
    %c0 = arith.constant 0 : index
    %lb = arith.constant {lb} : index
    %ub = arith.constant {ub} : index
    %half = arith.constant 0.5 : f32
    %s = loop.for "k" %k = %lb to %ub {order} iter(%acc = %half) -> (f32) {{
      %x = loop.load %1[%k] strides [1] : f32
      %q = loop.load %2[%k] strides [1] : i8
      %y = arith.sitofp %q : i8 to f32
      %f = math.fma %x, %y, %acc : f32
      loop.yield %f : f32
    }}
    loop.store %s, %0[%c0] strides [1] : f32
  }}
  loop.program @p syms [] {{
    %a = loop.buffer input "a" : !loop.buf<[256], f32>
    %va = loop.view %a layout <0, [1]> : !loop.buf<[256], f32> -> !loop.view<[256], f32>
    %q = loop.buffer input "q" : !loop.buf<[256], i8>
    %vq = loop.view %q layout <0, [1]> : !loop.buf<[256], i8> -> !loop.view<[256], i8>
    %o = loop.buffer output "o" : !loop.buf<[1], f32>
    %vo = loop.view %o layout <0, [1]> : !loop.buf<[1], f32> -> !loop.view<[1], f32>
    loop.launch @dot(%vo, %va, %vq)
        : !loop.view<[1], f32>, !loop.view<[256], f32>, !loop.view<[256], i8>
    loop.output "o" = %o : !loop.buf<[1], f32>
  }}
}}""")


def _dot_reference(a: np.ndarray, q: np.ndarray, lb: int, ub: int, lanes: int, tail: int,
                   tree: tuple[int, ...]) -> np.ndarray:
    partial = np.full(lanes, 0.5, np.float32)
    for i in range(lb, ub):
        lane = written_lane(i - lb, ub - lb, lanes, tail)
        partial[lane] = fma_f32(a[i], np.float32(q[i]), partial[lane])
    return np.array([written_tree(partial, tree)], np.float32)


def _width_allowed(tree: tuple[int, ...], lanes: int, tail: int, n: int, width: int) -> bool:
    """``vectorize``'s docstring and ``loop.LaneOrder.vector_split``'s, written
    out: the width divides the lanes, and the tail's groups when the trip count
    ``n`` is not a multiple of the lanes (a tail runs); the tree may start with
    the vectors' top lane bits in descending order (each halves every vector,
    leaving 4 lanes at least, and only when there are vectors to add), then
    must take the bits that select a vector, in some order."""
    if lanes % width or (n % lanes and tail % width):
        return False
    bits, inner = lanes.bit_length() - 1, width.bit_length() - 1
    folds = 0
    while bits > inner and width >> (folds + 1) >= 4 and tree[folds] == inner - 1 - folds:
        folds += 1
    return sorted(tree[folds:folds + bits - inner]) == list(range(inner, bits))


def _orders() -> list[object]:
    """(lb, ub, lanes, tail, tree): kernel A's, the halving tree with a tail,
    and seeded random trees and tails of 4, 8, 16 and 32 lanes (two of each
    lane count in the quick suite, four in the full one: the non-slow suite's
    3-minute budget)."""
    rng = np.random.default_rng(rng_for("blocks32 orders", 0).integers(1 << 30))
    cases: list[object] = [
        (0, 72, 32, 8, SPEC_TREE), (3, 3 + 96 + 16, 32, 8, SPEC_TREE), (0, 64, 32, 8, SPEC_TREE),
        (5, 5 + 40, 16, 8, None), (0, 0, 32, 8, SPEC_TREE), (1, 1 + 36, 32, 4, SPEC_TREE)]
    for lanes in (4, 8, 16, 32):
        bits = lanes.bit_length() - 1
        for i in range(4):
            tree = tuple(int(b) for b in rng.permutation(bits))
            tail = int(2 ** rng.integers(0, bits + 1))
            lb = int(rng.integers(0, 5))
            n = lanes * int(rng.integers(0, 4)) + tail * int(rng.integers(0, lanes // tail))
            cases.append(pytest.param(lb, lb + n, lanes, tail, tree,
                                      marks=[pytest.mark.slow] if i >= 2 else []))
    return cases


@pytest.mark.parametrize(("lb", "ub", "lanes", "tail", "tree"), _orders())
def test_every_order_is_the_written_out_order(lb: int, ub: int, lanes: int, tail: int | None,
                                              tree: tuple[int, ...] | None) -> None:
    rng = rng_for("blocks32 dot", lb * 1000 + ub * 10 + lanes)
    a = random_f32(rng, (256,), specials=False)
    q = rng.integers(-127, 128, 256).astype(np.int8)
    order = loop.LaneOrder.of(lanes, tree, tail)
    want = _dot_reference(a, q, lb, ub, lanes, order.tail, order.tree)
    module = _dot_module(lb, ub, lanes, tail, tree)
    assert_bitwise(compile_loop(module, {}).run({"a": a, "q": q})["o"], want, "scalar")
    for width in (4, 8, 16):
        allowed = _width_allowed(order.tree, lanes, order.tail, ub - lb, width)
        kernel = _kernel(module.clone())
        if not allowed:
            _unchanged(lambda k, w=width: vectorize(k, "k", w), kernel,
                       LanesTree if lanes % width == 0 else RaggedLanes, "vectorize 'k'")
            continue
        if _missing(width) is not None:
            continue
        vectorized = module.clone()
        vectorize(_kernel(vectorized), "k", width)
        vectorized.verify()
        assert " lanes " not in str(_kernel(vectorized))
        got = compile_loop(vectorized, {}).run({"a": a, "q": q})["o"]
        assert_bitwise(got, want, f"vectorized by {width}")


def test_lanesum_of_every_tree_is_the_written_out_tree() -> None:
    """Every tree of 4, 8 and 16 lanes in one program (one kernel each): the
    C helpers narrow at the highest live bit and permute lanes otherwise."""
    widths = [w for w in (4, 8, 16) if _missing(w) is None]
    if not widths:
        pytest.skip(_missing(8) or "")
    trees = [(w, t) for w in widths for t in itertools.permutations(range(w.bit_length() - 1))]
    kernels, launches, views = [], [], []
    for i, (w, tree) in enumerate(trees):
        kernels.append(f"""
  loop.kernel @t{i}(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>) syms [] access ["w", "r"]
      footprints [#loop.fp<[1], [1]>, #loop.fp<[{w}], [1]>] {{
    %c0 = arith.constant 0 : index
    %v = loop.load %1[%c0] strides [1] : vector<{w}xf32>
    %s = loop.lanesum %v tree [{', '.join(map(str, tree))}] : vector<{w}xf32> -> f32
    loop.store %s, %0[%c0] strides [1] : f32
  }}""")
        out, src = f"!loop.buf<[{len(trees)}], f32>", f"!loop.buf<[{16 * len(trees)}], f32>"
        views.append(f"""
    %o{i} = loop.view %o layout <{i}, [1]> : {out} -> !loop.view<[1], f32>
    %a{i} = loop.view %a layout <{16 * i}, [1]> : {src} -> !loop.view<[{w}], f32>""")
        launches.append(f"""
    loop.launch @t{i}(%o{i}, %a{i}) : !loop.view<[1], f32>, !loop.view<[{w}], f32>""")
    module = _parse(f"""builtin.module {{{''.join(kernels)}
  loop.program @p syms [] {{
    %a = loop.buffer input "a" : !loop.buf<[{16 * len(trees)}], f32>
    %o = loop.buffer output "o" : !loop.buf<[{len(trees)}], f32>{''.join(views)}{''.join(launches)}
    loop.output "o" = %o : !loop.buf<[{len(trees)}], f32>
  }}
}}""")
    a = random_f32(rng_for("blocks32 lanesum trees", 0), (16 * len(trees),), specials=False)
    want = np.array([written_tree(a[16 * i:16 * i + w], tree)
                     for i, (w, tree) in enumerate(trees)], np.float32)
    got = compile_loop(module, {}).run({"a": a})["o"]
    assert_bitwise(got, want, f"{len(trees)} lane trees")


# --------------------------------------------------------------------------
# schedules of kernel A


def _kernel_a_weights(k: int, n: int, seed: int) -> dict[str, np.ndarray]:
    rng = rng_for("blocks32 weights", seed)
    q, scale = quantize_rows((rng.standard_normal((n, k)) * 0.05).astype(np.float32))
    return {"q": q, "scale": scale}


def _check(module: ModuleOp, k: int, n: int, label: str,
           threads: tuple[int, ...] = (1,)) -> None:
    weights = _kernel_a_weights(k, n, k)
    program = compile_loop(module, weights)
    rng = rng_for(f"blocks32 {label} {k}", 0)
    for t in threads:
        assert program.set_threads(t) == t
        for seq in (1, 2, 3, 7):
            x = random_f32(rng, (seq, k), specials=False)
            assert_bitwise(program.run({"x": x})["y"], kernel_a(x, weights["q"], weights["scale"]),
                           f"{label}, K={k}, seq={seq}, {t} threads")


@pytest.mark.parametrize("k", [40, 75])
def test_privatize_keeps_the_tree_and_the_tail(k: int) -> None:
    module = _kernel_a_module(k, 12)
    scheduled = _scheduled(module, [sched.Split("d1", 4, "d1o", "d1i", peel=True),
                                    sched.Privatize("k"), sched.Parallel("d1o")])
    jammed = _loop(_kernel(scheduled), "k")
    assert jammed.lane_order == loop.LaneOrder(32, SPEC_TREE, 8)
    assert len(jammed.inits) == 4
    _check(scheduled, k, 12, "columns jam")


@pytest.mark.parametrize("arch", [_arch_param(AVX2), _arch_param(AVX512)])
@pytest.mark.parametrize(("k", "n"), [pytest.param(64, 32, marks=pytest.mark.slow), (72, 12),
                                      pytest.param(100, 32, marks=pytest.mark.slow)])
def test_default_candidates_are_bitwise_at_every_thread_count(arch: Arch, k: int,
                                                              n: int) -> None:
    """Every default candidate of a kernel-A projection (the arch's tile and
    two others, each with the hand's strided decode tile of 8 columns and with
    the adjacent wide tile of 16; 32 columns: whole tiles of both for the
    decode jam, 12: none), K with and without a group of 8 and a tail, 1, 2, 3
    and 8 threads."""
    module = _kernel_a_module(k, n)
    hand = hand_knobs(_kernel(module), arch)
    assert hand is not None
    assert hand.strided
    assert hand.decode == STRIDED_DECODE_COLUMNS
    points = [ProjectionKnobs(t.rows, t.columns, decode, strided=strided)
              for t in (MatmulTile(hand.rows, hand.columns), MatmulTile(2, 3), MatmulTile(3, 2))
              for decode, strided in ((STRIDED_DECODE_COLUMNS, True), (DECODE_COLUMNS, False))]
    seen: list[list[sched.Directive]] = []
    for point in points:
        for directives in default_schedules(_kernel(module), arch, min_chunk=1, knobs=point):
            if directives in seen:
                continue
            seen.append(directives)
            try:
                scheduled = _scheduled(module, directives)
            except ScheduleError:
                continue  # a candidate refused (a tile that does not divide N)
            _check(scheduled, k, n, f"{arch.name} {directives}", THREADS)
    assert len(seen) >= 4
    first = default_schedules(_kernel(module), arch, min_chunk=1)[0]
    strided = any(isinstance(d, sched.Split) and d.outer == "d1q" for d in first)
    assert strided == (n % STRIDED_DECODE_COLUMNS == 0)  # the hand's first, where it applies
    if n % DECODE_COLUMNS == 0:  # the wide decode tile applies: its point's first candidate
        assert any(sched.Split("d1", DECODE_COLUMNS, "d1o", "d1m", peel=True) in c for c in seen)


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=lambda a: a.name)
def test_default_schedule_of_kernel_a(arch: Arch) -> None:
    """k by 8 on AVX2 (four vectors per sum, WIDE_TILES), by 16 on AVX-512
    where K is a multiple of 32 (the lanes loop runs no tail: two zmm per sum,
    ``c0 | c1`` and ``c2 | c3``, PAIR_TILES; by 8 where a group of 8 follows the
    last block), privatized before vectorized; the hand point's first
    candidate is the strided decode tile (session 20); at the adjacent point
    (``strided`` off, a point the tuner may pick) column tiles of 16 on the
    pool, the arch's tile inside them and all 16 columns jammed for the
    leftover rows (decode: per 32 values of k, 16 columns of 32 / width vector
    FMAs on 16 weight rows); no packed copy, the int8 weight read in place;
    the default order still by the arch's width."""
    module = _kernel_a_module(96, 48)
    kernel = _kernel(module)
    width = arch.f32_lanes
    vectors = 32 // width
    assert k_width(_loop(kernel, "d1"), arch) == width
    assert k_width(_loop(_kernel(_kernel_a_module(104, 48)), "d1"), arch) == 8  # a tail of 8
    hand = hand_knobs(kernel, arch)
    assert hand is not None
    assert any(isinstance(d, sched.Split) and d.outer == "d1q"
               for d in default_schedules(kernel, arch)[0])
    adjacent = hand.replace(strided=False, decode=DECODE_COLUMNS)
    (first, *_) = default_schedules(kernel, arch, knobs=adjacent)
    vectorized = [d for d in first if isinstance(d, sched.Vectorize)]
    assert {d.width for d in vectorized} == {width}
    assert first.index(vectorized[0]) > max(i for i, d in enumerate(first)
                                            if isinstance(d, sched.Privatize))
    tile = WIDE_TILES[(arch.name, 1)] if width == 8 else PAIR_TILES[1]
    assert sched.Split("d1", DECODE_COLUMNS, "d1o", "d1m", peel=True) in first
    assert sched.Split("d1m", tile.columns, "d1mo", "d1i", peel=True) in first
    assert sched.Split("d0", tile.rows, "d0o", "d0i", peel=True) in first
    scheduled = _scheduled(module, first)
    new = _kernel(scheduled)
    for name, sums in (("k", tile.rows * tile.columns), ("k_tail", DECODE_COLUMNS)):
        k_loop = _loop(new, name)
        assert k_loop.step.data == 32, name
        assert len(k_loop.inits) == vectors * sums, name
        fmas = [op for op in k_loop.body.block.ops if op.name == "math.fma"]
        assert len(fmas) == vectors * sums, name
    (program,) = [op for op in scheduled.ops if isinstance(op, loop.ProgramOp)]
    assert "packed" not in [b.kind.data for b in program.buffers()]
    assert str(_kernel(scheduled).footprints) == str(kernel.footprints)
    assert f"vector<{width}xi8>" in str(_kernel(scheduled))
    assert ("vector<16xf32>" in str(_kernel(scheduled))) == (width == 16)
    assert ("loop.foldhalf" in str(_kernel(scheduled))) == (width == 16)
    gb = GraphBuilder("default_order")
    x = gb.input("x", "f32", ["seq", 96])
    gb.output("y", x @ gb.weight("w", [48, 96]).T)
    default = lower_to_loop(optimize_graph(gb.finish_module()))
    assert k_width(_loop(_kernel(default), "d1"), arch) == arch.f32_lanes
    assert k_width(_loop(kernel, "d1"), SCALAR) is None


def test_vectorize_refusals_leave_the_kernel_unchanged() -> None:
    kernel = _kernel(_kernel_a_module(72, 8))
    _unchanged(lambda k: vectorize(k, "k", 16), kernel, LanesTree,
               "width 16 is wider than the tail's groups of 8 lanes")
    ragged = _kernel(_dot_module(0, 44, 32, 8, SPEC_TREE))
    _unchanged(lambda k: vectorize(k, "k", 8), ragged, RaggedLanes,
               "not a known multiple of the tail's 8 lanes")
    taken = _kernel(_kernel_a_module(72, 8))
    _loop(taken, "d1").properties["name"] = StringAttr("k_groups")
    _unchanged(lambda k: vectorize(k, "k", 8), taken, NameTaken, "'k_groups' already used")


def test_the_groups_loop_is_why_kernel_a_is_privatized_first() -> None:
    """Vectorized, a lanes loop whose trip count leaves groups of its tail
    (K = 72: two blocks of 32, one group of 8) becomes two loops; privatize
    cannot jam the loop around them."""
    kernel = _kernel(_kernel_a_module(72, 8))
    vectorize(kernel, "k", 8)
    _unchanged(lambda k: privatize(k, "k"), kernel, NotPerfectlyNested,
               "loop 'd1' holds another loop, 'k_groups'")


def test_a_lanes_loop_in_a_vectorized_loop_keeps_its_order() -> None:
    """``x @ w`` in kernel A's order with ``w [K, N]`` as stored (its columns
    contiguous): vectorizing the columns (8 per vector) keeps ``k`` a lanes
    loop with its tree and tail, now carrying a vector (each vector lane its
    own 32 partial sums), and the C adds partial vectors in the tree's order."""
    if _missing(8) is not None:
        pytest.skip(_missing(8) or "")
    k, n = 75, 24
    gb = GraphBuilder("columns")
    x = gb.input("x", "f32", ["seq", k])
    gb.output("y", gb.add(g.MatmulOp(x.value, gb.weight("w", [k, n]).value, order="blocks32")))
    module = lower_to_loop(optimize_graph(gb.finish_module()))
    scheduled = _scheduled(module, [sched.Vectorize("d1", 8)])
    nested = _loop(_kernel(scheduled), "k")
    assert nested.lane_order == loop.LaneOrder(32, SPEC_TREE, 8)
    assert str(nested.inits[0].type) == "vector<8xf32>"
    rng = rng_for("blocks32 columns", 0)
    w = random_f32(rng, (k, n), specials=False)
    program = compile_loop(scheduled, {"w": w})
    for seq in (1, 3):
        xs = random_f32(rng, (seq, k), specials=False)
        assert_bitwise(program.run({"x": xs})["y"], kernel_a_dot(xs, w.T), f"seq={seq}")

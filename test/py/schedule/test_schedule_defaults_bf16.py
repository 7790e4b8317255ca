"""Default schedules of bf16 projections (issue 17's decode goals): column
tiles of ``STRIDED_DECODE_COLUMNS`` (8) columns ``n / 8`` apart, all 8 jammed
at one row (16 until session 20: 8 is faster on a Zen 4, no slower on the
Xeon; schedule/defaults.py).

Claims:

* a projection of a bf16 weight whose columns divide by 8 (gate/up: 4
  columns of two sums) gets this candidate first on AVX2 and AVX-512, and it
  applies: at the leftover rows (decode: the one row) each step of ``k``
  loads 8 bf16 vectors, from the weight rows ``t + m * n / 8`` (m = 0..7)
  for tile ``t``, read off the scheduled Loop IR by evaluating its index
  arithmetic here; inside a tile the full row tiles jam the arch's
  ``MATMUL_TILES`` rows with 4 columns of a group, the groups outside the
  rows (a group's weight rows serve every row, as in the plain candidate);
* an f32 weight's projection gets the strided candidate first as well
  (session 20; its rows and bitwise runs: test_schedule_strided_knob.py);
  columns that do not divide into tiles of 8 and the scalar arch keep the
  plain candidates (no strided tile is offered);
* every default candidate (the other tiles' in the full suite) is bitwise the
  unscheduled kernel at 1, 2, 3 and 8 threads, at row counts that leave
  every row tail, and for rows long enough to be swept in row blocks; a
  projection's unscheduled kernel is bitwise ``_fma_reference.lanes_matmul``
  of the widened weight plus the bias (the independent order).
"""

from __future__ import annotations

import numpy as np
import pytest
from _arches import arch_params
from _fma_reference import lanes_matmul
from _numerics import assert_bitwise, random_f32, rng_for
from _schedule_helpers import index_value as _index
from _schedule_helpers import loop_named as _loop
from _schedule_helpers import only_kernel as _kernel
from _schedule_helpers import scheduled_copy as _scheduled
from xdsl.dialects.builtin import ModuleOp

from nanocompile.checkpoint.safetensors import bf16_to_f32, f32_to_bf16
from nanocompile.compiler import compile_loop, lower_to_loop, optimize_graph, schedule_loop
from nanocompile.dialects import loop, sched
from nanocompile.frontend import GraphBuilder
from nanocompile.frontend.composites import linear, silu
from nanocompile.frontend.tensor import Tensor
from nanocompile.schedule.defaults import (
    MATMUL_TILES,
    STRIDED_DECODE_COLUMNS,
    MatmulTile,
    default_schedules,
)
from nanocompile.schedule.primitives import ScheduleError
from nanocompile.targets.arch import AVX2, AVX512, SCALAR, Arch

THREADS = (1, 2, 3, 8)


def projection(k: int, n: int, fmt: str, bias: bool = True) -> ModuleOp:
    """``x @ W.T (+ b)``, ``W: [n, k]`` stored as ``fmt`` (bf16: widened by a cast)."""
    gb = GraphBuilder("proj")
    x = gb.input("x", "f32", ["seq", k])

    def weight(name: str, shape: list[int]) -> Tensor:
        t = gb.weight(name, shape, fmt)
        return t.cast("f32") if fmt == "bf16" else t

    gb.output("y", linear(x, weight("w", [n, k]), weight("b", [n]) if bias else None))
    return lower_to_loop(optimize_graph(gb.finish_module()))


def gate_up(hidden: int, inter: int) -> ModuleOp:
    """``silu(x @ Wg.T) * (x @ Wu.T)`` with bf16 weights: one kernel, two sums per column."""
    gb = GraphBuilder("gate_up")
    x = gb.input("x", "f32", ["seq", hidden])
    wg = gb.weight("g", [inter, hidden], "bf16").cast("f32")
    wu = gb.weight("u", [inter, hidden], "bf16").cast("f32")
    gb.output("y", silu(linear(x, wg)) * linear(x, wu))
    return lower_to_loop(optimize_graph(gb.finish_module()))


def _names(kernel: loop.KernelOp) -> list[str]:
    """The kernel's loop names, outermost first (in walk order)."""
    return [op.loop_name.data for op in kernel.walk() if isinstance(op, loop.ForOp)]


def _strided(directives: list[sched.Directive]) -> bool:
    """The candidate splits the columns by a group of columns times the stride
    (``d1q``, ``d1r``): the strided decode tile's first directive."""
    return any(isinstance(d, sched.Split) and d.outer == "d1q" for d in directives)


def _bf16_weights(shapes: dict[str, tuple[int, ...]], seed: int) -> dict[str, np.ndarray]:
    rng = rng_for("bf16 strided weights", seed)
    return {name: f32_to_bf16(random_f32(rng, shape, specials=False))
            for name, shape in shapes.items()}


# --------------------------------------------------------------------------
# the tile: which weight rows one decode step reads together


def _decode_rows(kernel: loop.KernelOp, tile: int, k: int) -> list[int]:
    """The weight rows the leftover-row loop's ``k_tail`` loads at tile ``tile``
    (loop ``d1o``), its first row and its first step, in load order (each row
    once: AVX2 loads a row's 16 values of the step as two vectors of 8)."""
    tail_name = "d0r_tail" if "d0b" in _names(kernel) else "d0_tail"  # in row blocks
    outer, tail, k_tail = (_loop(kernel, name) for name in ("d1o", tail_name, "k_tail"))
    ivs = {outer.body.block.args[0]: tile, tail.body.block.args[0]: 0,
           k_tail.body.block.args[0]: 0}
    rows = []
    for op in k_tail.body.block.ops:
        if not (isinstance(op, loop.LoadOp) and isinstance(op.ptr.type, loop.PtrType)
                and op.ptr.type.dtype.data == "bf16"):
            continue
        offset = sum(_index(i, ivs) * int(s.evaluate({}))
                     for i, s in zip(op.indices, op.stride_exprs, strict=True))
        assert offset % k in range(0, 16, op.lanes or 1), "the step's first 16 values"
        if offset % k == 0:
            rows.append(offset // k)
    return rows


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=lambda a: a.name)
@pytest.mark.parametrize(("k", "n"), [(64, 64), (32, 48), (2048, 32)])
def test_decode_tile_reads_8_rows_n_over_8_apart(arch: Arch, k: int, n: int) -> None:
    module = projection(k, n, "bf16")
    first = default_schedules(_kernel(module), arch)[0]
    assert _strided(first)
    scheduled, refusals = schedule_loop(module, arch)
    assert not refusals, refusals  # the first candidate applies
    kernel = _kernel(scheduled)
    stride = n // STRIDED_DECODE_COLUMNS
    for tile in (0, stride - 1):
        rows = _decode_rows(kernel, tile, k)
        assert rows == [tile + m * stride for m in range(STRIDED_DECODE_COLUMNS)], tile
    k_tail, k_full = _loop(kernel, "k_tail"), _loop(kernel, "k")
    vectors = 16 // arch.f32_lanes  # an accumulator of 16 lanes: 1 zmm, 2 ymm
    assert len(k_tail.inits) == STRIDED_DECODE_COLUMNS * vectors
    tile_shape = MATMUL_TILES[arch.name]
    assert len(k_full.inits) == tile_shape.rows * tile_shape.columns * vectors
    # inside a tile: the column groups outside the rows, the rows outside the jam
    nest = _names(kernel)
    assert nest.index("d1o") < nest.index("d1q") < nest.index("d0o") < nest.index("k")
    assert ("d0b" in nest) == (k == 2048)  # long rows: in blocks of rows
    assert _loop(kernel, "d1o").parallel is not None
    assert nest.index("k_tail") == len(nest) - 1  # the leftover rows: one loop, 8 columns


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=lambda a: a.name)
def test_an_f32_weight_gets_the_strided_tile_first(arch: Arch) -> None:
    module = projection(64, 64, "f32")
    first = default_schedules(_kernel(module), arch)[0]
    assert _strided(first)
    assert not schedule_loop(module, arch)[1]  # it applies


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=lambda a: a.name)
def test_gate_up_decode_tile_jams_4_columns_of_two_sums(arch: Arch) -> None:
    module = gate_up(32, 80)
    assert _strided(default_schedules(_kernel(module), arch)[0])
    scheduled, refusals = schedule_loop(module, arch)
    assert not refusals, refusals
    kernel = _kernel(scheduled)
    columns = STRIDED_DECODE_COLUMNS // 2
    stride = 80 // columns
    rows = _decode_rows(kernel, 3, 32)
    # per column the gate row and the up row (two weights, the same row index)
    assert sorted(rows) == sorted(2 * [3 + m * stride for m in range(columns)])
    assert len(_loop(kernel, "k_tail").inits) == 2 * columns * (16 // arch.f32_lanes)


@pytest.mark.parametrize(
    ("fmt", "n", "arch"),
    [pytest.param("bf16", 36, AVX512, id="36 columns: no whole tiles of 8"),
     pytest.param("bf16", 8, AVX512, id="8 columns: one tile, no stride"),
     pytest.param("bf16", 64, SCALAR, id="scalar: no vector tile")])
def test_other_projections_keep_the_plain_candidates(fmt: str, n: int, arch: Arch) -> None:
    module = projection(64, n, fmt)
    candidates = default_schedules(_kernel(module), arch)
    assert candidates or arch is SCALAR
    assert not any(_strided(c) for c in candidates)
    if arch.vector:  # the plain row tile is still the first candidate
        assert sched.Split("d1", MATMUL_TILES[arch.name].columns, "d1o", "d1i",
                           peel=True) in candidates[0]


# --------------------------------------------------------------------------
# bitwise: every candidate = the unscheduled kernel


# The tiles whose candidates a case runs: the arch's own (the compiler's) in the
# quick suite, two others in the full suite only: the non-slow suite's 3-minute
# budget (test_schedule_lanes.py and test_schedule_blocks32.py run other
# tiles' candidates quickly)
TILE_SETS = [pytest.param((None,), id="arch tile"),
             pytest.param((MatmulTile(2, 2), MatmulTile(3, 4)), id="other tiles",
                          marks=pytest.mark.slow)]


def _run_all(module: ModuleOp, weights: dict[str, np.ndarray], k: int, arch: Arch,
             seqs: tuple[int, ...], label: str,
             tiles: tuple[MatmulTile | None, ...]) -> int:
    """Every default candidate of ``module``'s kernel on ``arch`` for ``tiles``
    (None: the arch's tile), bitwise the unscheduled kernel at every thread
    count; returns how many candidates applied."""
    reference = compile_loop(module, weights)
    rng = rng_for(f"bf16 strided inputs {label}", k)
    feeds = [{"x": random_f32(rng, (seq, k), specials=False)} for seq in seqs]
    wants = [reference.run(feed)["y"] for feed in feeds]
    seen: list[list[sched.Directive]] = []
    applied = 0
    for tile in tiles:
        for directives in default_schedules(_kernel(module), arch, tile=tile):
            if directives in seen:
                continue
            seen.append(directives)
            try:
                scheduled = _scheduled(module, directives)
            except ScheduleError:
                continue  # a candidate refused (e.g. the row jam without row blocks)
            applied += 1
            program = compile_loop(scheduled, weights)
            for threads in THREADS:
                assert program.set_threads(threads) == threads
                for feed, want in zip(feeds, wants, strict=True):
                    assert_bitwise(program.run(feed)["y"], want,
                                   f"{label} {arch.name} {directives}, seq "
                                   f"{len(feed['x'])}, {threads} threads")
    assert any(_strided(c) for c in seen), label
    return applied


@pytest.mark.parametrize("tiles", TILE_SETS)
@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512), quick_on_host_only=True))
@pytest.mark.parametrize(("k", "n", "bias"), [(64, 64, True), (32, 48, False)])
def test_projection_candidates_are_bitwise(arch: Arch, k: int, n: int, bias: bool,
                                           tiles: tuple[MatmulTile | None, ...]) -> None:
    module = projection(k, n, "bf16", bias)
    shapes = {"w": (n, k), **({"b": (n,)} if bias else {})}
    weights = _bf16_weights(shapes, k)
    assert _run_all(module, weights, k, arch, (1, 2, 7, 13), f"proj {k}x{n}", tiles) >= 3


@pytest.mark.parametrize("tiles", TILE_SETS)
@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512), quick_on_host_only=True))
def test_long_rows_candidates_are_bitwise(arch: Arch,
                                          tiles: tuple[MatmulTile | None, ...]) -> None:
    """K = 2048: rows swept in blocks of 126 (``ROW_BLOCK_BYTES``); 131 rows
    cross a block and leave a row tail in the second."""
    module = projection(2048, 32, "bf16", bias=False)
    weights = _bf16_weights({"w": (32, 2048)}, 2048)
    assert _run_all(module, weights, 2048, arch, (1, 7, 131), "long rows", tiles) >= 3


@pytest.mark.parametrize("tiles", TILE_SETS)
@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512), quick_on_host_only=True))
def test_gate_up_candidates_are_bitwise(arch: Arch,
                                        tiles: tuple[MatmulTile | None, ...]) -> None:
    module = gate_up(32, 80)
    weights = _bf16_weights({"g": (80, 32), "u": (80, 32)}, 80)
    assert _run_all(module, weights, 32, arch, (1, 2, 7), "gate/up 32x80", tiles) >= 3


def test_the_unscheduled_projection_is_the_lanes_order() -> None:
    """The reference of the tests above, against the independent order: 16 FMA
    chains over k and their halving tree, on the widened weight, then the bias."""
    k, n = 64, 48
    weights = _bf16_weights({"w": (n, k), "b": (n,)}, 7)
    program = compile_loop(projection(k, n, "bf16"), weights)
    x = random_f32(rng_for("bf16 strided lanes order", 0), (7, k), specials=False)
    w, b = bf16_to_f32(weights["w"]), bf16_to_f32(weights["b"])
    assert_bitwise(program.run({"x": x})["y"], lanes_matmul(x, w.T) + b, "unscheduled")

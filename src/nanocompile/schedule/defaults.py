"""Default schedules: hand-written per kernel class, each with fallbacks.

``default_schedules(kernel, arch)`` lists candidate schedules, best first;
the ``default-schedule`` pass (passes/default_schedule.py) applies the first
whose preconditions hold (every primitive checks before it changes anything)
and records why the ones before it were refused. A kernel whose candidates
are all refused (or that has none) stays unscheduled.

* **projection matmuls** (rows x columns, each result a lanes loop ``k``
  whose operands are contiguous along ``k``: a row of ``x`` and a row of
  ``W``, read as they lie in memory, no packed copy): a register tile of
  ``rows`` rows x ``columns`` output columns. Split the columns into tiles,
  move the tiles outside the rows (a tile of ``W`` rows is reused by every
  row from cache), split the rows (peeling the leftover rows), vectorize
  ``k`` (its 16 lanes become vectors: one AVX-512 or two AVX2 registers per
  result), privatize ``k`` twice (the ``rows * columns`` accumulators become
  ``k``'s loop-carried vectors: per 16 values of ``k`` the tile loads
  ``rows + columns`` vectors for ``rows * columns`` FMAs) and run the column
  tiles on the pool; at one row (decode) only the leftover-row copy runs,
  ``columns`` results per ``x`` load. Without the row jam if it is refused;
  ``MATMUL_TILES``: the tile per arch, sized to its vector registers. ``k``
  is vectorized by the widest vector its order allows (``k_width``): spec
  §5 kernel A's 32 lanes (``graph.matmul ... order = "blocks32"``; kernel
  B's too) by 8 on AVX2 (its tree adds the four accumulators of 8 lanes
  first), four vectors per sum, so its tile is ``WIDE_TILES``'s; on AVX-512
  by 16 when its lanes loop runs no tail (K a multiple of 32: the model's),
  two zmm per sum (``c0 | c1``, ``c2 | c3``, each halved by
  ``loop.foldhalf`` before the tree's other bits), the tile
  ``PAIR_TILES``'s; its lanes loop may have a tail (the groups of 8 after
  the last block of 32), which vectorized becomes a second loop, so it is
  privatized first and vectorized after. A projection of any
  weight format (f32, bf16, kernel A, kernel B's integer core) first tries
  column tiles of ``STRIDED_DECODE_COLUMNS`` (8) columns ``n / 8`` apart
  whose leftover rows jam all of them (decode streams 8 weight rows from 8
  places at once), the plain row jam inside a tile. A
  projection whose epilogue calls ``exp`` (gate/up's SiLU) first tries each
  of these with ``slp`` on its jammed copies (4 outputs' epilogues as one
  ``vector<4xf32>``: ``_slp_first``);
* **other matmuls** (attention: scores and context): a batched matmul
  (heads x rows x columns, ``_batched``: the scores, ``q . k`` over the head
  dim) whose query heads share KV heads (GQA: the keys read at ``h / g``,
  ``_kv_group``) first gets a register tile across the ``g`` query heads of
  one KV head (the heads split by ``g``, the group jammed into ``k``: one
  load of a key serves ``g`` heads, so each KV head's keys are read once per
  row, not ``g`` times) with the KV heads on the pool; else the register
  tile of ``BATCHED_TILES`` (query rows per key, and at the leftover rows
  keys per row) with the heads on the pool (one parallel loop per launch);
  else vectorize ``k`` when its loads are
  contiguous, else the last result dim (context: ``k`` runs down a column of
  ``V``; each lane of the vector keeps its own 16 partial sums, explicit
  vectors when the positions are symbolic: see ``schedule/vectorize.py``),
  and run the outermost constant-extent result loop on the pool (the heads);
  the context of grouped query heads first gets ``_context_candidates`` (a
  KV head's query heads and the head dim jammed into the sum, which is
  distributed by partial in blocks of positions);
* **elementwise and row kernels**: vectorize the innermost result loop and a
  row's f32 sum (a lanes loop ``k``, like a matmul's: its lanes become vector
  lanes, the same order; other reductions stay scalar: a max's order is
  sequential) and the loop that stores a sum's terms first (``STORED_TERMS``:
  softmax's ``exp``, whose row sum has a symbolic length there, so its lanes
  loop stays scalar). A row kernel whose outermost loop has a constant extent (the
  softmax rows of attention, per head) runs it on the pool, and so does an
  elementwise kernel calling ``cos``/``sin``/``exp`` (the RoPE tables) its
  positions, ``POOL_ROWS`` at least per chunk (``_pool_rows``); the others
  are serial, since at decode sizes their work is below the cost of waking a
  thread.

With a scalar arch (``NANOCOMPILE_ARCH=scalar``) only the pool is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.ir import Block, BlockArgument, SSAValue

from nanocompile.dialects import loop, sched
from nanocompile.schedule.knobs import KNOB_VALUES, ProjectionKnobs
from nanocompile.schedule.primitives import _const
from nanocompile.schedule.privatize import MAX_COPIES
from nanocompile.schedule.vectorize import WIDTHS
from nanocompile.targets.arch import Arch, host_arch


@dataclass(frozen=True)
class MatmulTile:
    """A projection's register tile: ``rows`` rows jammed with ``columns`` output
    columns (``rows * columns`` lanes accumulators of 16 floats each)."""

    rows: int
    columns: int


# Per vector arch; an accumulator is 16 floats (MATMUL_LANES): one zmm, two ymm. A kernel
# of two sums per column (gate/up) jams half the columns. Measured on the Xeon (Sapphire
# Rapids, 1 thread, warm cache, 64 rows, kernel GFLOP/s best/median of 9, all tiles
# alternated in one process; the machine is shared and noisy):
#   avx512      6x4      4x4      5x4      3x8      2x8  (8x3, 6x3, 4x6: the columns do not
#   q_proj    134/124  126/121  131/120   84/76    83/68   divide 896, no row jam: ~43)
#   down_proj 105/66   103/60   104/57    71/66    63/62
#   avx2        3x2      4x2      2x2      2x4      6x2
#   q_proj     65/34    36/35    31/30    71/66    72/38
#   down_proj  31/28    42/30    26/23    32/28    40/34
# (AVX2 code on the Xeon.) On an AVX2-only Zen 3 (EPYC, 16 ymm registers; session 8, 1
# thread, 64 rows, kernel ms median/min of 5, alternated in one process; 2x4 was the
# default until then):
#   avx2 on Zen 3    2x4          2x2          3x2          1x4          4x2
#   q_proj warm     2.48/2.32    1.94/1.77    1.92/1.89    2.40/2.14    2.50/2.42
#   down_proj warm  20.8/13.0    17.1/10.1    17.3/10.3    23.7/15.2    21.0/12.9
#   down bf16 cold  10.8/10.7    8.74/8.52
#   gate/up: 2x4 and 2x2 are the same tile there (2 x 2 columns x 2 sums), 20.4 / 21.5;
#   at 1 row (decode, caches evicted) 2x4 and 2x2 within noise (q 0.34 / 0.38, down
#   1.15 / 1.17, down bf16 0.63 / 0.66).
MATMUL_TILES = {"avx2": MatmulTile(2, 2), "avx512": MatmulTile(6, 4)}

# A sum of four vectors: spec §5 kernel A's order (lanes 32, its tree combining
# vectors of 8 first: 8 lanes on AVX2, and on AVX-512 where the lanes loop has a
# tail of 8, four ymm accumulators per sum; since session 24 AVX-512 takes two zmm
# of 16 otherwise: PAIR_TILES), per
# arch and sums per column (gate/up: 2). The jam's splits need 2 rows and 2
# columns at least; rows x columns x sums x 4 accumulators against 16 ymm
# registers (AVX2) or 32 (AVX-512VL). Measured on the Xeon (1 thread, warm cache,
# kernel ms, min of 15; AVX2 code built for a 16-register CPU, -march=haswell):
#   avx512, 1 sum    2x2           3x2           4x2           2x4
#   896x4864   1 row 0.286  64: 12.8  0.277  10.8  0.287  10.9  0.447  10.6
#   4864x896   1 row 0.334  64: 15.8  0.277  12.5  0.249  12.2  0.231  10.2
#   avx2, 1 sum      2x2           1x2 (no row jam)  2x4
#   896x4864   1 row 0.258  64: 17.6  0.365  23.0     0.265  13.8
#   4864x896   1 row 0.268  64: 14.0  0.390  16.8     0.363  17.6
#   gate/up 896x4864 (2 sums): 2x2 avx512 0.563 / 24.6, 3x2 0.745 / 31.6; avx2 2x2 0.760 / 33.8
WIDE_TILES = {("avx2", 1): MatmulTile(2, 2), ("avx512", 1): MatmulTile(3, 2),
              ("avx2", 2): MatmulTile(2, 2), ("avx512", 2): MatmulTile(2, 2)}


# A sum of two vectors of 16 (spec §5's lanes-32 order, kernels A and B, in zmm on
# AVX-512: accumulators c0 | c1 and c2 | c3), per sums per column: rows x columns
# x sums x 2 zmm accumulators against 32. Measured on the Zen 4 (session 24, 1
# thread, a 128-token prefill, whole model, ms/token): kernel A (gate and up one
# kernel, 2 sums) 3x2 8.43, 2x4 8.54, 4x2 8.89, 2x2 8.86; kernel B (gate and up
# launched apart, 1 sum) 3x2 4.89, 2x4 4.83, 4x2 4.93, 3x3 4.99 (within noise).
PAIR_TILES = {1: MatmulTile(3, 2), 2: MatmulTile(3, 2)}


def _extent(for_op: loop.ForOp) -> int | None:
    """The constant trip count of a loop from 0, if it has one."""
    return _const(for_op.ub)


def _result_nest(kernel: loop.KernelOp) -> list[loop.ForOp]:
    """The loops over the result (``d0``, ``d1``, ...), outermost first (not the
    reductions ``k`` and ``ROW_MAX`` nor a sum's stored terms ``STORED_TERMS``)."""
    nest: list[loop.ForOp] = []
    ops = list(kernel.body.block.ops)
    while True:
        loops = [op for op in ops if isinstance(op, loop.ForOp)
                 and op.loop_name.data not in ("k", ROW_MAX, STORED_TERMS)]
        if len(loops) != 1:
            return nest
        nest.append(loops[0])
        ops = list(loops[0].body.block.ops)


def _has_k(for_op: loop.ForOp) -> bool:
    return any(isinstance(op, loop.ForOp) and op.loop_name.data == "k"
               for op in for_op.body.block.ops)


ROW_BLOCK_BYTES = 1 << 20
"""The rows of ``x`` a projection's column tiles sweep before moving on: about
this many bytes, so they stay in L2 while every column tile reads them (rows
of 4864 floats: 48 rows); without it every column tile re-reads all of ``x``
from L3 once ``x`` outgrows L2."""


def _row_block(for_op: loop.ForOp, rows: int) -> int | None:
    """Rows per block for the lanes loop ``k`` in ``for_op`` (a multiple of
    ``rows``), None when a block would hold more than 128 rows (short rows: the
    whole prompt fits)."""
    (k,) = [op for op in for_op.body.block.ops
            if isinstance(op, loop.ForOp) and op.loop_name.data == "k"]
    extent = _extent(k)
    if not extent:  # symbolic, or an empty sum
        return None
    block = max(rows, ROW_BLOCK_BYTES // (4 * extent) // rows * rows)
    return block if block <= 128 else None


def _k_loop(for_op: loop.ForOp) -> loop.ForOp | None:
    """The lanes loop ``k`` directly in ``for_op``, if there is one."""
    for op in for_op.body.block.ops:
        if isinstance(op, loop.ForOp) and op.loop_name.data == "k" and op.lanes is not None:
            return op
    return None


def k_width(for_op: loop.ForOp, arch: Arch) -> int | None:
    """The widest vector (at most the arch's) whose lanes the order of the lanes
    loop ``k`` in ``for_op`` allows (``LaneOrder.vector_split``; a trip count
    that is a known multiple of its lanes runs no tail, so the tail's groups
    do not bound the width: kernels A and B at K = 896 and 4,864 take vectors
    of 16 on AVX-512); None if none."""
    k = _k_loop(for_op)
    order = None if k is None else k.lane_order
    if k is None or order is None:
        return None
    lo, hi = _const(k.lb), _const(k.ub)
    tail = lo is None or hi is None or (hi - lo) % order.lanes != 0
    return next((w for w in sorted(WIDTHS, reverse=True)
                 if w <= arch.f32_lanes and order.vector_split(w, tail)), None)


def _tail_order(for_op: loop.ForOp) -> bool:
    """The lanes loop ``k`` has a tail: vectorized it may become two loops (the
    groups after the whole blocks), which ``privatize`` cannot jam, so it is
    privatized first."""
    k = _k_loop(for_op)
    order = None if k is None else k.lane_order
    return order is not None and order.tail != order.lanes


def _lanes_sums(for_op: loop.ForOp) -> int:
    """How many values the lanes loop ``k`` in ``for_op`` carries."""
    return max(len(op.inits) for op in for_op.body.block.ops
               if isinstance(op, loop.ForOp) and op.loop_name.data == "k")


def _parallel_outer(nest: list[loop.ForOp], min_chunk: int) -> sched.Parallel | None:
    for outer in nest:
        extent = _extent(outer)
        if extent is not None and extent >= 2:
            grain = min_chunk if extent >= 4 * min_chunk else 1
            return sched.Parallel(outer.loop_name.data, grain)
    return None


def _plain_sum_rows(nest: list[loop.ForOp]) -> sched.Parallel | None:
    """The pool for a plain sum (a ``k`` loop without lanes: kernel B's
    per-block sums of the quantized activations) whose outermost loop is the
    positions (symbolic): the positions in chunks of ``POOL_ROWS`` (decode:
    serial), not the first loop of constant extent inside them, which took a
    parallel region per row (128 in a prefill chunk) and split 28 blocks of
    32 at decode."""
    sums = [op for op in nest[-1].body.block.ops
            if isinstance(op, loop.ForOp) and op.loop_name.data == "k"]
    if sums and all(k.lanes is None for k in sums):
        return _positions_in_chunks(nest)
    return None


def _positions_in_chunks(nest: list[loop.ForOp]) -> sched.Parallel | None:
    """The outermost loop on the pool in chunks of ``POOL_ROWS`` when it is the
    positions (symbolic) and more loops lie inside; else None."""
    if len(nest) >= 2 and _extent(nest[0]) is None:
        return sched.Parallel(nest[0].loop_name.data, POOL_ROWS)
    return None


def _hand_tile(nest: list[loop.ForOp], kw: int, arch: Arch) -> MatmulTile:
    """The hand-written register tile of a projection (``MATMUL_TILES``, or
    ``WIDE_TILES`` for sums of four vectors, ``PAIR_TILES`` for the lanes-32
    order in two vectors of 16; gate/up's columns halved)."""
    sums = _lanes_sums(nest[-1])
    vectors = _k_vectors(nest[-1], kw)
    if vectors == 4:
        return WIDE_TILES[(arch.name, min(sums, 2))]
    if vectors == 2 and kw == 16:  # a lanes-32 order in zmm (kernels A and B)
        return PAIR_TILES[min(sums, 2)]
    jam = MATMUL_TILES[arch.name]
    if sums > 1 and jam.columns >= 4:
        jam = MatmulTile(jam.rows, jam.columns // sums)
    return jam


def _projection_candidates(nest: list[loop.ForOp], kw: int, arch: Arch, min_chunk: int,
                           knobs: ProjectionKnobs, parallel: sched.Parallel | None
                           ) -> list[list[sched.Directive]]:
    """The candidates of a kernel whose last result loop holds the lanes loop
    ``k``, vectorized by ``kw`` (module docstring: projections), at the point
    ``knobs`` of its schedule space (``schedule/knobs.py``)."""
    last = nest[-1].loop_name.data
    sums = _lanes_sums(nest[-1])  # gate/up: two sums per column share x
    wide = _k_vectors(nest[-1], kw) * kw == 32  # spec §5's lanes-32 order (kernels A, B)
    jam = MatmulTile(knobs.rows, knobs.columns)
    cols_o, cols_i = f"{last}o", f"{last}i"
    columns = [sched.Split(last, jam.columns, cols_o, cols_i, peel=True)]
    grain = sched.Parallel(cols_o, max(1, min_chunk // jam.columns))
    vec, priv = sched.Vectorize, sched.Privatize
    jam_first = _tail_order(nest[-1])
    vectorized: list[sched.Directive] = [vec("k", kw), vec("k_tail", kw)]
    candidates: list[list[sched.Directive]] = []
    if len(nest) == 2:  # rows x columns: jam jam.rows rows too (prefill)
        rows = nest[0].loop_name.data
        block = _row_block(nest[-1], jam.rows) if knobs.row_block else None
        decode = max(jam.columns, knobs.decode // sums)
        slp = knobs.slp
        n = _extent(nest[-1])
        if (knobs.strided and decode >= jam.columns and decode % jam.columns == 0
                and n is not None and n % decode == 0 and n // decode >= 2):
            candidates += _slp_first(nest[-1], arch, jam.rows * jam.columns, decode,
                                     _decode_strided(last, rows, block, jam, decode,
                                                     n // decode, kw, min_chunk,
                                                     jam_first), slp)
        if wide and decode % jam.columns == 0:
            candidates += _slp_first(nest[-1], arch, jam.rows * jam.columns, decode,
                                     _decode_wide(last, rows, block, jam, decode, kw,
                                                  min_chunk), slp)
        jammed: list[sched.Directive] = [priv("k"), priv("k"),  # columns, then rows
                                         priv("k_tail")]  # the leftover rows: columns only
        tiles: list[sched.Directive] = [
            *(jammed + vectorized if jam_first else vectorized + jammed), grain]
        plain: list[list[sched.Directive]] = []
        if block is not None:  # long rows: blocks of rows that stay in L2
            plain.append([
                sched.Split(rows, block, f"{rows}b", f"{rows}r"), *columns,
                sched.Reorder((cols_o, f"{rows}r")),
                sched.Split(f"{rows}r", jam.rows, f"{rows}o", f"{rows}i", peel=True),
                *tiles])
        plain.append([
            *columns,
            sched.Reorder((cols_o, rows)),  # a tile of W serves every row
            sched.Split(rows, jam.rows, f"{rows}o", f"{rows}i", peel=True),
            *tiles])
        candidates += _slp_first(nest[-1], arch, jam.rows * jam.columns, jam.columns, plain,
                                 slp)
    one: list[sched.Directive] = [priv("k"), vec("k", kw)] if jam_first \
        else [vec("k", kw), priv("k")]
    candidates.append([*columns, *one, grain])
    if parallel is not None and parallel.loop != last:
        candidates.append([vec("k", kw), parallel])
    return candidates


WEIGHT_PREFETCH_LOCALITY = 2
"""``loop.prefetch``'s locality for a projection's weight rows (the ``prefetch``
knob): x86 ``prefetcht1``, into L2 (the Xeon's C probe, session 31: t0, t1 and
t2 within 1 % of each other)."""


def _read_only_loads(for_op: loop.ForOp) -> Iterator[tuple[loop.LoadOp, int]]:
    """The loads under ``for_op`` of a kernel argument the kernel only reads,
    with that argument's number, in walk order (what a ``sched.prefetch`` may
    stream)."""
    for op in for_op.walk():
        if not isinstance(op, loop.LoadOp) or not isinstance(op.ptr, BlockArgument):
            continue
        kernel = op.ptr.owner.parent_op() if isinstance(op.ptr.owner, Block) else None
        if isinstance(kernel, loop.KernelOp) and kernel.modes[op.ptr.index] == "r":
            yield op, op.ptr.index


def _weight_prefetch(columns: loop.ForOp, ahead: int) -> list[sched.Prefetch]:
    """A ``sched.prefetch`` ``ahead`` elements along ``k`` of the weight: the
    argument the lanes loop ``k`` under ``columns`` loads at both loops'
    indices (a row of W), and only reads; unscoped (``default_schedules``
    scopes it per candidate: ``_rows_tail``). Empty when there is none."""
    k = _k_loop(columns)
    if k is None:
        return []
    column, lane = columns.body.block.args[0], k.body.block.args[0]
    for op, arg in _read_only_loads(k):
        indices = list(op.indices)
        along = [i for i, index in enumerate(indices) if _along_lanes(index, lane)]
        if column in indices and along:
            return [sched.Prefetch(arg, along[0], ahead, WEIGHT_PREFETCH_LOCALITY)]
    return []


def _along_lanes(index: SSAValue, lane: SSAValue) -> bool:
    """``index`` is the lanes loop's index, or it times a constant: spec §5
    kernel B loads its weight's groups of 4 at ``4 * k`` (``loop.dot4``), so a
    prefetch ``ahead`` elements along that index runs ``ahead`` int8 ahead."""
    if index is lane:
        return True
    owner = index.owner
    return (isinstance(owner, arith.MuliOp)
            and any(a is lane and isinstance(b.owner, arith.ConstantOp)
                    for a, b in ((owner.lhs, owner.rhs), (owner.rhs, owner.lhs))))


def _rows_tail(candidate: list[sched.Directive], rows: str | None) -> str | None:
    """The loop a candidate runs its leftover rows in (decode's one row): the
    tail ``<loop>_tail`` of its peeled split of the rows loop ``rows`` (or of
    a block's rows, ``<rows>r``); None when it splits no rows. There the
    weight prefetch goes: decode streams W from DRAM, while the prefill tile
    reuses its tile of W from cache, where prefetches only cost issue slots
    (bf16 prefill at 128 tokens ran 0.94x the hand schedule's speed with
    them in the tile too)."""
    for directive in candidate:
        if (isinstance(directive, sched.Split) and directive.peel and rows is not None
                and directive.loop in (rows, f"{rows}r")):
            return f"{directive.loop}_tail"
    return None


def _calls_exp(result: loop.ForOp) -> bool:
    return any(isinstance(op, xmath.ExpOp) for op in result.walk())


SLP_LANES = 4
"""Copies of an epilogue ``sched.slp`` runs as one vector (``schedule/slp.py``)."""


def _slp_first(result: loop.ForOp, arch: Arch, copies: int, tail_copies: int,
               candidates: list[list[sched.Directive]], slp: bool = True
               ) -> list[list[sched.Directive]]:
    """``candidates`` with, ahead of each, the same with ``sched.slp`` on ``k``
    (``copies`` jammed sums) and ``k_tail`` (``tail_copies``) where there are
    4 copies at least, for a result whose epilogue calls ``exp`` (gate/up's
    SiLU: a scalar ``exp`` and division per output cost about as much as the
    tile's FMAs at K = 896); the plain one stays the fallback. ``slp=False``
    (the knob): ``candidates`` as they are."""
    if not slp or arch.f32_lanes == 1 or not _calls_exp(result):
        return candidates
    loops = [name for name, n in (("k", copies), ("k_tail", tail_copies)) if n >= SLP_LANES]
    if not loops:
        return candidates
    out: list[list[sched.Directive]] = []
    for candidate in candidates:
        *body, last = candidate
        assert isinstance(last, sched.Parallel)
        out += [[*body, *(sched.Slp(name, SLP_LANES) for name in loops), last], candidate]
    return out


DECODE_COLUMNS = 16
"""Output columns (sums) the leftover rows of a four-vector projection jam in
its adjacent wide tile (``strided`` off: the hand point until session 20, a
point of the tuner's space since): at one row (decode) a kernel-A projection
is a read of its int8 weight
through ``vpmovsxbd``, and on the Xeon a single such stream reads DRAM at
5.0 GB/s (a plain 64-bit load stream 9.2, the probe's bandwidth 12.8).
896x4864, weights evicted, kernel ms (medians, 1 / 2 threads): 2 weight rows
at once 0.79 (5.5 GB/s) / 0.44; 16 rows 0.58 (7.5 GB/s) / 0.36 (12.1 GB/s);
32 rows 0.53 / 0.55 (no gain from the second thread)."""


def _decode_wide(last: str, rows: str, block: int | None, jam: MatmulTile, decode: int,
                 kw: int, min_chunk: int) -> list[list[sched.Directive]]:
    """The row jam of ``jam`` inside column tiles of ``decode`` columns whose
    leftover rows jam all ``decode`` columns: tiles of ``decode`` columns
    (``<last>o``) split into ``jam.columns`` (``<last>mo``, ``<last>i``), rows
    inside the tiles, split by ``jam.rows`` (the leftover rows peeled), the
    column pairs outside the row tile; ``k`` jams ``<last>i`` then the rows,
    ``k_tail`` ``<last>i_tail`` then ``<last>mo_tail``; privatized first, then
    vectorized (the tail's groups loop); the tiles on the pool. With long rows
    the same in blocks of rows."""
    tile_o, tile_m, pair, cols_i = f"{last}o", f"{last}m", f"{last}mo", f"{last}i"
    vec, priv, split = sched.Vectorize, sched.Privatize, sched.Split
    columns: list[sched.Directive] = [split(last, decode, tile_o, tile_m, peel=True),
                                      split(tile_m, jam.columns, pair, cols_i, peel=True)]
    body: list[sched.Directive] = [
        priv("k"), priv("k"), priv("k_tail"), priv("k_tail"), vec("k", kw), vec("k_tail", kw),
        sched.Parallel(tile_o, max(1, min_chunk // decode))]

    def rows_in_tiles(inner: str) -> list[sched.Directive]:
        return [sched.Reorder((tile_o, inner)),
                split(inner, jam.rows, f"{rows}o", f"{rows}i", peel=True),
                sched.Reorder((pair, f"{rows}i"))]

    out = [[*columns, *rows_in_tiles(rows), *body]]
    if block is not None:  # long rows: blocks of rows that stay in L2
        out.insert(0, [split(rows, block, f"{rows}b", f"{rows}r"), *columns,
                       *rows_in_tiles(f"{rows}r"), *body])
    return out


STRIDED_DECODE_COLUMNS = 8
"""Output columns (sums) the leftover rows of a projection (any weight format)
jam, ``n / 8`` columns apart (the hand value of ``ProjectionKnobs.decode``;
kernel A's adjacent wide tile, a point the tuner may still pick, has
``DECODE_COLUMNS``)
(``_decode_strided``). At one row (decode) the kernel is a read of the weight,
2 bytes per element widened in registers; with 4 adjacent columns (the
register tile's) it read DRAM at 6-8 GB/s against the probe's 12.8. The
likely reasons (not measured apart): too few lines in flight (a 64-byte line
of bf16 serves two iterations of ``k``), and adjacent rows of 1.75 KiB share
4 KiB pages, where the L2 streamer follows one stream per page. Rows ``n /
8`` apart are 8 streams in 8 places, each running on through the next tile's
row.
Measured on the Xeon (1 thread, weights evicted, kernel ms, medians of 15,
4 adjacent / 16 strided): q_proj 0.214 / 0.141, k_proj 0.038 / 0.024, o_proj
0.243 / 0.148, gate/up (8 columns x 2 sums) 2.23 / 1.53, down_proj 0.91 /
0.83, LM head 32.3 / 21.9 (12.4 GB/s); 8 or 32 columns strided were no
better than 16, 16 adjacent 1.0-1.2x; AVX2 code built for 16 registers
likewise (q_proj 0.31 / 0.19). On an AVX-512 Zen 4 (session 20, `bench
profile`, bf16, decode step kernels alternated 16 / 8 / 4 columns, two runs):
at 1 thread gate/up 19.9 / 16.5 / 15.0 ms, the LM head 13.0 / 11.5 / 10.5,
down 9.6 / 8.7 / 9.6; at 2 threads gate/up 13.0-13.8 / 12.0 / 11.5, the LM
head 8.4-9.0 / 8.0 / 7.6 (the tuner had kept 2-8 columns there, Phase 5): 8,
no worse on the Xeon, is the hand value. Inside a tile the row jam is the
plain candidate's (4 columns by all rows): at 64 rows 1.05-1.16x faster than
the plain candidate (medians of 11), bitwise the same. f32 weights: on the
Xeon the strided tile moved f32 decode and 64 rows by 0.89-1.11x with no
consistent sign (their 4-column decode streamed at 12-14 GB/s there); on
the Zen 4 (session 20, `bench profile --weights f32`, 1 thread, two
alternated runs a side) the 4 adjacent columns read gate/up at ~16 GB/s and
the strided tile (16 columns) takes gate/up 54-57 -> 35-36 ms a step, the
LM head 32-33 -> 22-24, down 16.3-17.2 -> 17.6 (the step ~113 -> ~85 ms; at
2 threads gate/up 30 -> 25-27, the LM head 17.9 -> 16-17), prefill
unchanged: f32 weights are strided too."""


def _decode_strided(last: str, rows: str, block: int | None, jam: MatmulTile, decode: int,
                    stride: int, kw: int, min_chunk: int, jam_first: bool = False
                    ) -> list[list[sched.Directive]]:
    """Column tiles of ``decode`` columns ``stride`` apart (tile ``t`` holds
    columns ``t + m * stride``), whose leftover rows jam all ``decode``
    columns; inside a tile, the row jam of ``jam`` as the plain candidate has it
    (``jam.columns`` columns by all rows). ``last`` splits by ``jam.columns *
    stride`` into ``<last>q`` (the tile's column groups) and ``<last>r``,
    which splits by ``stride`` into ``<last>i`` (a group's columns) and
    ``<last>o`` (the tile), moved outermost; rows inside the tiles, split by
    ``jam.rows`` (the leftover rows peeled), the column groups outside them;
    ``k`` jams ``<last>i`` then the rows, ``k_tail`` ``<last>i_tail`` then
    ``<last>q_tail``; the tiles on the pool. With long rows the same in
    blocks of rows. ``jam_first``: privatized first, then vectorized (a lanes
    loop with a tail: kernel A's four-vector sums)."""
    tile_o, group, rest, cols_i = f"{last}o", f"{last}q", f"{last}r", f"{last}i"
    vec, priv, split = sched.Vectorize, sched.Privatize, sched.Split
    columns: list[sched.Directive] = [split(last, jam.columns * stride, group, rest),
                                      split(rest, stride, cols_i, tile_o),
                                      sched.Reorder((tile_o, group, cols_i))]
    vectorized: list[sched.Directive] = [vec("k", kw), vec("k_tail", kw)]
    jammed: list[sched.Directive] = [priv("k"), priv("k"), priv("k_tail"), priv("k_tail")]
    body: list[sched.Directive] = [
        *(jammed + vectorized if jam_first else vectorized + jammed),
        sched.Parallel(tile_o, max(1, min_chunk // decode))]

    def rows_in_tiles(inner: str) -> list[sched.Directive]:
        return [sched.Reorder((tile_o, inner)),
                split(inner, jam.rows, f"{rows}o", f"{rows}i", peel=True),
                sched.Reorder((group, f"{rows}o", f"{rows}i"))]

    out = [[*columns, *rows_in_tiles(rows), *body]]
    if block is not None:  # long rows: blocks of rows that stay in L2
        out.insert(0, [split(rows, block, f"{rows}b", f"{rows}r"), *columns,
                       *rows_in_tiles(f"{rows}r"), *body])
    return out


def _k_vectors(for_op: loop.ForOp, width: int) -> int:
    """Vectors of ``width`` lanes per sum of the lanes loop ``k`` in ``for_op``."""
    k = _k_loop(for_op)
    assert k is not None
    assert k.lanes is not None
    return k.lanes.data // width


def default_schedules(kernel: loop.KernelOp, arch: Arch | None = None,
                      min_chunk: int = 16, tile: MatmulTile | None = None,
                      knobs: ProjectionKnobs | None = None) -> list[list[sched.Directive]]:
    """Candidate directive lists for ``kernel``, best first (may be empty);
    a projection's at the point ``knobs`` of its schedule space (default:
    ``hand_knobs``, with ``tile`` for its register tile if given)."""
    arch = host_arch() if arch is None else arch
    nest = _result_nest(kernel)
    if not nest:
        return []
    last = nest[-1].loop_name.data
    lanes = arch.f32_lanes
    candidates: list[list[sched.Directive]] = []
    if _has_k(nest[-1]):
        parallel = _plain_sum_rows(nest) or _parallel_outer(nest, min_chunk)
        kw = k_width(nest[-1], arch) if arch.vector else None
        candidates += _attention_candidates(nest, kw, arch)
        if kw is not None and len(nest) == 2 and _dots_int8(nest[-1]) and _row_work(nest[0]):
            candidates += _int8_dot_candidates(nest, kw, min_chunk)
        if kw is not None:
            jam = _hand_tile(nest, kw, arch) if tile is None else tile
            point = _hand_point(jam) if knobs is None else knobs
            candidates += _projection_candidates(nest, kw, arch, min_chunk, point, parallel)
        if (arch.vector and parallel is not None and parallel.loop != last
                and not _short(nest[-1], lanes)):  # a loop shorter than a vector: all tail
            candidates.append([sched.Vectorize(last, lanes), parallel])
        if parallel is not None:
            candidates.append([parallel])
        if knobs is not None and knobs.prefetch:  # last: after every loop directive
            rows = nest[0].loop_name.data if len(nest) == 2 else None
            ahead = _weight_prefetch(nest[-1], knobs.prefetch)  # found once, scoped per candidate
            candidates = [[*c, *(replace(p, within=_rows_tail(c, rows)) for p in ahead)]
                          for c in candidates]
    else:
        candidates += _row_candidates(kernel, nest, arch)
    return candidates


def _row_candidates(kernel: loop.KernelOp, nest: list[loop.ForOp], arch: Arch
                    ) -> list[list[sched.Directive]]:
    """Candidates for a kernel without a matmul (a row's sum or max, softmax, an
    elementwise kernel), best first."""
    last = nest[-1].loop_name.data
    lanes = arch.f32_lanes
    candidates: list[list[sched.Directive]] = []
    reductions = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
                  and op.loop_name.data in ("k", ROW_MAX)]
    pool = _pool_rows(kernel, nest, reductions)
    if arch.vector and len(reductions) == 1 and reductions[0].lanes is not None:
        # a row's sum (rms_norm): its lanes as vectors too
        candidates.append([sched.Vectorize(last, lanes), sched.Vectorize("k", lanes), *pool])
    if arch.vector and any(isinstance(op, loop.ForOp) and op.loop_name.data == STORED_TERMS
                           for op in kernel.walk()):  # softmax: its exp loop too
        if any(op.loop_name.data == ROW_MAX for op in reductions):  # its max and sum
            candidates.append([sched.Vectorize(last, lanes), sched.Vectorize(ROW_MAX, lanes),
                               sched.Vectorize(STORED_TERMS, lanes),
                               sched.Vectorize("k", lanes), *pool])
            candidates.append([sched.Vectorize(last, lanes), sched.Vectorize(ROW_MAX, lanes),
                               sched.Vectorize(STORED_TERMS, lanes), *pool])
        candidates.append([sched.Vectorize(last, lanes), sched.Vectorize(STORED_TERMS, lanes),
                           *pool])
    if (arch.vector and [op.loop_name.data for op in reductions] == [ROW_MAX]
            and _short(nest[-1], lanes)):
        # a lone row max under a result loop shorter than a vector (kernel B's
        # per-block max |x|: 32 elements per block, one result each): the max's
        # lanes, exact with its fallback (ROW_MAX), not the short result loop
        candidates.append([sched.Vectorize(ROW_MAX, lanes), *pool])
    if arch.vector:
        candidates.append([sched.Vectorize(last, lanes), *pool])
    if pool:
        candidates.append(pool)
    return candidates


def _short(for_op: loop.ForOp, lanes: int) -> bool:
    """The loop has a constant trip count below ``lanes`` (vectorized, it would be
    all tail: every iteration scalar)."""
    extent = _extent(for_op)
    return extent is not None and extent < lanes


def _projection(kernel: loop.KernelOp, arch: Arch) -> tuple[list[loop.ForOp], int] | None:
    """The result nest and ``k``'s vector width of a projection whose schedule
    the knobs decide (rows x columns, a lanes loop ``k`` that vectorizes on
    ``arch``, not a batched matmul nor kernel B with row work), else None."""
    nest = _result_nest(kernel)
    if len(nest) != 2 or not _has_k(nest[-1]) or not arch.vector:
        return None
    kw = k_width(nest[-1], arch)
    if kw is None or (_dots_int8(nest[-1]) and _row_work(nest[0])):
        return None
    return nest, kw


def hand_knobs(kernel: loop.KernelOp, arch: Arch) -> ProjectionKnobs | None:
    """The hand-written point of ``kernel``'s schedule space (what
    ``default_schedules`` uses without ``knobs``), None when ``kernel`` is not a
    projection the knobs schedule."""
    found = _projection(kernel, arch)
    if found is None:
        return None
    jam = _hand_tile(*found, arch)
    return _hand_point(jam)


def _hand_point(jam: MatmulTile) -> ProjectionKnobs:
    """The hand knobs of a projection with register tile ``jam``: a strided
    decode tile of ``STRIDED_DECODE_COLUMNS`` columns, for every weight format
    (bf16 since issue 17; f32 and spec §5 kernel A since session 20: on a Zen 4
    their adjacent decode rows read DRAM at a third of the probe's bandwidth,
    and kernel A's decode at 1 / 2 threads went 81.8 / 42.5 -> 29.5 / 20.9
    ms/token, `bench run`, 4 rounds; the Xeon measured kernel A's adjacent
    tile only)."""
    return ProjectionKnobs(jam.rows, jam.columns, STRIDED_DECODE_COLUMNS, strided=True)


def knob_space(kernel: loop.KernelOp, arch: Arch) -> dict[str, tuple[int | bool, ...]]:
    """Per knob, the values worth trying on ``kernel`` (``KNOB_VALUES``; a knob
    that changes nothing here keeps its hand value alone: ``slp`` without
    ``exp``; ``decode`` and ``strided`` matter for every projection: the decode
    tile of any weight format may be strided); empty when ``kernel`` is not a
    projection.

    ``row_block`` keeps its hand value too, always: what it buys is prompts
    whose rows of ``x`` outgrow L2, longer than the tuner's 64-row prefill on
    a machine with a 2 MiB L2, so the search can see only its cost there (a
    remainder block re-reading the weights). On the Xeon (session 31) the
    search kept f32 down without it (1.06x at 64 rows), and that program's
    prefill of 128 tokens ran the down projection 1.44x slower (405 against
    281 ms, ``bench profile``): x at 128 rows of 4,864 floats is 2.5 MB."""
    found = _projection(kernel, arch)
    hand = hand_knobs(kernel, arch)
    if found is None or hand is None:
        return {}
    nest = found[0]
    result = nest[-1]
    matters = {"rows": True, "columns": True, "decode": True, "strided": True,
               "row_block": False, "slp": _calls_exp(result),
               "prefetch": bool(_weight_prefetch(result, 1))}
    return {name: values if matters[name] else (getattr(hand, name),)
            for name, values in KNOB_VALUES.items()}


INT8_DOT_COLUMNS = 16
"""Output columns spec §5 kernel B's projection (``graph.matmul_i8``: its lanes
loop ``k`` holds ``loop.dot4``) jams at each row (``_int8_dot_candidates``): at
decode, one read of ``x``'s quantized row serves that many weight rows, read
as 16 streams at once (kernel A's ``DECODE_COLUMNS``, for the same reason)."""


def _dots_int8(for_op: loop.ForOp) -> bool:
    """The lanes loop ``k`` in ``for_op`` is kernel B's (it holds ``loop.dot4``)."""
    k = _k_loop(for_op)
    return k is not None and any(isinstance(op, loop.DotI8Op) for op in k.walk())


def _row_work(rows: loop.ForOp) -> bool:
    """The rows loop holds ops besides its column loop (a row-invariant value
    computed in the kernel, once per row before the columns): ``reorder`` cannot
    move the columns outside it, so the projection candidates' row jams are
    refused. The compiler's kernel B never has one: ``fuse`` stores its
    row-invariant ``128 * off`` (the offset's row kernel computes it), so its
    projections get the projection candidates (rows inside column tiles, 3 rows
    x 2 columns jammed, the leftover rows, all of them at decode, 16 columns);
    this is the fallback for a kernel written otherwise."""
    return any(not isinstance(op, loop.ForOp | loop.YieldOp) for op in rows.body.block.ops)


def _int8_dot_candidates(nest: list[loop.ForOp], kw: int, min_chunk: int
                         ) -> list[list[sched.Directive]]:
    """Kernel B's projection with a row-invariant op in its rows loop
    (``_row_work``: the rows cannot move inside a column tile): per row, tiles
    of ``INT8_DOT_COLUMNS`` columns (``<last>o``, on the pool) split by 2
    (``<last>mo``, ``<last>i``); ``k`` jams both (all the tile's columns),
    privatized first, then vectorized by ``kw`` (its tail's groups loop). Every
    row streams the whole weight. A kernel without such ops (the compiler's
    kernel B: ``fuse`` stores ``128 * off``) gets the projection candidates
    (kernel A's row jam inside strided decode tiles of
    ``STRIDED_DECODE_COLUMNS`` columns since session 20, the adjacent 16 of
    ``DECODE_COLUMNS`` before: decode 2.2x faster on a Zen 4)."""
    last = nest[-1].loop_name.data
    tile_o, tile_m, pair, cols_i = f"{last}o", f"{last}m", f"{last}mo", f"{last}i"
    vec, priv, split = sched.Vectorize, sched.Privatize, sched.Split
    decode = INT8_DOT_COLUMNS
    return [[split(last, decode, tile_o, tile_m, peel=True),
             split(tile_m, 2, pair, cols_i, peel=True),
             priv("k"), priv("k"), vec("k", kw),
             sched.Parallel(tile_o, max(1, min_chunk // decode))]]


ROW_MAX = "m"
"""The loop of a row's max (the lowering's ``MAX_LOOP``: softmax's), vectorized
with its exact fallback (``schedule/vectorize.py``): a sequential chain of
``nc_maxf`` per element otherwise, the softmax's largest cost at long context.
Measured on the Zen 4 (session 13, 1 thread, decode after 4,096): see
``bench profile``'s softmax kernel in the README."""

STORED_TERMS = "e"
"""The loop of a row kernel that stores its sum's terms first (the lowering's
``STORED_TERMS_LOOP``: softmax's ``exp``), vectorized like the result loop."""

POOL_ROWS = 16
"""Rows per chunk (the grain) when a kernel runs its positions on the pool (an
elementwise kernel calling libm per element, the RoPE tables' ``cos``/``sin``;
since session 23 a row kernel or a plain sum over the positions too): below
that many rows (decode: one) it runs serially, the pool not woken."""


def _pool_rows(kernel: loop.KernelOp, nest: list[loop.ForOp],
               reductions: list[loop.ForOp]) -> list[sched.Directive]:
    """The pool for a kernel without a matmul: a row kernel (a max or a sum per
    row) whose outermost loop has a constant extent of 2 or more (the
    softmax rows of attention: per head) runs it on the pool, a chunk of
    heads each, and one whose outermost loop is the positions (symbolic) with
    more loops inside (kernel B's per-block max of ``|x|``, rms_norm) runs the
    positions in chunks of ``POOL_ROWS`` (decode: serial); an elementwise
    kernel calling ``cos``/``sin``/``exp`` per
    element runs its outermost loop (the positions) in chunks of
    ``POOL_ROWS``; any other kernel stays serial (empty)."""
    outer = nest[0]
    extent = _extent(outer)
    if reductions:
        positions = _positions_in_chunks(nest)
        if positions is not None:
            return [positions]
        return [sched.Parallel(outer.loop_name.data)] if extent is not None and extent >= 2 \
            else []
    if len(nest) >= 2 and any(isinstance(op, xmath.CosOp | xmath.SinOp | xmath.ExpOp)
                              for op in kernel.walk()):
        return [sched.Parallel(outer.loop_name.data, POOL_ROWS)]
    return []


BATCHED_TILES = {"avx2": MatmulTile(2, 4), "avx512": MatmulTile(4, 4)}
"""A batched matmul's register tiles (attention's scores): ``rows`` query rows
jammed per key (prefill: per group of ``k`` one vector of the key serves
``rows`` rows), and at the leftover rows (decode: the one row) ``columns``
keys jammed per row. Measured on the Xeon (AVX-512, 1 thread, kernel us, min
of 7, 14 heads, head dim 64; the machine shared and noisy): seq 128 x ctx
1024: columns only (4) 14248, rows 2 13878, rows 4 8940, rows 6 8241, rows 4
with 8 columns 8893; 37 x 300: 869, 814, 574, 605, 558; decode 1 x 1024:
124, 111, 112, 124, 114. AVX2: two ymm per 16-lane sum, so the rows of the
arch's projection tile (2)."""


def _batched(nest: list[loop.ForOp]) -> bool:
    """Three result loops, the outermost of constant extent 2 or more (heads),
    the lanes loop ``k`` of a constant trip count in the last (attention's
    scores: ``q . k`` over the head dim, per head, query row and key)."""
    extent, k = _extent(nest[0]), _k_loop(nest[-1])
    return (len(nest) == 3 and extent is not None and extent >= 2 and k is not None
            and _extent(k) is not None)


def _kv_group(heads: loop.ForOp) -> int | None:
    """The query heads per KV head of attention's scores (GQA: the keys are read
    at ``h / g``, the heads loop ``h`` from 0 a multiple of ``g``), if there are
    several."""
    extent = _extent(heads)
    for op in heads.walk():
        if isinstance(op, arith.DivSIOp) and op.lhs is heads.iv:
            g = _const(op.rhs)
            if extent is not None and g is not None and 2 <= g <= MAX_COPIES \
                    and extent % g == 0:
                return g
    return None


def _attention_candidates(nest: list[loop.ForOp], kw: int | None, arch: Arch
                          ) -> list[list[sched.Directive]]:
    """The scores' (``_batched_candidates``, with ``k`` vectorized by ``kw``)
    and the context's (``_context_candidates``) first candidates on a vector
    arch, each prefetching its stream of keys or values (``_prefetch_rows``);
    nothing for another kernel."""
    if kw is not None and _batched(nest):
        found = _batched_candidates(nest, kw, arch)
        rows = _prefetch_rows(nest[-1])
    elif arch.vector:
        found = _context_candidates(nest, arch.f32_lanes)
        k = _k_loop(nest[-1])
        rows = _prefetch_rows(k) if k is not None else []
    else:
        return []
    return [[*c, *rows] for c in found]


PREFETCH_AHEAD = 512
"""How far ahead (in positions) attention's scores and context prefetch their
rows of keys and values into the second-level cache (``sched.prefetch``,
locality 2): 512 rows of 256 bytes, 128 KiB. Measured on the AMD EPYC Zen 4
(session 16, tuning harness, one layer at 4,096 positions, 1 thread, the KV
cache read from memory: 40 copies; kernel us, medians of 41, each against the
kernel without prefetches in the same library, C edited by hand): context
(locality 2) 16 ahead -4 %, 64 -11 to -13 %, 256 -25 %, 512 -21 to -29 %,
1,024 -21 to -26 %, 2,048 -2 % (locality 1: 512 -27 %, 2,048 -23 %; locality
3: -7 to -12 % at 16-64 ahead, 9-26 % slower at 256-512); scores (locality 2)
64 -3 to -8 %, 256 -8 to -10 %, 512 -15 to -20 %, 1,024 -5 %; with the rows in
the cache within 3 %. Then the compiler's own prefetches (7 variants in one
library, 101 rounds): all of 256-1,024 ahead and locality 1-2 within 5 % of
each other, context -28 to -30 %, scores -9 to -13 %; the scores alone, 151
rounds: -9 / -10 % in two runs, while four runs of 41 read +3, +17, +8 and
-10 % (the scores are as much compute as memory). Not measured on the Xeon
or the Zen 3."""

PREFETCH_LOCALITY = 2
"""``loop.prefetch``'s locality for attention's streams (x86 ``prefetcht1``)."""


def _prefetch_rows(positions: loop.ForOp) -> list[sched.Directive]:
    """A ``sched.prefetch`` of the argument ``positions`` streams by rows: one
    the kernel only reads, loaded at ``positions``' index in a dimension other
    than its last (a row of keys or values; the probabilities, indexed by the
    positions in their last dimension, stream along the row they lie in).
    Empty when there is none."""
    iv = positions.body.block.args[0]
    for op, arg in _read_only_loads(positions):
        dims = [d for d, index in enumerate(op.indices[:-1]) if index is iv]
        if dims:
            return [sched.Prefetch(arg, dims[0], PREFETCH_AHEAD, PREFETCH_LOCALITY)]
    return []


CONTEXT_BLOCK = 16
"""Groups of the context's positions (16 positions each: a vector's explicit
partials) per block of its distributed sum (``_context_candidates``): the
lane loops of one block read its rows of values (16 x 16 positions x a head
dim of 64 floats = 64 KiB) one after another, so the first brings them into
the cache for the other 15. Measured on the Zen 4 (session 13, 1 thread, 14
heads, 2 KV heads, one row; candidates alternated in one library, kernel us,
median of 31, the values read from memory (40 copies) / from the cache):
decode after 4,096 positions: undistributed (the kernel before) 432 / 274,
distributed without blocks 359 / 80, blocks of 8 227 / 117, of 16 235 / 95,
of 32 366 / 97; with AVX2 code (8 lanes, 56 accumulators per loop) 543 / 279
before, 326 / 161 in blocks of 16."""


def _context_candidates(nest: list[loop.ForOp], lanes: int) -> list[list[sched.Directive]]:
    """Attention's context (heads x rows x head dim, its sum over the positions
    of symbolic length, the values read at KV head ``h / g``): the heads split
    by ``g``, the head dim vectorized and jammed into the sum, then the ``g``
    query heads of one KV head jammed too (a row of values loaded once for all
    of them); the sum's loop (groups of 16 positions, 16 explicit partials per
    vector) split into blocks of ``CONTEXT_BLOCK`` groups and distributed
    (``ki_g0`` .. ``ki_g15``, one per partial: ``g`` x head dim / lanes
    accumulators each, 28 zmm on AVX-512), the KV heads on the pool. Then the
    same without the jam of the heads and the distribution (each query head
    in turn). Nothing for another kernel."""
    group = _kv_group(nest[0]) if len(nest) == 3 and not _batched(nest) else None
    if group is None:
        return []
    heads, rows, last = (op.loop_name.data for op in nest)
    head: list[sched.Directive] = [
        sched.Split(heads, group, f"{heads}o", f"{heads}i"),
        sched.Reorder((f"{heads}o", rows, f"{heads}i", last)),
        sched.Vectorize(last, lanes), sched.Privatize("k")]
    pool = sched.Parallel(f"{heads}o")
    return [[*head, sched.Privatize("k"), sched.Split("k", CONTEXT_BLOCK, "kb", "ki"),
             sched.Distribute("ki"), pool],
            [*head, pool]]


def _batched_candidates(nest: list[loop.ForOp], kw: int, arch: Arch
                        ) -> list[list[sched.Directive]]:
    """A batched matmul (``BATCHED_TILES``), the heads on the pool (one
    parallel loop per launch, where a tile loop inside the heads would wake
    the pool per head and row). First the rows tile: the rows split by
    ``rows`` (``<rows>o``, ``<rows>i``, the leftover rows peeled), the
    columns moved between them and ``k`` jamming ``<rows>i``; the leftover
    rows' columns (``<cols>_tail``) split by ``columns`` and jammed into
    ``k_tail`` (their leftover columns one by one: ``k_tail_tail``). Then,
    without the rows tile, the columns tile alone."""
    heads, rows, cols = (op.loop_name.data for op in nest)
    tile = BATCHED_TILES[arch.name]
    vec, priv, split = sched.Vectorize, sched.Privatize, sched.Split
    pool = sched.Parallel(heads)
    tail = f"{cols}_tail"
    group = _kv_group(nest[0])
    gqa: list[list[sched.Directive]] = [] if group is None else [
        [split(heads, group, f"{heads}o", f"{heads}i"),
         sched.Reorder((f"{heads}o", rows, cols, f"{heads}i")), vec("k", kw), priv("k"),
         sched.Parallel(f"{heads}o")]]
    return [*gqa,
        [split(rows, tile.rows, f"{rows}o", f"{rows}i", peel=True),
         sched.Reorder((f"{rows}o", cols, f"{rows}i")), vec("k", kw), priv("k"),
         split(tail, tile.columns, f"{tail}o", f"{tail}i", peel=True),
         vec("k_tail", kw), priv("k_tail"), vec("k_tail_tail", kw), pool],
        [split(cols, tile.columns, f"{cols}o", f"{cols}i", peel=True),
         vec("k", kw), vec("k_tail", kw), priv("k"), pool]]


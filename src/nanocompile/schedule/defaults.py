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
  ``MATMUL_TILES``: the tile per arch, sized to its vector registers;
* **other matmuls** (attention: scores and context): vectorize ``k`` when its
  loads are contiguous (scores: ``q . k`` over the head dim), else the last
  result dim (context: ``k`` runs down a column of ``V``; each lane of the
  vector keeps its own 16 partial sums), and run the outermost
  constant-extent result loop on the pool (the heads);
* **elementwise and row kernels**: vectorize the innermost result loop and a
  row's f32 sum (a lanes loop ``k``, like a matmul's: its lanes become vector
  lanes, the same order; other reductions stay scalar: a max's order is
  sequential); serial, since at decode sizes their work is below the cost of
  waking a thread.

With a scalar arch (``NANOCOMPILE_ARCH=scalar``) only the pool is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from nanocompile.dialects import loop, sched
from nanocompile.schedule.primitives import _const
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
# (AVX2 code on the Xeon, not on an AVX2-only Zen 3: its tile is still to be measured there.)
MATMUL_TILES = {"avx2": MatmulTile(2, 4), "avx512": MatmulTile(6, 4)}


def _extent(for_op: loop.ForOp) -> int | None:
    """The constant trip count of a loop from 0, if it has one."""
    return _const(for_op.ub)


def _result_nest(kernel: loop.KernelOp) -> list[loop.ForOp]:
    """The loops over the result (``d0``, ``d1``, ...), outermost first."""
    nest: list[loop.ForOp] = []
    ops = list(kernel.body.block.ops)
    while True:
        loops = [op for op in ops if isinstance(op, loop.ForOp) and op.loop_name.data != "k"]
        if len(loops) != 1:
            return nest
        nest.append(loops[0])
        ops = list(loops[0].body.block.ops)


def _has_k(for_op: loop.ForOp) -> bool:
    return any(isinstance(op, loop.ForOp) and op.loop_name.data == "k"
               for op in for_op.body.block.ops)


def _lanes_k(for_op: loop.ForOp) -> bool:
    """``for_op`` holds the lanes loop ``k`` (a matmul's reduction)."""
    return any(isinstance(op, loop.ForOp) and op.loop_name.data == "k" and op.lanes is not None
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


def default_schedules(kernel: loop.KernelOp, arch: Arch | None = None,
                      min_chunk: int = 16, tile: MatmulTile | None = None
                      ) -> list[list[sched.Directive]]:
    """Candidate directive lists for ``kernel``, best first (may be empty);
    ``tile``: the projections' register tile (default: the arch's in
    ``MATMUL_TILES``)."""
    arch = host_arch() if arch is None else arch
    nest = _result_nest(kernel)
    if not nest:
        return []
    last = nest[-1].loop_name.data
    lanes = arch.f32_lanes
    candidates: list[list[sched.Directive]] = []
    if _has_k(nest[-1]):
        parallel = _parallel_outer(nest, min_chunk)
        if arch.vector and _lanes_k(nest[-1]):
            jam = MATMUL_TILES[arch.name] if tile is None else tile
            sums = _lanes_sums(nest[-1])  # gate/up: two sums per column share x
            if sums > 1 and tile is None and jam.columns >= 4:
                jam = MatmulTile(jam.rows, jam.columns // sums)
            cols_o, cols_i = f"{last}o", f"{last}i"
            columns = [sched.Split(last, jam.columns, cols_o, cols_i, peel=True)]
            grain = sched.Parallel(cols_o, max(1, min_chunk // jam.columns))
            if len(nest) == 2:  # rows x columns: jam jam.rows rows too (prefill)
                rows = nest[0].loop_name.data
                tiles: list[sched.Directive] = [
                    sched.Vectorize("k", lanes), sched.Vectorize("k_tail", lanes),
                    sched.Privatize("k"), sched.Privatize("k"),  # columns, then rows
                    sched.Privatize("k_tail"),  # the leftover rows: columns only
                    grain,
                ]
                block = _row_block(nest[-1], jam.rows)
                if block is not None:  # long rows: blocks of rows that stay in L2
                    candidates.append([
                        sched.Split(rows, block, f"{rows}b", f"{rows}r"), *columns,
                        sched.Reorder((cols_o, f"{rows}r")),
                        sched.Split(f"{rows}r", jam.rows, f"{rows}o", f"{rows}i", peel=True),
                        *tiles])
                candidates.append([
                    *columns,
                    sched.Reorder((cols_o, rows)),  # a tile of W serves every row
                    sched.Split(rows, jam.rows, f"{rows}o", f"{rows}i", peel=True),
                    *tiles])
            candidates.append([*columns, sched.Vectorize("k", lanes), sched.Privatize("k"),
                               grain])
            if parallel is not None and parallel.loop != last:
                candidates.append([sched.Vectorize("k", lanes), parallel])
        if arch.vector and parallel is not None and parallel.loop != last:
            candidates.append([sched.Vectorize(last, lanes), parallel])
        if parallel is not None:
            candidates.append([parallel])
    elif arch.vector:
        reductions = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
                      and op.loop_name.data == "k"]
        if len(reductions) == 1 and reductions[0].lanes is not None:
            # a row's sum (rms_norm): its lanes as vectors too
            candidates.append([sched.Vectorize(last, lanes), sched.Vectorize("k", lanes)])
        candidates.append([sched.Vectorize(last, lanes)])
    return candidates


"""Default schedules: hand-written per kernel class, each with fallbacks.

``default_schedules(kernel, arch)`` lists candidate schedules, best first;
the ``default-schedule`` pass (passes/default_schedule.py) applies the first
whose preconditions hold (every primitive checks before it changes anything)
and records why the ones before it were refused. A kernel whose candidates
are all refused (or that has none) stays unscheduled.

* **projection matmuls** (a ``k`` loop reading weights through ``W.T``): pack
  every weight argument in tiles of one vector, split the output columns into
  tiles of ``column_vectors`` vectors, vectorize the tile, privatize ``k``
  (the tile's accumulators become ``k``'s loop-carried vectors: registers),
  move the tiles outside the rows (a weight tile is reused by every row from
  cache), jam ``rows`` rows as well (peeling the leftover row), and run the
  tiles on the pool; without the row jam if it is refused (``MATMUL_TILES``:
  the tile per arch, sized to its vector registers);
* **other matmuls** (attention: scores and context): vectorize the last
  result dim when its loads are contiguous, and run the outermost
  constant-extent result loop on the pool (the heads);
* **elementwise and row kernels**: vectorize the innermost result loop
  (reductions stay scalar: a sum's order is the result's bits); serial, since
  at decode sizes their work is below the cost of waking a thread.

With a scalar arch (``NANOCOMPILE_ARCH=scalar``) only the pool is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from nanocompile.dialects import loop, sched
from nanocompile.schedule.primitives import _const
from nanocompile.targets.arch import Arch, host_arch


@dataclass(frozen=True)
class MatmulTile:
    """A projection's register tile: ``rows`` rows jammed with ``column_vectors``
    vectors of output columns (``rows * column_vectors`` accumulators)."""

    rows: int
    column_vectors: int


# Per vector arch. AVX2 (16 ymm): 3 rows x 4 vectors = 12 accumulators + 4 weight
# vectors fit. bench matmul, 64 rows: 2 rows gave gate/up 26 ms and down 14 ms, 3 rows 20
# and 9 ms; 4 and 6 rows were tried on a noisy machine and were not clearly better.
# AVX-512 (32 zmm): 6 rows x 4 vectors = 24 accumulators + 4 weight vectors + a row
# broadcast. bench matmul, 1 thread, kernel time / NumPy's in the same run (the machine's
# speed drifted by ~35 % between runs; NumPy's work is fixed), medians of 6 cold-cache runs
# (5-8 rounds each) | 3 warm-cache runs (25 rounds), 64 rows:
#                 avx2 3x4     avx512 3x4   avx512 4x4   avx512 6x4
#   q_proj        1.23 | 1.33  1.07 | 1.18  0.94 | 1.07  0.92 | 1.02
#   gate_up       1.54 | 1.45  1.27 | 1.22  1.19 | 1.22  1.19 | 1.19
#   down_proj     1.37 | 1.45  1.35 | 1.36  1.20 | 1.21  1.14 | 1.13
# (5x4 and 6x2, 3 cold runs: 0.96/1.18/1.18 and 1.09/1.15/1.23); at 1 row the tile does
# not matter (0.72-0.95 for every avx512 tile, 0.76-0.95 for avx2).
MATMUL_TILES = {"avx2": MatmulTile(3, 4), "avx512": MatmulTile(6, 4)}


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


def _weight_args(kernel: loop.KernelOp) -> list[int]:
    """Arguments read as a transposed constant matrix ``[K, N]``, strides ``[1, K]``."""
    args = []
    for i, (fp, mode) in enumerate(zip(kernel.footprints.data, kernel.modes, strict=True)):
        dims, strides = fp.dims, fp.stride_exprs
        if mode == "r" and len(dims) == 2 and all(d.is_const for d in dims) \
                and strides[0] == 1 and strides[1] == dims[0]:
            args.append(i)
    return args


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
        weights = _weight_args(kernel)
        if arch.vector and weights:
            jam = MATMUL_TILES[arch.name] if tile is None else tile
            width = lanes * jam.column_vectors  # (gate/up, two weights: twice the
            # accumulators, a few spill; on AVX2 half the columns measured no faster at 64
            # rows and slower at 1)
            packed = [sched.Pack(a, lanes) for a in weights]
            columns = [sched.Split(last, width, f"{last}o", f"{last}i")]
            grain = sched.Parallel(f"{last}o", max(1, min_chunk // jam.column_vectors))
            if len(nest) == 2:  # rows x columns: jam jam.rows rows too (prefill)
                rows = nest[0].loop_name.data
                candidates.append([
                    *packed, *columns,
                    sched.Reorder((f"{last}o", rows)),  # a weight tile serves every row
                    sched.Split(rows, jam.rows, f"{rows}o", f"{rows}i", peel=True),
                    sched.Vectorize(f"{last}i", lanes),
                    sched.Privatize("k"), sched.Privatize("k"),  # columns, then rows
                    sched.Vectorize(f"{last}i_tail", lanes),  # the leftover row
                    sched.Privatize("k_tail"),
                    grain,
                ])
            candidates.append([*packed, *columns, sched.Vectorize(f"{last}i", lanes),
                               sched.Privatize("k"), grain])
        parallel = _parallel_outer(nest, min_chunk)
        if arch.vector and parallel is not None and parallel.loop != last:
            candidates.append([sched.Vectorize(last, lanes), parallel])
        if parallel is not None:
            candidates.append([parallel])
    elif arch.vector:
        candidates.append([sched.Vectorize(last, lanes)])
    return candidates


"""Default schedules: hand-written per kernel class, each with fallbacks.

``default_schedules(kernel, arch)`` lists candidate schedules, best first;
the compiler applies the first whose preconditions hold (every primitive
checks before it changes anything) and records why the others were refused.
The last candidate is always the unscheduled kernel.

* **projection matmuls** (a ``k`` loop reading weights through ``W.T``): pack
  every weight argument in tiles of one vector, split the output columns into
  tiles of ``COLUMN_VECTORS`` vectors, vectorize the tile, privatize ``k``
  (the tile's accumulators become ``k``'s loop-carried vectors: registers),
  move the tiles outside the rows (a weight tile is reused by every row from
  cache), jam ``ROWS`` rows as well (peeling the leftover row), and run the
  tiles on the pool; without the row jam if it is refused;
* **other matmuls** (attention: scores and context): vectorize the last
  result dim when its loads are contiguous, and run the outermost
  constant-extent result loop on the pool (the heads);
* **elementwise and row kernels**: vectorize the innermost result loop
  (reductions stay scalar: a sum's order is the result's bits); serial, since
  at decode sizes their work is below the cost of waking a thread.

With a scalar arch (``NANOCOMPILE_ARCH=scalar``) only the pool is used.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from nanocompile.dialects import loop, sched
from nanocompile.schedule.primitives import _const
from nanocompile.targets.arch import Arch, host_arch

COLUMN_VECTORS = 4  # vectors of output columns per k loop
ROWS = 3  # rows jammed with them: 12 accumulators + 3 row broadcasts fit AVX2's 16 ymm
# registers (gcc -march=native on an AVX-512 machine has 32). bench matmul, 64 rows: 2 rows
# gave gate/up 26 ms and down 14 ms, 3 rows 20 and 9 ms; 4 and 6 rows were tried on a noisy
# machine and were not clearly better.


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


def _parallel_outer(nest: list[loop.ForOp], min_chunk: int) -> list[sched.Directive]:
    for outer in nest:
        extent = _extent(outer)
        if extent is not None and extent >= 2:
            grain = min_chunk if extent >= 4 * min_chunk else 1
            return [sched.Parallel(outer.loop_name.data, grain)]
    return []


def default_schedules(kernel: loop.KernelOp, arch: Arch | None = None,
                      min_chunk: int = 16) -> list[list[sched.Directive]]:
    """Candidate directive lists for ``kernel``, best first (may be empty)."""
    arch = host_arch() if arch is None else arch
    nest = _result_nest(kernel)
    if not nest:
        return []
    last = nest[-1].loop_name.data
    lanes = arch.f32_lanes
    candidates: list[list[sched.Directive]] = []
    if _has_k(nest[-1]):
        weights = _weight_args(kernel)
        tile = lanes * COLUMN_VECTORS  # (gate/up, two weights: 24 accumulators, a few
        # spill; half the columns measured no faster at 64 rows and slower at 1)
        if arch.vector and weights:
            packed = [sched.Pack(a, lanes) for a in weights]
            columns = [sched.Split(last, tile, f"{last}o", f"{last}i")]
            grain = sched.Parallel(f"{last}o", max(1, min_chunk // COLUMN_VECTORS))
            if len(nest) == 2:  # rows x columns: jam ROWS rows too (prefill)
                rows = nest[0].loop_name.data
                candidates.append([
                    *packed, *columns,
                    sched.Reorder((f"{last}o", rows)),  # a weight tile serves every row
                    sched.Split(rows, ROWS, f"{rows}o", f"{rows}i", peel=True),
                    sched.Vectorize(f"{last}i", lanes),
                    sched.Privatize("k"), sched.Privatize("k"),  # columns, then rows
                    sched.Vectorize(f"{last}i_tail", lanes),  # the leftover row
                    sched.Privatize("k_tail"),
                    grain,
                ])
            candidates.append([*packed, *columns, sched.Vectorize(f"{last}i", lanes),
                               sched.Privatize("k"), grain])
        parallel = _parallel_outer(nest, min_chunk)
        if arch.vector and parallel and parallel[0].loop != last:
            candidates.append([sched.Vectorize(last, lanes), *parallel])
        if parallel:
            candidates.append(parallel)
    elif arch.vector:
        candidates.append([sched.Vectorize(last, lanes)])
    return candidates


def add_default_schedules(module: ModuleOp) -> int:
    """Append the first default ``sched.schedule`` of every kernel that has one
    (for ``nc-opt``: the compiler itself tries the fallbacks in order)."""
    added = 0
    for kernel in [op for op in module.ops if isinstance(op, loop.KernelOp)]:
        candidates = default_schedules(kernel)
        if candidates:
            module.body.block.add_op(
                sched.ScheduleOp.from_directives(kernel.sym_name.data, candidates[0]))
            added += 1
    return added

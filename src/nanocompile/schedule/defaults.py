"""Default schedules: which loops of the compiled kernels run on the pool.

Phase 4 so far parallelizes the kernels that do the work: every kernel with
a reduction loop ``k`` under its result loops (the matmuls: projections, LM
head, attention). The loop chosen is the outermost result loop with a
constant extent (``n`` of a projection, the 14 heads of attention), in chunks
of at least ``min_chunk`` iterations so small kernels stay serial. Elementwise
and row kernels stay serial: at decode sizes their work is below the cost of
waking a thread.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from nanocompile.dialects import loop, sched
from nanocompile.symbolic import Expr


def _extent(for_op: loop.ForOp) -> Expr | None:
    """The constant trip count of a loop from 0, if it has one."""
    ub = for_op.ub.owner
    value = getattr(ub, "value", None)
    if value is None or not hasattr(value, "value"):
        return None
    return Expr.const(int(value.value.data))


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


def default_schedule(kernel: loop.KernelOp, min_chunk: int = 16) -> sched.ScheduleOp | None:
    """A ``sched.schedule`` for ``kernel``, or None to leave it serial: matmul
    kernels (a ``k`` loop inside the innermost result loop) run their
    outermost constant-extent result loop on the pool."""
    nest = _result_nest(kernel)
    if not nest or not any(isinstance(op, loop.ForOp) and op.loop_name.data == "k"
                           for op in nest[-1].body.block.ops):
        return None
    for outer in nest:
        extent = _extent(outer)
        if extent is not None and extent.const_value >= 2:
            grain = min_chunk if extent.const_value >= 4 * min_chunk else 1
            return sched.ScheduleOp.from_directives(
                kernel.sym_name.data, [sched.Parallel(outer.loop_name.data, grain)])
    return None


def add_default_schedules(module: ModuleOp) -> int:
    """Append a default ``sched.schedule`` for every kernel that gets one."""
    added = 0
    for kernel in [op for op in module.ops if isinstance(op, loop.KernelOp)]:
        schedule = default_schedule(kernel)
        if schedule is not None:
            module.body.block.add_op(schedule)
            added += 1
    return added

"""Schedule primitives (phase 4). Implemented so far: ``parallel``.

Every primitive checks all of its preconditions before it changes anything:
a primitive that raises has left the kernel exactly as it was.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import Operation, SSAValue

from nanocompile.dialects import loop


class ScheduleError(ValueError):
    """A schedule primitive's precondition does not hold (the IR is unchanged)."""


class LoopNotFound(ScheduleError):
    """Precondition 1: exactly one loop of the kernel has the name."""


class CarriesValues(ScheduleError):
    """The loop has loop-carried values (its iterations depend on each other)."""


class NestedParallel(ScheduleError):
    """The loop is inside a parallel loop, or contains one."""


class SharedWrite(ScheduleError):
    """A store in the loop does not depend on its index: iterations would write
    the same elements."""


def find_loop(kernel: loop.KernelOp, name: str) -> loop.ForOp:
    found = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
             and op.loop_name.data == name]
    if len(found) != 1:
        names = sorted({op.loop_name.data for op in kernel.walk() if isinstance(op, loop.ForOp)})
        raise LoopNotFound(f"@{kernel.sym_name.data}: {len(found)} loops named '{name}' "
                           f"(loops: {', '.join(names)})")
    return found[0]


def _depends_on(value: SSAValue, iv: SSAValue, seen: set[SSAValue] | None = None) -> bool:
    if value is iv:
        return True
    owner = value.owner
    if not isinstance(owner, Operation) or isinstance(owner, loop.ForOp):
        return False
    seen = set() if seen is None else seen
    if value in seen:
        return False
    seen.add(value)
    return any(_depends_on(v, iv, seen) for v in owner.operands)


def parallel(kernel: loop.KernelOp, name: str, grain: int = 1) -> None:
    """Run the iterations of loop ``name`` on the thread pool, in contiguous chunks.

    Preconditions:
    1. the kernel has exactly one loop named ``name`` (``LoopNotFound``);
    2. the loop carries no values (``CarriesValues``): iterations are independent;
    3. no enclosing or nested loop is already parallel (``NestedParallel``);
    4. every store inside depends on the loop's index through a non-zero stride
       (``SharedWrite``): each iteration writes its own elements.
    ``grain`` >= 1 is the fewest iterations worth a chunk (``ScheduleError``).

    Bitwise: each iteration computes exactly what it did serially; no sum is
    split between threads, so any thread count gives the same bits.
    """
    if grain < 1:
        raise ScheduleError(f"parallel '{name}': grain must be >= 1, got {grain}")
    target = find_loop(kernel, name)
    if target.inits:
        raise CarriesValues(f"parallel '{name}': the loop carries {len(target.inits)} "
                            "value(s) from one iteration to the next")
    outer = target.parent_op()
    while outer is not None and outer is not kernel:
        if isinstance(outer, loop.ForOp) and outer.parallel is not None:
            raise NestedParallel(f"parallel '{name}': enclosing loop "
                                 f"'{outer.loop_name.data}' is already parallel")
        outer = outer.parent_op()
    for op in target.body.walk():
        if isinstance(op, loop.ForOp) and op.parallel is not None:
            raise NestedParallel(f"parallel '{name}': nested loop '{op.loop_name.data}' "
                                 "is already parallel")
        if isinstance(op, loop.StoreOp) and not any(
                stride != 0 and _depends_on(idx, target.iv)
                for idx, stride in zip(op.indices, op.stride_exprs, strict=True)):
            raise SharedWrite(f"parallel '{name}': a store does not depend on the "
                              "loop's index")
    target.properties["parallel"] = IntAttr(grain)

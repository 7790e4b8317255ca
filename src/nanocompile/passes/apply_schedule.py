"""``apply-schedule``: apply every ``sched.schedule`` to the kernel it names.

Each schedule is applied to a copy of its kernel, directive by directive,
through the primitives of ``nanocompile.schedule.primitives``; the copy
replaces the kernel only when every directive succeeded, and the schedule op
is erased. A directive whose precondition fails stops the pass with the
primitive's reason and leaves the module unchanged. Schedules never change
what a kernel computes, only how its loops run: scheduled kernels are
bitwise equal to unscheduled ones (each primitive's docstring says why).

Implemented so far: ``parallel``, ``split``, ``reorder``, ``unroll``. The
other directives (``privatize``, ``vectorize``, ``pack``) parse and verify
but are refused here as not implemented yet (phase 4 in progress).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nanocompile.dialects import loop, sched
from nanocompile.schedule.primitives import (
    ScheduleError,
    parallel,
    reorder,
    split,
    unroll,
)
from nanocompile.schedule.vectorize import vectorize


class NotImplementedDirective(ScheduleError):
    """A directive of the Schedule dialect that no primitive implements yet."""


def apply_directives(kernel: loop.KernelOp, schedule: sched.ScheduleOp) -> loop.KernelOp:
    """A scheduled copy of ``kernel`` (the original is untouched); raises
    ``ScheduleError`` naming the first directive that cannot be applied."""
    copy = kernel.clone()
    for directive in schedule.directives():
        if isinstance(directive, sched.Parallel):
            parallel(copy, directive.loop, directive.grain)
        elif isinstance(directive, sched.Split):
            split(copy, directive.loop, directive.factor, directive.outer, directive.inner)
        elif isinstance(directive, sched.Reorder):
            reorder(copy, list(directive.loops))
        elif isinstance(directive, sched.Unroll):
            unroll(copy, directive.loop, directive.factor)
        elif isinstance(directive, sched.Vectorize):
            vectorize(copy, directive.loop, directive.width)
        else:
            raise NotImplementedDirective(
                f"@{kernel.sym_name.data}: {type(directive).__name__.lower()} is not "
                "implemented yet")
    return copy


def apply_schedules(module: ModuleOp) -> int:
    """Apply and erase every schedule in ``module``; returns how many were applied."""
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, loop.KernelOp)}
    schedules = [op for op in module.ops if isinstance(op, sched.ScheduleOp)]
    replacements = []
    for schedule in schedules:
        kernel = kernels.get(schedule.kernel_name)
        if kernel is None:
            raise ScheduleError(f"sched.schedule @{schedule.kernel_name}: no loop.kernel "
                                "of that name")
        replacements.append((kernel, apply_directives(kernel, schedule)))
    for kernel, scheduled in replacements:
        module.body.block.insert_op_before(scheduled, kernel)
        kernel.detach()
        kernel.erase()
    for schedule in schedules:
        schedule.detach()
        schedule.erase()
    return len(schedules)


@dataclass(frozen=True)
class ApplySchedulePass(ModulePass):
    """Apply the module's ``sched.schedule`` ops to their kernels."""

    name = "apply-schedule"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            apply_schedules(op)
        except ScheduleError as e:
            raise PassFailedException(f"apply-schedule: {e}") from None

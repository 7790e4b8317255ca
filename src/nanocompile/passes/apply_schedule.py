"""``apply-schedule``: apply every ``sched.schedule`` to the kernel it names.

Each schedule is applied to a copy of its kernel, directive by directive,
through the primitives of ``nanocompile.schedule.primitives``; the copy
replaces the kernel only when every directive succeeded, and the schedule op
is erased. A directive whose precondition fails stops the pass with the
primitive's reason and leaves the module unchanged. Schedules never change
what a kernel computes, only how its loops run: scheduled kernels are
bitwise equal to unscheduled ones (each primitive's docstring says why).

Every directive of the Schedule dialect has its primitive: ``split``,
``reorder``, ``unroll``, ``parallel`` (schedule/primitives.py), ``vectorize``,
``privatize``, ``distribute``, ``slp``, ``pack`` and ``prefetch`` (one module
each). ``pack`` also rewrites the
program's launches, after every directive of the schedule has succeeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nanocompile.dialects import loop, sched
from nanocompile.ir.checks import where
from nanocompile.schedule.distribute import distribute
from nanocompile.schedule.pack import PackPlan, check_pack, pack_kernel, pack_program
from nanocompile.schedule.prefetch import prefetch
from nanocompile.schedule.primitives import (
    ScheduleError,
    parallel,
    reorder,
    split,
    unroll,
)
from nanocompile.schedule.privatize import privatize
from nanocompile.schedule.slp import slp
from nanocompile.schedule.vectorize import vectorize


class DirectiveError(ScheduleError):
    """A directive of a list whose primitive refused: ``index`` is its place in
    the list, ``cause`` the primitive's error (whose message this is)."""

    def __init__(self, index: int, cause: ScheduleError) -> None:
        super().__init__(str(cause))
        self.index = index
        self.cause = cause


def apply_directives(kernel: loop.KernelOp, directives: Sequence[sched.Directive],
                     module: ModuleOp | None = None,
                     packs: list[PackPlan] | None = None) -> loop.KernelOp:
    """A copy of ``kernel`` with ``directives`` applied in order (the original is
    untouched); raises ``DirectiveError`` for the first directive that cannot
    be applied.

    ``pack`` also changes the program's launches: it needs ``module``, and
    appends its plan to ``packs`` for the caller to apply with
    ``pack_program`` once the copy replaces the kernel (``replace_kernel``)."""
    copy = kernel.clone()
    for index, directive in enumerate(directives):
        try:
            _apply_one(copy, directive, kernel, module, packs)
        except ScheduleError as e:
            raise DirectiveError(index, e) from e
    return copy


def _apply_one(copy: loop.KernelOp, directive: sched.Directive, kernel: loop.KernelOp,
               module: ModuleOp | None, packs: list[PackPlan] | None) -> None:
    if isinstance(directive, sched.Parallel):
        parallel(copy, directive.loop, directive.grain)
    elif isinstance(directive, sched.Split):
        split(copy, directive.loop, directive.factor, directive.outer, directive.inner,
              directive.peel)
    elif isinstance(directive, sched.Reorder):
        reorder(copy, list(directive.loops))
    elif isinstance(directive, sched.Unroll):
        unroll(copy, directive.loop, directive.factor)
    elif isinstance(directive, sched.Vectorize):
        vectorize(copy, directive.loop, directive.width)
    elif isinstance(directive, sched.Privatize):
        privatize(copy, directive.loop)
    elif isinstance(directive, sched.Distribute):
        distribute(copy, directive.loop)
    elif isinstance(directive, sched.Slp):
        slp(copy, directive.loop, directive.width)
    elif isinstance(directive, sched.Prefetch):
        prefetch(copy, directive.arg, directive.dim, directive.ahead, directive.locality,
                 directive.within)
    elif isinstance(directive, sched.Pack):
        if module is None or packs is None:
            raise ScheduleError(f"@{kernel.sym_name.data}: pack rewrites the program's "
                                "launches, so it needs the module")
        plan = check_pack(module, copy, directive.arg, directive.tile)
        pack_kernel(copy, plan)
        packs.append(plan)
    else:
        raise AssertionError(f"no primitive for {directive}")


def replace_kernel(module: ModuleOp, kernel: loop.KernelOp, scheduled: loop.KernelOp,
                   packs: list[PackPlan]) -> None:
    """Put ``scheduled`` in place of ``kernel`` and apply its packs to the program."""
    module.body.block.insert_op_before(scheduled, kernel)
    kernel.detach()
    kernel.erase()
    for plan in packs:
        pack_program(module, plan)


def apply_schedules(module: ModuleOp) -> int:
    """Apply and erase every schedule in ``module``; returns how many were applied.

    Raises ``PassFailedException`` naming the schedule or directive that
    failed (with its ``file:line:col`` when it was parsed from text); the
    module is then unchanged."""
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, loop.KernelOp)}
    schedules = [op for op in module.ops if isinstance(op, sched.ScheduleOp)]
    replacements = []
    for schedule in schedules:
        kernel = kernels.get(schedule.kernel_name)
        if kernel is None:
            raise PassFailedException(f"{where(schedule)}apply-schedule: sched.schedule "
                                      f"@{schedule.kernel_name}: no loop.kernel of that name")
        packs: list[PackPlan] = []
        try:
            scheduled = apply_directives(kernel, schedule.directives(), module, packs)
        except DirectiveError as e:
            op = schedule.directive_ops()[e.index]
            raise PassFailedException(f"{where(op)}apply-schedule: {e}") from None
        replacements.append((kernel, scheduled, packs))
    for kernel, scheduled, packs in replacements:
        replace_kernel(module, kernel, scheduled, packs)
    for schedule in schedules:
        schedule.detach()
        schedule.erase()
    return len(schedules)


@dataclass(frozen=True)
class ApplySchedulePass(ModulePass):
    """Apply the module's ``sched.schedule`` ops to their kernels."""

    name = "apply-schedule"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        apply_schedules(op)

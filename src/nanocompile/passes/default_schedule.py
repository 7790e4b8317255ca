"""``default-schedule``: give every kernel the first default schedule that applies.

For each ``loop.kernel``, in module order, the candidate schedules of
``schedule.defaults.default_schedules`` (best first) are tried through
``apply-schedule``'s applier: the first candidate whose every directive
applies replaces the kernel (its packs rewrite the program's launches); a
refused candidate changes nothing, and its reason is kept. A kernel whose
candidates are all refused, or that has none, stays as lowered: unlike
``apply-schedule``, whose schedules a user wrote, this pass never fails on a
kernel. Schedules never change a result bit (each primitive says why).

Option ``arch``: ``host`` (the default: ``NANOCOMPILE_ARCH``, else the
widest arch this CPU runs), or an arch by name (``scalar``, ``avx2``,
``avx512``), which is not checked against this CPU: the pass only writes IR.

    nc-opt -p lower-graph-to-loop,default-schedule{arch=avx2} -t c

What was decided per kernel (``KernelSchedule``: the candidates, the chosen
one, why the ones before it were refused) is what ``schedule_kernels``
returns; the compile driver keeps it, shows the chosen ``sched.schedule`` ops
next to their kernels (``attach_schedules``: ``nanocompile dump --stage
scheduled``) and the refusals on request (``explain``: ``--explain``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from nanocompile.dialects import loop, sched
from nanocompile.passes.apply_schedule import apply_directives, replace_kernel
from nanocompile.schedule.defaults import default_schedules
from nanocompile.schedule.knobs import ProjectionKnobs
from nanocompile.schedule.pack import PackPlan
from nanocompile.schedule.primitives import ScheduleError
from nanocompile.targets.arch import ARCHES, Arch, ArchError, host_arch

HOST = "host"
ARCH_NAMES = (HOST, *ARCHES)


def check_arch_name(name: str) -> None:
    """Raises ``ArchError`` unless ``name`` is a value of the ``arch`` option."""
    if name not in ARCH_NAMES:
        raise ArchError(f"default-schedule: expected arch {', '.join(ARCH_NAMES)}, "
                        f"got {name!r}")


def arch_option(name: str) -> Arch:
    """The arch the option ``arch=name`` asks for (``host``: ``host_arch()``)."""
    check_arch_name(name)
    return host_arch() if name == HOST else ARCHES[name]


@dataclass(frozen=True)
class KernelSchedule:
    """What ``default-schedule`` tried on one kernel: its candidates, best first,
    and why each candidate before the chosen one was refused."""

    kernel: str
    candidates: tuple[tuple[sched.Directive, ...], ...]
    refusals: tuple[str, ...]

    @property
    def chosen(self) -> tuple[sched.Directive, ...] | None:
        """The candidate applied (the one after the refused), None if none was."""
        index = len(self.refusals)
        return self.candidates[index] if index < len(self.candidates) else None


KnobsFor = Callable[[loop.KernelOp], ProjectionKnobs | None]
"""Where a kernel's knobs come from (the tuner's records): None for the hand-written ones."""


def schedule_kernels(module: ModuleOp, arch: Arch, knobs_for: KnobsFor | None = None
                     ) -> list[KernelSchedule]:
    """Apply to each kernel of ``module`` its first default schedule that applies
    (in place); what was decided, kernel by kernel in module order. With
    ``knobs_for``, a projection it gives knobs for is scheduled at that point
    of its space (``schedule/knobs.py``; the tuner's winners), then, should all
    of those be refused, by the hand-written candidates."""
    decisions = []
    for kernel in [op for op in module.ops if isinstance(op, loop.KernelOp)]:
        name = kernel.sym_name.data
        knobs = None if knobs_for is None else knobs_for(kernel)
        found = default_schedules(kernel, arch)
        if knobs is not None:
            found = default_schedules(kernel, arch, knobs=knobs) + found
        candidates = tuple(tuple(c) for c in found)
        refusals: list[str] = []
        for directives in candidates:
            packs: list[PackPlan] = []
            try:
                scheduled = apply_directives(kernel, directives, module, packs)
            except ScheduleError as e:
                refusals.append(str(e))
                continue
            replace_kernel(module, kernel, scheduled, packs)
            break
        decisions.append(KernelSchedule(name, candidates, tuple(refusals)))
    return decisions


def attach_schedules(module: ModuleOp, decisions: Sequence[KernelSchedule]) -> None:
    """Put each chosen schedule, as a ``sched.schedule``, right after its kernel in
    ``module`` (the unscheduled Loop IR): ``apply-schedule`` then builds what
    ``default-schedule`` did."""
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, loop.KernelOp)}
    for decision in decisions:
        if decision.chosen is not None:
            schedule = sched.ScheduleOp.from_directives(decision.kernel, decision.chosen)
            module.body.block.insert_op_after(schedule, kernels[decision.kernel])


def explain(decisions: Sequence[KernelSchedule]) -> list[str]:
    """Per kernel, ``//`` comment lines: each refused candidate (as the
    ``sched.schedule`` it would have been) with its reason, then which
    candidate was chosen."""
    lines = []
    for d in decisions:
        head = f"// @{d.kernel}:"
        total = len(d.candidates)
        if not total:
            lines.append(f"{head} no candidate schedule")
            continue
        for index, reason in enumerate(d.refusals):
            lines.append(f"{head} candidate {index + 1} of {total} refused: {reason}")
            schedule = sched.ScheduleOp.from_directives(d.kernel, d.candidates[index])
            lines += [f"//   {line}" for line in str(schedule).splitlines()]
        if d.chosen is None:
            lines.append(f"{head} every candidate refused: the kernel stays as lowered")
        else:
            lines.append(f"{head} candidate {len(d.refusals) + 1} of {total} chosen "
                         "(the sched.schedule after the kernel)")
    return lines


@dataclass(frozen=True)
class DefaultSchedulePass(ModulePass):
    """Schedule every kernel with its first default schedule that applies."""

    name = "default-schedule"

    arch: str = HOST
    """``host``, ``scalar``, ``avx2`` or ``avx512``."""

    def __post_init__(self) -> None:
        check_arch_name(self.arch)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        schedule_kernels(op, arch_option(self.arch))

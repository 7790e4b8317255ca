"""The compile driver: Graph IR -> optimized Graph IR -> Loop IR -> C -> library.

Each stage is a function on ``ModuleOp`` objects (never text: parsing is the
slow part of xDSL), verifies its result, and can be stopped after:

    graph = build_qwen2(cfg)
    fused = optimize_graph(graph)             # stage "fused": cse, fold, dce, fuse
    loop_ir = lower_to_loop(fused)            # stage "loop"
    c_source = emit_c(loop_ir)                # stage "c"
    program = compile_program(graph, weights)  # all of it, cached by gcc

``compile_program(..., fuse=False)`` is the phase-2 baseline: one kernel per
primitive; ``schedule=True`` adds phase 4's default schedules (so far: the
matmul kernels run on the persistent thread pool). Fused, unfused and
scheduled programs compute the same bits.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from nanocompile.backend.runtime import CompiledProgram
from nanocompile.ir.checks import check_dominance
from nanocompile.passes.lower_graph_to_loop import LowerGraphToLoopPass
from nanocompile.targets.arch import Arch
from nanocompile.targets.c import CEmitter

STAGES = ("graph", "fused", "loop", "scheduled", "c")
GRAPH_PIPELINE = ("cse", "fold-constants", "dce", "fuse")


@dataclass
class CompileTimes:
    """Seconds spent per stage of the last compile."""

    lower: float = 0.0
    emit: float = 0.0
    gcc: float = 0.0
    cache_hit: bool = False


def optimize_graph(graph: ModuleOp, passes: tuple[str, ...] = GRAPH_PIPELINE) -> ModuleOp:
    """A verified copy of ``graph`` after the graph passes (the input is unchanged)."""
    from nanocompile.passes import get_all_passes

    registry = get_all_passes()
    module = graph.clone()
    for name in passes:
        registry[name]()().apply(Context(), module)
    module.verify()
    check_dominance(module)
    return module


def lower_to_loop(graph: ModuleOp) -> ModuleOp:
    """A verified Loop-IR copy of ``graph`` (the input is left unchanged)."""
    module = graph.clone()
    LowerGraphToLoopPass().apply(Context(), module)
    module.verify()
    check_dominance(module)
    return module


def schedule_loop(loop_module: ModuleOp, arch: Arch | None = None
                  ) -> tuple[ModuleOp, list[str]]:
    """A copy of ``loop_module`` with the default schedules applied (phase 4), and
    why candidates were refused. Each kernel gets the first of its candidate
    schedules whose preconditions hold (``schedule.defaults``), else stays as
    it is. Schedules never change a result bit."""
    from nanocompile.dialects import loop, sched
    from nanocompile.passes.apply_schedule import apply_directives, replace_kernel
    from nanocompile.schedule.defaults import default_schedules
    from nanocompile.schedule.pack import PackPlan
    from nanocompile.schedule.primitives import ScheduleError

    module = loop_module.clone()
    fallbacks = []
    for kernel in [op for op in module.ops if isinstance(op, loop.KernelOp)]:
        for directives in default_schedules(kernel, arch):
            schedule = sched.ScheduleOp.from_directives(kernel.sym_name.data, directives)
            packs: list[PackPlan] = []
            try:
                scheduled = apply_directives(kernel, schedule, module, packs)
            except ScheduleError as e:
                fallbacks.append(str(e))
                continue
            replace_kernel(module, kernel, scheduled, packs)
            break
    module.verify()
    return module, fallbacks


def emit_c(loop_module: ModuleOp) -> str:
    return CEmitter().emit_module(loop_module)


def compile_program(graph: ModuleOp, weights: Mapping[str, np.ndarray], *,
                    fuse: bool = True, schedule: bool = False, sanitize: bool | None = None,
                    times: CompileTimes | None = None) -> CompiledProgram:
    """Optimize (unless ``fuse=False``), lower, schedule (with ``schedule=True``:
    the matmuls on the thread pool), emit, build (or find in the cache) and load
    ``graph``."""
    t0 = time.perf_counter()
    loop_module = lower_to_loop(optimize_graph(graph) if fuse else graph)
    if schedule:
        loop_module, _ = schedule_loop(loop_module)
    t1 = time.perf_counter()
    program = CompiledProgram(loop_module, weights, sanitize=sanitize)
    t2 = time.perf_counter()
    if times is not None:
        times.lower = t1 - t0
        times.gcc = program.library.compile_seconds
        times.emit = (t2 - t1) - times.gcc
        times.cache_hit = program.library.cache_hit
    return program

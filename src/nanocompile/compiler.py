"""The compile driver: it owns the stages, runs them in order and verifies each.

    graph --graph passes--> fused --lower-graph-to-loop--> loop
          --default-schedule--> scheduled --C target--> c --gcc, ctypes--> CompiledProgram

The stages (``STAGES``), each a ``ModuleOp`` but the last:

* ``graph``: the Graph IR as the frontend built it;
* ``fused``: after the graph passes ``cse, fold-constants, dce, fuse``
  (``fuse=False``: the graph as it is, phase 2's one kernel per primitive),
  led by the weight format's pass when ``CompileOptions.quantize`` names one
  (``quantize-int8{...}``: spec §5's int8 projections, ``int8_pass``), which
  runs with ``fuse=False`` too;
* ``loop``: the Loop IR (``lower-graph-to-loop``);
* ``scheduled``: the Loop IR with, after each kernel, the ``sched.schedule``
  the ``default-schedule`` pass chose for it (``schedule=False``: none);
  ``nc-opt -p apply-schedule`` turns it into the scheduled kernels. Why
  candidates were refused is in ``Pipeline.decisions``;
* ``c``: the C of the scheduled kernels (``Pipeline.kernels``).

There is one way to run them, ``Pipeline`` (``run_to`` for one stage in one
call); everything that needs a stage's IR (``api.ir_text``, ``nanocompile
dump``, ``tools/pipeline_doc.py``, ``compile_program``, bench) goes through
it. Each stage runs once, on a copy of the stage before, and is verified
(``verify`` and dominance) before anything reads it:

    pipeline = Pipeline(build_qwen2(cfg))
    loop_ir = pipeline.run_to("loop")           # a ModuleOp
    c_source = pipeline.run_to("c")             # str: continues from "loop"
    fused = run_to(graph, "fused")              # one stage in one call
    program = compile_program(graph, weights)   # all of it, built by gcc (cached), loaded

``CompileOptions`` says what the stages do; its defaults are the full
compiler the CLI and the API run (f32 or bf16 weights as the graph declares
them; ``quantize=int8_pass()`` for int8). ``quantize_graph`` is the graph
after the weight format's pass alone (what the interpreter runs).
``compile_program(..., fuse=False)`` is the phase-2 baseline;
``schedule=True`` adds phase 4's default schedules (vector loops, packed
weights, the thread pool; off by default there). Fused,
unfused and scheduled programs compute the same bits. ``compile_loop`` builds
a Loop-IR module as it is; ``optimize_graph``, ``lower_to_loop``,
``schedule_loop`` and ``emit_c`` are the stage functions, for tests that want
one stage of a module they built.

A warm start runs none of the stages: ``compile_program`` keys the program
cache (``backend.program_cache``) by the graph's text, the options, the
resolved arch and the compiler's source, and on a hit reads back the C and
what the runtime needs (``runtime.ProgramSpec``); only the key (printing the
graph), the library lookup and binding the weights remain. The Loop IR of
such a program is rebuilt by the pipeline when something asks for it
(``CompiledProgram.program``: the compile report's work counts, tests).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from nanocompile.backend import program_cache, tuning_records
from nanocompile.backend.runtime import CompiledProgram
from nanocompile.checkpoint.jsonfile import parse_json
from nanocompile.dialects import loop
from nanocompile.ir.checks import check_dominance
from nanocompile.passes.default_schedule import (
    HOST,
    KernelSchedule,
    arch_option,
    attach_schedules,
    check_arch_name,
    explain,
    schedule_kernels,
)
from nanocompile.passes.lower_graph_to_loop import LowerGraphToLoopPass
from nanocompile.passes.quantize_int8 import check_options
from nanocompile.schedule.knobs import ProjectionKnobs, kernel_key
from nanocompile.targets.arch import Arch
from nanocompile.targets.c import CEmitter

STAGES = ("graph", "fused", "loop", "scheduled", "c")
GRAPH_PIPELINE = ("cse", "fold-constants", "dce", "fuse")


def int8_pass(embedding: bool = True, kernel: str = "a", head: str = "a") -> str:
    """The ``quantize-int8`` pass's pipeline text: kernel ``kernel`` (``"a"``,
    W8A32, or ``"b"``, W8A8 with integer dot products) for the seven projections
    of every layer and, with ``embedding``, the tied embedding (its lookup and
    the LM head, kernel A unless ``head`` is ``"b"``: spec §5's switch, kernel B
    only), as nanoinfer does; ``embedding=False`` keeps those f32. The text
    names ``head`` only when it is ``"b"``. Options that do not go together
    raise the pass's own ValueError (``quantize_int8.check_options``)."""
    check_options(kernel, embedding, head)
    text = f"kernel={kernel} embedding={'int8' if embedding else 'f32'}"
    return f"quantize-int8{{{text}{' head=b' if head == 'b' else ''}}}"


@dataclass
class CompileTimes:
    """Seconds spent per step of the last compile: ``lower`` (the graph passes
    and lower-graph-to-loop), ``schedule`` (default-schedule), ``emit`` (the C
    target), ``gcc`` (0 on a cache hit), ``load`` (the program cache's key
    and lookup, finding the library in the cache, verifying and opening it,
    reading the program's signature) and ``weights`` (binding the weights and
    packing the copies the schedules asked for). ``cache_hit``: the library
    was in the gcc cache; ``program_cache_hit``: the program was in the
    program cache (``backend.program_cache``), so lower, schedule and emit did
    not run (they stay 0). ``tuned_winners``: the tuner's winners the compile
    was given (``CompileOptions.tuned``), ``tuned_kernels``: the kernels they
    scheduled (on a program-cache hit, as the entry recorded it)."""

    lower: float = 0.0
    schedule: float = 0.0
    emit: float = 0.0
    gcc: float = 0.0
    load: float = 0.0
    weights: float = 0.0
    cache_hit: bool = False
    program_cache_hit: bool = False
    tuned_winners: int = 0
    tuned_kernels: int = 0

    @property
    def total(self) -> float:
        return self.lower + self.schedule + self.emit + self.gcc + self.load + self.weights

    def stages(self) -> dict[str, float]:
        """The seconds by step, in pipeline order."""
        return {"lower": self.lower, "schedule": self.schedule, "emit": self.emit,
                "gcc": self.gcc, "load": self.load, "weights": self.weights}


@dataclass(frozen=True)
class CompileOptions:
    """What the stages do: ``fuse`` (the graph passes; False: one kernel per
    primitive), ``schedule`` (the default schedules; False: the loops as
    lowered), ``arch`` (default-schedule's option: ``host``, ``scalar``,
    ``avx2``), ``quantize`` (a weight-format pass run first, as pipeline
    text, e.g. ``int8_pass()``; "" for none) and ``tuned`` (the tuner's
    winners, ``winners_text``: a projection whose kernel key is there is
    scheduled by its knobs; "" for the hand-written schedules)."""

    fuse: bool = True
    schedule: bool = True
    arch: str = HOST
    quantize: str = ""
    tuned: str = ""

    def __post_init__(self) -> None:
        check_arch_name(self.arch)
        if self.quantize:
            _graph_passes((self.quantize,))  # a bad pass or option fails here, not later
        self.winners  # a bad tuned text fails here

    @property
    def winners(self) -> dict[str, ProjectionKnobs]:
        """``tuned`` read: the knobs by kernel key (``schedule/knobs.py``)."""
        return parse_winners(self.tuned)

    @property
    def graph_passes(self) -> tuple[str, ...]:
        """The graph passes of the "fused" stage, in order."""
        return ((self.quantize,) if self.quantize else ()) + (GRAPH_PIPELINE if self.fuse
                                                              else ())


# --------------------------------------------------------------------------
# the stage functions


def _verified(module: ModuleOp) -> ModuleOp:
    module.verify()
    check_dominance(module)
    return module


def _graph_passes(passes: tuple[str, ...]) -> PassPipeline:
    """The passes named in ``passes`` (each a pass name, with options as ``nc-opt
    -p`` writes them: ``quantize-int8{embedding=f32}``)."""
    from nanocompile.passes import get_all_passes

    return PassPipeline.parse_spec(get_all_passes(), ",".join(passes))


def optimize_graph(graph: ModuleOp, passes: tuple[str, ...] = GRAPH_PIPELINE) -> ModuleOp:
    """A verified copy of ``graph`` after the graph passes (the input is unchanged)."""
    module = graph.clone()
    if passes:
        _graph_passes(passes).apply(Context(), module)
    return _verified(module)


def quantize_graph(graph: ModuleOp, quantize: str, *, verify: bool = True) -> ModuleOp:
    """A verified copy of ``graph`` after the weight-format pass ``quantize`` alone
    (e.g. ``int8_pass()``): the graph the interpreter runs, unfused. ``verify=False``
    skips the verifier (for a caller that only reads the weights it names)."""
    if verify:
        return optimize_graph(graph, (quantize,))
    module = graph.clone()
    _graph_passes((quantize,)).apply(Context(), module)
    return module


def lower_to_loop(graph: ModuleOp) -> ModuleOp:
    """A verified Loop-IR copy of ``graph`` (the input is left unchanged)."""
    module = graph.clone()
    LowerGraphToLoopPass().apply(Context(), module)
    return _verified(module)


def schedule_loop(loop_module: ModuleOp, arch: Arch | None = None
                  ) -> tuple[ModuleOp, list[str]]:
    """A verified copy of ``loop_module`` after ``default-schedule`` (phase 4), and
    why candidates were refused. ``arch=None``: the host's."""
    module = loop_module.clone()
    decisions = schedule_kernels(module, arch_option(HOST) if arch is None else arch)
    return _verified(module), [reason for d in decisions for reason in d.refusals]


def emit_c(loop_module: ModuleOp) -> str:
    """The C of a Loop-IR module (the C target; the module is not changed)."""
    return CEmitter().emit_module(loop_module)


# --------------------------------------------------------------------------
# the driver


class Pipeline:
    """The stages of one compile of ``graph``, each run once, on demand, in order.

    ``run_to(stage)`` runs the stages up to ``stage`` that have not run yet and
    returns its result: a ``ModuleOp`` (do not change it: later stages copy
    it), or the C text for ``"c"``. ``kernels`` is the scheduled Loop IR the C
    is printed from, ``decisions`` what default-schedule tried per kernel, and
    ``times`` how long each step took.
    """

    def __init__(self, graph: ModuleOp, options: CompileOptions | None = None,
                 times: CompileTimes | None = None) -> None:
        self.options = CompileOptions() if options is None else options
        self.times = CompileTimes() if times is None else times
        self.decisions: list[KernelSchedule] = []
        # per stage, what the next stage starts from ("scheduled": the kernels)
        self._results: dict[str, ModuleOp | str] = {"graph": _verified(graph)}
        self._shown: ModuleOp | None = None  # the "scheduled" stage as run_to returns it

    def run_to(self, stage: str) -> ModuleOp | str:
        """The result of ``stage`` (one of ``STAGES``)."""
        if stage not in STAGES:
            raise ValueError(f"expected a stage among {', '.join(STAGES)}, got {stage!r}")
        return self._with_schedules() if stage == "scheduled" else self._advance(stage)

    def module(self, stage: str) -> ModuleOp:
        """The IR after ``stage`` (any stage but "c")."""
        result = self.run_to(stage)
        if not isinstance(result, ModuleOp):
            raise ValueError(f"expected a stage with IR ({', '.join(STAGES[:-1])}), "
                             f"got {stage!r}")
        return result

    def text(self, stage: str) -> str:
        """The result of ``stage`` as text (the IR printed, or the C)."""
        return str(self.run_to(stage))

    def explain(self) -> list[str]:
        """What default-schedule decided, per kernel, as ``//`` comment lines: the
        candidates refused (each as the ``sched.schedule`` it would have been)
        with the reason, and the one chosen."""
        self.run_to("scheduled")
        return explain(self.decisions)

    @property
    def kernels(self) -> ModuleOp:
        """The Loop IR with the schedules applied: what the C is printed from."""
        kernels = self._advance("scheduled")
        assert isinstance(kernels, ModuleOp)  # the "scheduled" step's result
        return kernels

    def _advance(self, stage: str) -> ModuleOp | str:
        """Run the steps up to ``stage`` that have not run; its step's result."""
        for name in STAGES[:STAGES.index(stage) + 1]:
            if name not in self._results:
                self._results[name] = self._run(name)
        return self._results[stage]

    def _run(self, stage: str) -> ModuleOp | str:
        start = time.perf_counter()
        if stage == "fused":
            graph = self.module("graph")
            passes = self.options.graph_passes
            result: ModuleOp | str = optimize_graph(graph, passes) if passes else graph
            self.times.lower += time.perf_counter() - start
        elif stage == "loop":
            result = lower_to_loop(self.module("fused"))
            self.times.lower += time.perf_counter() - start
        elif stage == "scheduled":
            result = self._schedule(self.module("loop"))
            self.times.schedule += time.perf_counter() - start
        else:
            result = emit_c(self.kernels)
            self.times.emit += time.perf_counter() - start
        return result

    def _schedule(self, loop_module: ModuleOp) -> ModuleOp:
        """The kernels: a scheduled copy of the Loop IR (the Loop IR itself with
        ``schedule=False``)."""
        if not self.options.schedule:
            return loop_module
        kernels = loop_module.clone()
        arch = arch_option(self.options.arch)
        winners = self.options.winners
        knobs_for = None
        if winners:
            def knobs_for(kernel: loop.KernelOp) -> ProjectionKnobs | None:
                knobs = winners.get(kernel_key(kernel, arch.name))
                self.times.tuned_kernels += knobs is not None
                return knobs
        self.decisions = schedule_kernels(kernels, arch, knobs_for)
        return _verified(kernels)

    def _with_schedules(self) -> ModuleOp:
        """The "scheduled" stage as shown: the Loop IR with the chosen schedules
        attached (built when asked for: compiling needs the kernels only)."""
        kernels, lowered = self.kernels, self.module("loop")
        if kernels is lowered:  # schedule=False: nothing to attach
            return lowered
        if self._shown is None:
            shown = lowered.clone()
            attach_schedules(shown, self.decisions)
            self._shown = _verified(shown)
        return self._shown


def run_to(graph: ModuleOp, stage: str, options: CompileOptions | None = None
           ) -> ModuleOp | str:
    """``graph`` after ``stage`` (``Pipeline(graph, options).run_to(stage)``)."""
    return Pipeline(graph, options).run_to(stage)


def compile_program(graph: ModuleOp, weights: Mapping[str, np.ndarray], *,
                    fuse: bool = True, schedule: bool = False, sanitize: bool | None = None,
                    times: CompileTimes | None = None, cache: bool = True,
                    quantize: str = "", tuned: str | None = None,
                    threads: int | None = None) -> CompiledProgram:
    """Run every stage on ``graph`` (the weight-format pass ``quantize`` first, if
    given; optimize unless ``fuse=False``; with ``schedule=True``, the default
    schedules), build the C (or find it in the cache), load it and bind
    ``weights`` (with ``quantize``, the weights the quantized graph names).

    With ``cache`` (the default) a program compiled before with the same graph
    text, options, arch and compiler comes from the program cache
    (``backend.program_cache``): no stage runs, the C and the runtime's data
    are read back, and ``program.program`` (the Loop IR) is rebuilt by the
    pipeline only if asked for. A missing or bad entry runs the pipeline and
    stores a new one. ``cache=False`` always runs the pipeline (and stores
    nothing). ``tuned=None`` takes the tuning records' winners for ``threads``
    (default: the pool's default thread count)."""
    times = CompileTimes() if times is None else times
    arch = arch_option(CompileOptions().arch if schedule else "scalar")
    if tuned is None:
        tuned = recorded_winners(threads) if schedule and arch.vector else ""
    options = CompileOptions(fuse=fuse, schedule=schedule, arch=arch.name, quantize=quantize,
                             tuned=tuned)
    times.tuned_winners = len(options.winners)
    if not cache:
        return _compile(Pipeline(graph, options, times), weights, sanitize)
    start = time.perf_counter()
    key = program_cache.program_key(str(graph), fuse=fuse, schedule=schedule, arch=repr(arch),
                                    quantize=quantize, tuned=tuned)
    found = program_cache.load_entry(key)
    seconds = time.perf_counter() - start
    if found is None:
        program = _compile(Pipeline(graph, options, times), weights, sanitize)
        start = time.perf_counter()
        try:
            program_cache.store_entry(key, program.spec, program.source,
                                      tuned_kernels=times.tuned_kernels)
        except OSError:  # an unwritable cache: the next start runs the pipeline again
            pass
        times.load += seconds + time.perf_counter() - start
        return program
    spec, source, times.tuned_kernels = found
    program = CompiledProgram.from_spec(
        spec, source, weights, sanitize=sanitize,
        module=lambda: Pipeline(graph, options).kernels)
    times.program_cache_hit = True
    _record(program, times)
    times.load += seconds
    return program


def parse_winners(text: str) -> dict[str, ProjectionKnobs]:
    """The winners ``winners_text`` wrote (ValueError, one line, for anything else)."""
    if not text:
        return {}
    try:
        data = parse_json(text)
        if not isinstance(data, dict):
            raise ValueError("expected an object")
        return {str(key): ProjectionKnobs.parse(str(value)) for key, value in data.items()}
    except ValueError as e:
        raise ValueError(f"tuned: expected {{kernel key: knobs}} as JSON: {e}") from None


def winners_text(winners: Mapping[str, str]) -> str:
    """``CompileOptions.tuned`` for ``winners`` (knobs text by kernel key): sorted
    JSON, so the same winners give the same program key."""
    return json.dumps(dict(sorted(winners.items())), separators=(",", ":")) if winners else ""


def recorded_winners(threads: int | None = None) -> str:
    """The tuner's winners on this machine at ``threads`` (default: the pool's
    default count) from its records (``backend/tuning_records.py``), as
    ``CompileOptions.tuned``; "" when there are none (or ``NANOCOMPILE_TUNING=off``)."""
    threads = tuning_records.default_threads() if threads is None else threads
    return winners_text(tuning_records.winners(tuning_records.tuning_path(), threads))


def _compile(pipeline: Pipeline, weights: Mapping[str, np.ndarray],
             sanitize: bool | None) -> CompiledProgram:
    source = pipeline.text("c")
    return _load(pipeline.kernels, source, weights, sanitize, pipeline.times)


def compile_loop(loop_module: ModuleOp, weights: Mapping[str, np.ndarray], *,
                 sanitize: bool | None = None,
                 times: CompileTimes | None = None) -> CompiledProgram:
    """Emit a Loop-IR module as it is (scheduled or not: no pass runs), build it
    (or find it in the cache), load it and bind ``weights``."""
    times = CompileTimes() if times is None else times
    start = time.perf_counter()
    source = emit_c(_verified(loop_module))
    times.emit += time.perf_counter() - start
    return _load(loop_module, source, weights, sanitize, times)


def _load(module: ModuleOp, source: str, weights: Mapping[str, np.ndarray],
          sanitize: bool | None, times: CompileTimes) -> CompiledProgram:
    program = CompiledProgram(module, source, weights, sanitize=sanitize)
    _record(program, times)
    return program


def _record(program: CompiledProgram, times: CompileTimes) -> None:
    times.gcc = program.library.compile_seconds
    times.load = program.load_seconds
    times.weights = program.weights_seconds
    times.cache_hit = program.library.cache_hit

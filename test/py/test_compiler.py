"""The compile driver (compiler.py): one ordered list of stages, each run once, on a
copy of the one before, verified; and what a compile's time went to."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from _arches import missing_reason
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException

from nanocompile import cli
from nanocompile.api import ir_text
from nanocompile.backend.runtime import CompiledProgram
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.synth import synthetic_config
from nanocompile.compiler import (
    STAGES,
    CompileOptions,
    CompileTimes,
    Pipeline,
    compile_loop,
    compile_program,
    emit_c,
    lower_to_loop,
    optimize_graph,
    run_to,
)
from nanocompile.dialects import loop, sched
from nanocompile.frontend import composites as C
from nanocompile.frontend.tensor import GraphBuilder
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.passes.apply_schedule import apply_schedules
from nanocompile.passes.default_schedule import explain, schedule_kernels
from nanocompile.targets.arch import ARCHES, ArchError


def mlp() -> ModuleOp:
    gb = GraphBuilder("mlp")
    x = gb.input("x", "f32", ["seq", 16])
    h = C.rms_norm(x, gb.weight("norm", [16]), 1e-6)
    y = x + C.linear(C.silu(C.linear(h, gb.weight("up", [32, 16]))), gb.weight("down", [16, 32]))
    gb.output("y", y.named("y"))
    return gb.finish_module()


def mlp_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {"norm": rng.standard_normal(16).astype(np.float32),
            "up": rng.standard_normal((32, 16)).astype(np.float32),
            "down": rng.standard_normal((16, 32)).astype(np.float32)}


def _ops(module: ModuleOp) -> list[str]:
    return [op.name for op in module.ops]


def test_stages_in_order() -> None:
    graph = mlp()
    pipeline = Pipeline(graph, CompileOptions(arch="avx2"))
    assert STAGES == ("graph", "fused", "loop", "scheduled", "c")
    assert pipeline.run_to("graph") is graph
    fused = pipeline.module("fused")
    assert "graph.fused" in str(fused)
    assert "graph.fused" not in str(graph)
    lowered = pipeline.module("loop")
    assert set(_ops(lowered)) == {"loop.kernel", "loop.program"}
    scheduled = pipeline.module("scheduled")
    names = _ops(scheduled)
    assert "sched.schedule" in names
    for index, op in enumerate(scheduled.ops):  # each schedule right after its kernel
        if isinstance(op, sched.ScheduleOp):
            before = list(scheduled.ops)[index - 1]
            assert isinstance(before, loop.KernelOp)
            assert before.sym_name.data == op.kernel_name
    c = pipeline.run_to("c")
    assert isinstance(c, str)
    assert "nc_run_mlp" in c


def test_each_stage_runs_once_on_a_copy() -> None:
    graph = mlp()
    graph_text = str(graph)
    pipeline = Pipeline(graph)
    lowered = pipeline.module("loop")
    loop_text = str(lowered)
    c = pipeline.text("c")
    assert pipeline.module("loop") is lowered  # not run again
    assert pipeline.text("c") == c
    assert str(graph) == graph_text  # later stages copy, never change, an earlier one
    assert str(lowered) == loop_text
    assert pipeline.kernels is not lowered
    assert c == emit_c(pipeline.kernels)


def test_the_scheduled_stage_is_what_apply_schedule_turns_into_the_kernels() -> None:
    pipeline = Pipeline(mlp(), CompileOptions(arch="avx2"))
    with_schedules = pipeline.module("scheduled").clone()
    assert apply_schedules(with_schedules) == sum(d.chosen is not None
                                                  for d in pipeline.decisions) > 0
    assert str(with_schedules) == str(pipeline.kernels)
    without = pipeline.module("scheduled").clone()
    for op in [op for op in without.ops if isinstance(op, sched.ScheduleOp)]:
        op.detach()
        op.erase()
    assert str(without) == str(pipeline.module("loop"))  # the kernels as lowered


def test_options() -> None:
    graph = mlp()
    unfused = Pipeline(graph, CompileOptions(fuse=False))
    assert unfused.run_to("fused") is graph
    assert (_ops(unfused.module("loop")).count("loop.kernel")
            > _ops(run_to(graph, "loop")).count("loop.kernel"))  # type: ignore[arg-type]
    serial = Pipeline(graph, CompileOptions(schedule=False))
    assert "sched.schedule" not in _ops(serial.module("scheduled"))
    assert serial.kernels is serial.module("loop")
    assert serial.decisions == []
    assert serial.text("c") == emit_c(serial.module("loop"))
    scalar = Pipeline(graph, CompileOptions(arch="scalar")).text("c")
    assert "__m256" in Pipeline(graph, CompileOptions(arch="avx2")).text("c")
    assert "__m256" not in scalar
    with pytest.raises(ArchError, match="expected arch host, scalar, avx2, avx512, got 'neon'"):
        CompileOptions(arch="neon")


def test_bad_stage_names() -> None:
    pipeline = Pipeline(mlp())
    with pytest.raises(ValueError, match=r"^expected a stage among graph, fused, loop, "
                                         r"scheduled, c, got 'asm'$"):
        pipeline.run_to("asm")
    with pytest.raises(ValueError, match="expected a stage with IR"):
        pipeline.module("c")


def test_graph_is_verified_first() -> None:
    graph = mlp()
    func = next(iter(graph.ops))
    ret = list(func.regions[0].block.ops)[-1]
    ret.operands = [ret.operands[0], ret.operands[0]]  # two values for one output name
    with pytest.raises(VerifyException, match=r"^graph\.return: 1 names for 2 outputs\n"):
        Pipeline(graph)


def test_compile_program_loads_the_pipelines_c() -> None:
    graph, weights = mlp(), mlp_weights()
    program = compile_program(graph, weights, schedule=True)
    pipeline = Pipeline(graph)
    assert program.source == pipeline.text("c")
    assert str(program.program.parent_op()) == str(pipeline.kernels)
    unscheduled = compile_program(graph, weights)
    assert unscheduled.source == Pipeline(graph, CompileOptions(schedule=False)).text("c")
    x = np.random.default_rng(2).standard_normal((3, 16)).astype(np.float32)
    by_hand = compile_loop(pipeline.kernels, weights).run({"x": x})["y"]
    assert np.array_equal(program.run({"x": x})["y"].view(np.uint32), by_hand.view(np.uint32))


def _weight_arg(module: ModuleOp, weight: str) -> tuple[str, int]:
    """(kernel, argument) of the one launch reading the weight buffer ``weight``."""
    program = next(op for op in module.ops if isinstance(op, loop.ProgramOp))
    found = []
    for launch in program.launches():
        for arg, value in enumerate(launch.views):
            view = value.owner
            assert isinstance(view, loop.ViewOp)
            source = view.source.owner
            if isinstance(source, loop.BufferOp) and source.kind.data == "weight" \
                    and source.buffer_name is not None and source.buffer_name.data == weight:
                found.append((launch.kernel_name, arg))
    assert len(found) == 1, found
    return found[0]


def test_compile_times_keep_weight_packing_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Binding and packing weights is reported as ``weights``, not as emission
    or loading (it was once counted in "emit"). The default schedules pack
    nothing since issue 16 (``test_default_schedules_pack_no_weight``), so the
    packing here is asked for: ``sched.pack`` of ``up``'s transposed weight in
    tiles of 8, applied to the fused Loop IR and compiled by ``compile_loop``
    (which runs no lowering or scheduling: those stages stay at 0). Packing
    moves no arithmetic: the program computes the unpacked one's bits."""
    pack = CompiledProgram._pack_weights
    slow = 1.0

    def slow_pack(self: CompiledProgram) -> dict[tuple[str, int], np.ndarray]:
        time.sleep(slow)
        return pack(self)

    graph, weights = mlp(), mlp_weights()
    lowered = lower_to_loop(optimize_graph(graph))
    packed = lowered.clone()
    kernel, arg = _weight_arg(packed, "up")
    packed.body.block.add_op(sched.ScheduleOp.from_directives(kernel, [sched.Pack(arg, 8)]))
    assert apply_schedules(packed) == 1
    assert [(b.buffer_name.data, b.tile.data) for b in
            next(op for op in packed.ops if isinstance(op, loop.ProgramOp)).buffers()
            if b.kind.data == "packed" and b.buffer_name and b.tile] == [("up", 8)]
    plain = compile_loop(lowered, weights)
    monkeypatch.setattr(CompiledProgram, "_pack_weights", slow_pack)
    times = CompileTimes()
    program = compile_loop(packed, weights, times=times)
    assert set(program._packed) == {("up", 8)}
    assert times.weights >= slow
    assert times.emit < slow
    assert times.load < slow
    assert times.lower == times.schedule == 0
    assert list(times.stages()) == ["lower", "schedule", "emit", "gcc", "load", "weights"]
    assert times.total == pytest.approx(sum(times.stages().values()))
    assert min(times.stages().values()) >= 0
    assert times.gcc == program.library.compile_seconds
    assert times.cache_hit == program.library.cache_hit
    x = np.random.default_rng(3).standard_normal((5, 16)).astype(np.float32)
    assert np.array_equal(program.run({"x": x})["y"].view(np.uint32),
                          plain.run({"x": x})["y"].view(np.uint32))


def test_compile_times_of_the_default_schedules(monkeypatch: pytest.MonkeyPatch) -> None:
    """``compile_program(schedule=True)`` counts every stage (scheduling too), and
    its weights stage packs nothing: no ``loop.buffer packed``, no packed copy.
    (``cache=False``: the pipeline runs even when the program cache holds the
    program; a warm compile runs no stage, ``test_warm_compile_runs_no_stage``.)"""
    pack = CompiledProgram._pack_weights
    made: list[dict[tuple[str, int], np.ndarray]] = []

    def counted_pack(self: CompiledProgram) -> dict[tuple[str, int], np.ndarray]:
        made.append(pack(self))
        return made[-1]

    monkeypatch.setattr(CompiledProgram, "_pack_weights", counted_pack)
    for arch in ARCHES.values():
        if missing_reason(arch) is not None:
            continue  # compile_program builds for the arch and runs it: this CPU cannot
        monkeypatch.setenv("NANOCOMPILE_ARCH", arch.name)
        times = CompileTimes()
        program = compile_program(mlp(), mlp_weights(), schedule=True, times=times,
                                  cache=False)
        assert not times.program_cache_hit
        assert not any(b.kind.data == "packed" for b in program.program.buffers()), arch.name
        assert made[-1] == {}, arch.name
        assert times.schedule > 0
        assert times.lower > 0
        assert times.total == pytest.approx(sum(times.stages().values()))
        assert times.gcc == program.library.compile_seconds


def test_warm_compile_runs_no_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second ``compile_program`` of the same graph comes from the program
    cache: lower, schedule and emit stay 0, the C is the pipeline's, and the
    program computes the cold one's bits (the tiny model's prompt and cached
    steps: ``backend/test_program_cache.py``)."""
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(tmp_path))
    x = np.random.default_rng(5).standard_normal((4, 16)).astype(np.float32)
    for schedule in (False, True):
        cold_times, warm_times = CompileTimes(), CompileTimes()
        cold = compile_program(mlp(), mlp_weights(), schedule=schedule, times=cold_times)
        warm = compile_program(mlp(), mlp_weights(), schedule=schedule, times=warm_times)
        assert not cold_times.program_cache_hit
        assert cold_times.lower > 0
        assert warm_times.program_cache_hit
        assert warm_times.lower == warm_times.schedule == warm_times.emit == 0
        assert warm.source == Pipeline(mlp(), CompileOptions(schedule=schedule)).text("c")
        assert np.array_equal(warm.run({"x": x})["y"].view(np.uint32),
                              cold.run({"x": x})["y"].view(np.uint32))


@pytest.mark.parametrize("arch", ["avx2", "avx512"])
def test_default_schedules_pack_no_weight(arch: str) -> None:
    """Issue 16: a projection's lanes loop reads a row of ``W`` as it lies in
    memory, so the default schedules of one model layer (every projection, the
    LM head, attention) ask for no ``sched.pack`` and the scheduled program
    holds no ``loop.buffer packed``: no weight is copied (the IR is built for
    either arch on any CPU; nothing is run)."""
    cfg = Qwen2Config.from_dict(synthetic_config())
    graph = build_qwen2(cfg, Qwen2GraphOptions(n_layers=1, last_only=False))
    pipeline = Pipeline(graph, CompileOptions(arch=arch))
    kernels = pipeline.kernels
    chosen = [d.chosen for d in pipeline.decisions if d.chosen is not None]
    assert chosen
    assert not any(isinstance(directive, sched.Pack) for c in chosen for directive in c)
    buffers = [op for op in kernels.walk() if isinstance(op, loop.BufferOp)]
    assert {b.kind.data for b in buffers} >= {"weight", "input", "output"}
    assert not any(b.kind.data == "packed" for b in buffers)
    assert "loop.buffer packed" not in str(kernels)
    assert "sched.pack" not in pipeline.text("scheduled")
    matmuls = [op for op in pipeline.module("loop").walk() if isinstance(op, loop.ForOp)
               and op.lanes is not None]
    assert matmuls  # the projections' k loops are lanes loops (then vectorized)


# --------------------------------------------------------------------------
# the scheduled stage of the model, with --explain


def test_explain_prints_a_refused_candidate_and_its_schedule() -> None:
    """A kernel whose data goes through an i32 cast and back (no exact vector
    form): its candidate is printed as the sched.schedule it would have been,
    with the reason, and the kernel stays as lowered."""
    gb = GraphBuilder("casts")
    x = gb.input("x", "f32", ["n", 40])
    gb.output("y", x.cast("i32").cast("f32"))
    module = lower_to_loop(optimize_graph(gb.finish_module()))
    lines = explain(schedule_kernels(module, ARCHES["avx2"]))
    refused = [i for i, line in enumerate(lines) if " refused: " in line]
    assert refused, lines
    first = refused[0]
    assert lines[first].startswith("// @fused_cast: candidate 1 of ")
    assert "has no exact vector form" in lines[first]
    assert lines[first + 1].startswith("//   sched.schedule @fused_cast {")
    assert any(line.startswith('//     sched.vectorize "d1" width 8') for line in lines)
    assert lines[-1] == "// @fused_cast: every candidate refused: the kernel stays as lowered"


@pytest.mark.slow  # ~5 s of schedules twice (the CLI and ir_text): the full suite's
def test_dump_scheduled_explain_prints_the_decisions(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NANOCOMPILE_ARCH", "avx2")  # the refusals below are avx2's
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["dump", "--stage", "scheduled", "--layers", "1", "--explain",
                  "--weights", "int8-dot"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    comments = [line for line in out.splitlines() if line.startswith("//")]
    body = out[out.index("builtin.module"):]
    assert out.startswith("// ")
    assert "//" not in body
    # since session 23 no kernel of the program is refused a candidate: kernel B's
    # quantizing cast vectorizes (math.round per lane, loop.vfptosi) and its
    # block sums take the pool over the positions (the vector candidate of a
    # block of one sum, all tail, is no longer offered)
    assert not [c for c in comments if " refused" in c], comments
    assert "// @fused_cast: candidate 1 of 1 chosen (the sched.schedule after the kernel)" \
        in comments
    assert "// @fused_reduce_sum: candidate 1 of 1 chosen (the sched.schedule after the " \
        "kernel)" in comments
    at = body.index("sched.schedule @fused_reduce_sum {")
    assert body[at:].splitlines()[1].strip() == 'sched.parallel "d0" grain 16'
    chosen = [c for c in comments if " chosen " in c]
    assert len(chosen) == body.count("sched.schedule @")
    assert "// @fused_mul: no candidate schedule" in comments  # the int8 embedding's gather
    cfg = Qwen2Config.from_dict(synthetic_config())
    assert body.rstrip("\n") == ir_text(cfg, "scheduled", n_layers=1, last_only=False,
                                         weights="int8-dot")


def test_explain_needs_the_scheduled_stage() -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["dump", "--stage", "c", "--explain"])
    assert exit_info.value.code == "nanocompile: error: --explain needs --stage scheduled, " \
                                   "got --stage c"
    cfg = Qwen2Config.from_dict(synthetic_config())
    with pytest.raises(ValueError, match="explain needs stage 'scheduled', got 'loop'"):
        ir_text(cfg, "loop", n_layers=1, explain=True)

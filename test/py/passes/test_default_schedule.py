"""default-schedule (passes/default_schedule.py): every kernel gets the first of its
default candidate schedules whose preconditions hold, and the refusals are kept.

The graph below has a kernel for each outcome: projections whose first
candidate (the register tile of rows x columns, in strided decode tiles of
8 columns) applies (avx2; ``@fused_mul``: w1, the bias and
SiLU; ``@fused_matmul``: w2), one whose first candidate is
refused and whose second applies (``@fused_matmul_1``: the scores against the
keys, whose columns run to a symbol: the peeled column tail sits between the
rows and the column tiles, so the rows cannot move inside), one whose only
candidate is refused (``@fused_where``: the causal mask compares lane
indices), and, on a scalar arch, kernels with no candidate (the scores and
the mask: no loop of constant extent for the pool).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from _arches import arch_params
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, VectorType
from xdsl.parser import Parser
from xdsl.passes import PassPipeline

from nanocompile.compiler import GRAPH_PIPELINE, compile_program, run_to
from nanocompile.dialects import get_all_dialects, loop, sched
from nanocompile.frontend import composites as C
from nanocompile.frontend.tensor import GraphBuilder
from nanocompile.passes import get_all_passes
from nanocompile.passes.apply_schedule import DirectiveError, apply_directives
from nanocompile.passes.default_schedule import DefaultSchedulePass, schedule_kernels
from nanocompile.schedule.defaults import MATMUL_TILES
from nanocompile.schedule.vectorize import NoVectorForm
from nanocompile.targets.arch import AVX2, AVX512, SCALAR, Arch, ArchError
from nanocompile.targets.c import EmitCTarget


def block(hidden: int = 32) -> ModuleOp:
    """The graph above; ``hidden=64`` gives w1 a whole AVX-512 tile (4 vectors of 16)."""
    gb = GraphBuilder("block")
    x = gb.input("x", "f32", ["seq", 16])
    keys = gb.input("keys", "f32", ["total", 16])
    h = C.linear(x, gb.weight("w1", [hidden, 16]), gb.weight("b1", [hidden]))
    y = C.linear(C.silu(h), gb.weight("w2", [16, hidden]))
    gb.output("s", C.linear(y, keys).named("s"))
    gb.output("mask", C.causal_mask(gb, "seq", "total").named("mask"))
    return gb.finish_module()


def weights(hidden: int = 32) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"w1": rng.standard_normal((hidden, 16)).astype(np.float32),
            "b1": rng.standard_normal(hidden).astype(np.float32),
            "w2": rng.standard_normal((16, hidden)).astype(np.float32)}


def nc_opt(graph: ModuleOp, pipeline: str) -> tuple[ModuleOp, str]:
    """What ``nc-opt -p PIPELINE -t c`` makes of the graph's text: the module and the C."""
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    module = Parser(ctx, str(graph)).parse_module()
    PassPipeline.parse_spec(get_all_passes(), pipeline).apply(ctx, module)
    out = io.StringIO()
    EmitCTarget().emit(ctx, module, out)
    return module, out.getvalue()


def _has_vectors(module: ModuleOp) -> bool:
    return any(isinstance(r.type, VectorType) for op in module.walk() for r in op.results)


def test_the_pass_builds_what_compile_program_builds() -> None:
    """The driver's scheduling stage and the registered pass, run by name on the
    printed graph as nc-opt does, give the same kernels and the same C."""
    graph = block()
    program = compile_program(graph, weights(), schedule=True)
    spec = ",".join([*GRAPH_PIPELINE, "lower-graph-to-loop", "default-schedule"])
    module, c = nc_opt(graph, spec)
    assert str(module) == str(program.program.parent_op())
    assert c == program.source + "\n"  # the target ends with an empty line, as dump does
    assert "nc_parallel_for" in c  # scheduled, on any arch


def test_scheduled_program_computes_the_same_bits() -> None:
    graph, w = block(), weights()
    rng = np.random.default_rng(5)
    inputs = {"x": rng.standard_normal((4, 16)).astype(np.float32),
              "keys": rng.standard_normal((6, 16)).astype(np.float32)}
    want = compile_program(graph, w).run(inputs)
    got = compile_program(graph, w, schedule=True).run(inputs)
    for name in ("s", "mask"):
        assert np.array_equal(got[name].view(np.uint32), want[name].view(np.uint32)), name


def test_each_kernel_gets_its_first_candidate_that_applies() -> None:
    module = run_to(block(), "loop")
    assert isinstance(module, ModuleOp)
    decisions = {d.kernel: d for d in schedule_kernels(module, AVX2)}
    assert list(decisions) == ["fused_mul", "fused_matmul", "fused_matmul_1", "fused_where"]
    for d in decisions.values():  # the chosen one is the candidate after the refused
        assert d.chosen == (d.candidates[len(d.refusals)]
                            if len(d.refusals) < len(d.candidates) else None)
    tile = MATMUL_TILES["avx2"]
    columns = sched.Split("d1", tile.columns, "d1o", "d1i", peel=True)
    for name in ("fused_mul", "fused_matmul"):
        first = decisions[name]
        assert first.refusals == (), name
        assert first.chosen == first.candidates[0], name
        # the register tile: the column tiles outside the rows, rows jammed, k's 16
        # lanes as two vectors of 8; no candidate packs a weight. w1's 32 and
        # w2's 16 columns make tiles of 8 strided decode columns (f32 weights
        # too since session 20), whose groups of columns lie outside the rows
        assert any(isinstance(d, sched.Split) and d.outer == "d1q" for d in first.chosen), name
        assert sched.Split("d0", tile.rows, "d0o", "d0i", peel=True) in first.chosen, name
        assert sched.Vectorize("k", 8) in first.chosen, name
        assert not any(isinstance(d, sched.Pack) for c in first.candidates for d in c), name
    fallback = decisions["fused_matmul_1"]
    assert len(fallback.candidates) == 2
    assert fallback.refusals == ("reorder: loop 'd0' holds other ops besides loop 'd1o'",)
    assert fallback.chosen == (columns, sched.Vectorize("k", 8), sched.Privatize("k"),
                               sched.Parallel("d1o", 16 // tile.columns))
    refused = decisions["fused_where"]
    assert refused.chosen is None
    assert refused.refusals == ("vectorize 'd1': arith.index_cast on lane-varying values has "
                                "no exact vector form",)
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, loop.KernelOp)}
    assert "vector" not in str(kernels["fused_where"])  # left as lowered
    assert f"parallel {16 // tile.columns}" in str(kernels["fused_matmul_1"])
    assert "vector<8xf32>" in str(kernels["fused_matmul_1"])
    program = next(op for op in module.ops if isinstance(op, loop.ProgramOp))
    assert "packed" not in [b.kind.data for b in program.buffers()]
    scalar = run_to(block(), "loop")
    assert isinstance(scalar, ModuleOp)
    none = {d.kernel: d for d in schedule_kernels(scalar, SCALAR)}
    assert none["fused_matmul_1"].candidates == none["fused_where"].candidates == ()
    assert none["fused_mul"].chosen == (sched.Parallel("d1", 1),)


@pytest.mark.parametrize("arch", [SCALAR, AVX2, AVX512], ids=lambda a: a.name)
def test_arch_option(arch: Arch) -> None:
    """Any arch by name, whatever this CPU has: the pass only writes IR."""
    spec = ",".join([*GRAPH_PIPELINE, "lower-graph-to-loop",
                     f"default-schedule{{arch={arch.name}}}"])
    module, c = nc_opt(block(64), spec)
    assert _has_vectors(module) == arch.vector
    kernels = c[c.index("int32_t nck_"):]  # after the prelude's helpers
    for vector, lanes in (("__m256", 8), ("__m512", 16)):  # in kernels: const locals
        assert (f"const {vector} " in kernels) == (arch.f32_lanes == lanes), vector
    expected = run_to(block(64), "loop")
    assert isinstance(expected, ModuleOp)
    schedule_kernels(expected, arch)
    assert str(module) == str(expected)


@pytest.mark.parametrize("arch", arch_params())
def test_each_arch_computes_the_same_bits(arch: Arch, monkeypatch: pytest.MonkeyPatch) -> None:
    """NANOCOMPILE_ARCH picks the default schedules' arch; each gives the
    unscheduled program's bits (where this CPU runs it)."""
    graph, w = block(64), weights(64)
    rng = np.random.default_rng(6)
    inputs = {"x": rng.standard_normal((7, 16)).astype(np.float32),
              "keys": rng.standard_normal((9, 16)).astype(np.float32)}
    want = compile_program(graph, w).run(inputs)
    monkeypatch.setenv("NANOCOMPILE_ARCH", arch.name)
    program = compile_program(graph, w, schedule=True)
    assert _has_vectors(program.program.parent_op()) == arch.vector
    got = program.run(inputs)
    for name in ("s", "mask"):
        assert np.array_equal(got[name].view(np.uint32), want[name].view(np.uint32)), name


def test_unknown_arch_is_refused() -> None:
    with pytest.raises(ArchError, match=r"^default-schedule: expected arch host, scalar, "
                                        r"avx2, avx512, got 'sse'$"):
        DefaultSchedulePass(arch="sse")
    with pytest.raises(ArchError, match="got 'sse'"):
        PassPipeline.parse_spec(get_all_passes(), "default-schedule{arch=sse}")


def test_apply_directives_names_the_refused_directive() -> None:
    """The applier takes directive records; a refusal says which one, by index,
    with the primitive's own error, and leaves the kernel as it was."""
    module = run_to(block(), "loop")
    assert isinstance(module, ModuleOp)
    kernel = next(op for op in module.ops
                  if isinstance(op, loop.KernelOp) and op.sym_name.data == "fused_where")
    before = str(kernel)
    directives = [sched.Parallel("d0"), sched.Vectorize("d1", 8)]
    assert "parallel 1" in str(apply_directives(kernel, directives[:1]))
    with pytest.raises(DirectiveError) as refused:
        apply_directives(kernel, directives)
    assert refused.value.index == 1
    assert isinstance(refused.value.cause, NoVectorForm)
    assert str(refused.value) == str(refused.value.cause) == (
        "vectorize 'd1': arith.index_cast on lane-varying values has no exact vector form")
    assert str(kernel) == before

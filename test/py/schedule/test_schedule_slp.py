"""``slp``: the jammed copies' epilogues as the lanes of one vector
(schedule/slp.py), run through the C backend.

Claims:

* gate/up (``silu(x @ Wg.T) * (x @ Wu.T)``, fused: one ``exp`` and one division
  per output) under its default schedule on each vector arch (whose first
  candidate applies ``slp`` to the row tile's copies) gives the unscheduled
  kernel's bits at every row count (whole row tiles, leftover rows, decode)
  and at 1, 2 and 3 threads, with ``exp`` on 4 lanes (``nc_expf4``) in the C;
  values of both signs and magnitudes 1e-3 .. 1e3 take both sides of the
  SiLU's select (``exp`` of a large argument: 0 or inf);
* the copies found by their values where ``vectorize`` after ``privatize``
  put every copy's lanesum ahead of the epilogues (kernel A's order);
* a projection with a bias whose 6 jammed columns make one group and two
  copies left over: the group's bias values packed (``loop.vpack``), the two
  leftovers a second group whose last two lanes repeat the last copy (stored
  once each), the same bits; with 5 columns the one left over stays scalar;
* SiLU of a gate the kernel loads (kernel B's up projection), computed ahead
  of the sum: moved after it and vectorized with the epilogue, the same
  bits; a refusal leaves the kernel as it was, the SiLU back in place;
* without the jam, with nothing to vectorize, with a width other than 4:
  refused (``EpilogueNotCopies``, ``NotVectorizable``, ``ScheduleError``), the
  kernel left as it was;
* the scalar arch's candidates never use it.
"""

from __future__ import annotations

import numpy as np
import pytest
from _arches import arch_params
from _numerics import assert_bitwise, random_f32, rng_for
from _schedule_helpers import only_kernel as _kernel
from _schedule_helpers import scheduled_copy as _scheduled
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from nanocompile.backend.guarded_arena import GuardedArena
from nanocompile.compiler import compile_loop, lower_to_loop, optimize_graph
from nanocompile.dialects import loop, sched
from nanocompile.frontend import composites as C
from nanocompile.frontend.tensor import GraphBuilder
from nanocompile.schedule.defaults import default_schedules
from nanocompile.schedule.primitives import ScheduleError
from nanocompile.schedule.slp import EpilogueNotCopies, slp
from nanocompile.schedule.vectorize import NotVectorizable
from nanocompile.targets.arch import AVX2, AVX512, SCALAR, Arch

K = 64
N = 48  # columns: whole AVX-512 (2) and AVX2 (2 x 2) column tiles
SEQS = (1, 2, 5, 6, 7, 13)  # decode, leftover rows, whole 6-row tiles and beyond
THREADS = (1, 2, 3)


def gate_up() -> ModuleOp:
    gb = GraphBuilder("gate_up")
    x = gb.input("x", "f32", ["seq", K])
    gate = C.linear(x, gb.weight("wg", [N, K]))
    up = C.linear(x, gb.weight("wu", [N, K]))
    gb.output("out", C.silu(gate) * up)
    return lower_to_loop(optimize_graph(gb.finish_module()))


def biased(n: int = 6) -> ModuleOp:
    gb = GraphBuilder("linear")
    x = gb.input("x", "f32", ["seq", K])
    gb.output("out", C.linear(x, gb.weight("w", [n, K]), gb.weight("b", [n])))
    return lower_to_loop(optimize_graph(gb.finish_module()))


def _weights(names: dict[str, tuple[int, ...]], label: str) -> dict[str, np.ndarray]:
    rng = rng_for(f"slp {label}", 0)
    return {name: random_f32(rng, shape, specials=False) for name, shape in names.items()}


def _same_bits(plain: ModuleOp, scheduled: ModuleOp, weights: dict[str, np.ndarray],
               label: str, threads: tuple[int, ...] = THREADS) -> str:
    """Both programs' outputs bit for bit at every ``SEQS`` and ``threads``; the
    scheduled program's C."""
    want, got = compile_loop(plain, weights), compile_loop(scheduled, weights)
    rng = rng_for(f"slp inputs {label}", 0)
    for seq in SEQS:
        x = random_f32(rng, (seq, K), specials=False)
        reference = GuardedArena(want).run({"x": x})["out"]
        for n in threads:
            assert got.set_threads(n) == n
            assert_bitwise(GuardedArena(got).run({"x": x})["out"], reference,
                           f"{label}, seq={seq}, {n} threads")
    return got.source


@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512)))
def test_gate_up_default_schedule_is_bitwise(arch: Arch) -> None:
    module = gate_up()
    (first, *_) = default_schedules(_kernel(module), arch)
    assert sched.Slp("k", 4) in first, first
    scheduled = _scheduled(module, first)
    source = _same_bits(module, scheduled, _weights({"wg": (N, K), "wu": (N, K)}, "gate"),
                        f"gate/up {arch.name}")
    assert "nc_expf4(" in source
    assert sum(isinstance(op, loop.LaneSumsOp) for op in _kernel(scheduled).walk()) >= 2


def _bias_columns_jammed(n: int, arch: Arch) -> tuple[ModuleOp, ModuleOp, list[Operation]]:
    """``biased(n)``, its ``n`` columns jammed into k and ``slp`` by 4: the
    module, the scheduled one and the scheduled kernel's ops."""
    module = biased(n)
    directives: list[sched.Directive] = [
        sched.Split("d1", n, "d1o", "d1i"), sched.Vectorize("k", arch.f32_lanes),
        sched.Privatize("k"), sched.Slp("k", 4)]
    scheduled = _scheduled(module, directives)
    return module, scheduled, list(_kernel(scheduled).walk())


@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512)))
def test_leftover_copies_pad_a_group(arch: Arch) -> None:
    module, scheduled, ops = _bias_columns_jammed(6, arch)
    sums = [op for op in ops if isinstance(op, loop.LaneSumsOp)]
    assert len(sums) == 2
    padded = sums[1].inputs  # the 2 left over, the last one repeated
    assert padded[1] is padded[2] is padded[3]
    assert padded[0] is not padded[1]
    assert sum(isinstance(op, loop.VPackOp) for op in ops) == 2  # the bias, per group
    assert not any(isinstance(op, loop.LaneSumOp) for op in ops)
    assert sum(isinstance(op, loop.ExtractOp) for op in ops) == 6  # stored: real lanes only
    assert sum(isinstance(op, loop.StoreOp) for op in ops) == 6
    _same_bits(module, scheduled, _weights({"w": (6, K), "b": (6,)}, "bias"),
               f"bias {arch.name}", threads=(1,))  # no parallel loop


@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512)))
def test_one_leftover_copy_stays_scalar(arch: Arch) -> None:
    module, scheduled, ops = _bias_columns_jammed(5, arch)
    assert sum(isinstance(op, loop.LaneSumsOp) for op in ops) == 1
    assert sum(isinstance(op, loop.LaneSumOp) for op in ops) == 1  # the one left over
    assert sum(isinstance(op, loop.ExtractOp) for op in ops) == 4
    _same_bits(module, scheduled, _weights({"w": (5, K), "b": (5,)}, "bias5"),
               f"bias5 {arch.name}", threads=(1,))


def gated_up() -> ModuleOp:
    """SiLU of a gate the kernel loads (kernel B's up projection: its gate is the
    output of another kernel), times its own sum: fused, the SiLU stands ahead
    of the reduction."""
    gb = GraphBuilder("gated_up")
    x = gb.input("x", "f32", ["seq", K])
    gate = gb.input("gate", "f32", ["seq", N])
    gb.output("out", C.silu(gate) * C.linear(x, gb.weight("wu", [N, K])))
    module = lower_to_loop(optimize_graph(gb.finish_module()))
    # the lowering puts the sum first here; kernel B's up projection has its
    # gate's ops first (they come first in its graph): move them ahead of k
    k = next(op for op in _kernel(module).walk()
             if isinstance(op, loop.ForOp) and op.loop_name.data == "k")
    ahead = []
    op = k.next_op
    while op is not None and not isinstance(op, loop.StoreOp):
        if k.results[0] not in op.operands:
            ahead.append(op)
        op = op.next_op
    block = k.parent_block()
    assert block is not None
    assert ahead
    for op in ahead:
        op.detach()
        block.insert_op_before(op, k)
    module.verify()
    return module


def _exps_before_k(kernel: loop.KernelOp) -> int:
    count, op = 0, None
    for op in kernel.walk():
        if isinstance(op, loop.ForOp) and op.loop_name.data == "k":
            return count
        count += type(op).__name__ == "ExpOp"
    return count


@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512)))
def test_a_prologue_moves_into_the_epilogue(arch: Arch) -> None:
    module = gated_up()
    assert _exps_before_k(_kernel(module)) == 1  # the SiLU ahead of the sum
    directives: list[sched.Directive] = [
        sched.Split("d1", 4, "d1o", "d1i"), sched.Vectorize("k", arch.f32_lanes),
        sched.Privatize("k"), sched.Slp("k", 4)]
    scheduled = _scheduled(module, directives)
    kernel = _kernel(scheduled)
    assert _exps_before_k(kernel) == 0
    exps = [op for op in kernel.walk() if type(op).__name__ == "ExpOp"]
    assert len(exps) == 1
    assert str(exps[0].result.type) == "vector<4xf32>"
    weights = _weights({"wu": (N, K)}, "gated")
    want, got = compile_loop(module, weights), compile_loop(scheduled, weights)
    rng = rng_for("slp gated inputs", 0)
    for seq in SEQS:
        feed = {"x": random_f32(rng, (seq, K), specials=False),
                "gate": random_f32(rng, (seq, N), specials=False)}
        assert_bitwise(GuardedArena(got).run(feed)["out"], GuardedArena(want).run(feed)["out"],
                       f"gated {arch.name}, seq={seq}")
    assert "nc_expf4(" in got.source


def test_a_refusal_puts_the_prologue_back() -> None:
    _refused(gated_up(), [sched.Vectorize("k", 16)], 4, EpilogueNotCopies)


@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512)))
def test_copies_whose_ops_interleave(arch: Arch) -> None:
    """Privatized before vectorized (kernel A's order), every copy's lanesum
    comes before the first epilogue: the copies are found by their values."""
    module = gate_up()
    directives: list[sched.Directive] = [
        sched.Split("d1", 4, "d1o", "d1i"), sched.Privatize("k"),
        sched.Vectorize("k", arch.f32_lanes), sched.Slp("k", 4)]
    scheduled = _scheduled(module, directives)
    assert sum(isinstance(op, loop.LaneSumsOp) for op in _kernel(scheduled).walk()) == 2
    _same_bits(module, scheduled, _weights({"wg": (N, K), "wu": (N, K)}, "interleaved"),
               f"interleaved {arch.name}", threads=(1,))


def _refused(module: ModuleOp, directives: list[sched.Directive], width: int,
             error: type[ScheduleError]) -> None:
    kernel = _kernel(_scheduled(module, directives))
    before = str(kernel)
    with pytest.raises(error):
        slp(kernel, "k", width)
    assert str(kernel) == before


def test_refused_without_the_jam() -> None:
    _refused(gate_up(), [sched.Vectorize("k", 16)], 4, EpilogueNotCopies)


def test_refused_with_nothing_to_vectorize() -> None:
    gb = GraphBuilder("plain")
    x = gb.input("x", "f32", ["seq", K])
    gb.output("out", C.linear(x, gb.weight("w", [8, K])))
    module = lower_to_loop(optimize_graph(gb.finish_module()))
    _refused(module, [sched.Split("d1", 4, "d1o", "d1i"), sched.Vectorize("k", 16),
                      sched.Privatize("k")], 4, NotVectorizable)


def test_refused_at_another_width() -> None:
    _refused(gate_up(), [sched.Split("d1", 8, "d1o", "d1i"), sched.Vectorize("k", 16),
                         sched.Privatize("k")], 8, ScheduleError)


def test_scalar_arch_never_uses_it() -> None:
    for candidate in default_schedules(_kernel(gate_up()), SCALAR):
        assert not any(isinstance(d, sched.Slp) for d in candidate)

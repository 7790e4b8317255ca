"""The ``prefetch`` knob (issue 20's space): a software prefetch of a
projection's weight row before each of its loads, ``prefetch`` elements
ahead along ``k``, for the tuner to choose per machine.

Why: on the Xeon of session 31 a C probe of the bf16 decode tile (8 strided
rows, 24 layers of gate-sized weights in 2 MiB pages) read 14.4 GB/s without
and 16.3-16.8 GB/s with a prefetch 512-2,048 elements ahead, while the Zen 4
had measured no gain (session 24): a machine's question, so a knob, off by
hand.

Claims:

* the hand point has it off and writes no ``prefetch=`` in its text (points
  recorded before the knob read back unchanged); a point with it on round
  trips through ``text``/``parse``; a negative or huge one is refused;
* ``knob_space`` offers 0, 512 and 2,048 for f32, bf16, kernel-A and
  kernel-B projections (kernel B's weight loads index ``k`` as ``4 * k``:
  its prefetch runs along that index, ``ahead`` int8 ahead);
* with it on, every candidate ends with a ``sched.prefetch`` of the weight
  (the argument of footprint ``[n, k]``) along its ``k`` index, within the
  tail of the candidate's peeled split of the rows (``d0_tail``; ``d0r_tail``
  in blocks of rows) where it has one, else unscoped (the fallbacks that
  split no rows);
* applied, such a candidate has no ``loop.prefetch`` in the whole-tile rows
  loop (``d0o``: the prefill tile reuses its tile of W from cache) and one
  before every load of the weight in the tail (decode's row streams W), none
  anywhere else; the first candidate has some in its tail;
* every such program is bitwise the independent reference (f32:
  ``_fma_reference.lanes_matmul`` plus the bias; bf16: the same on the
  weights widened by a shift; kernel A: ``_int8_reference.kernel_a``) at 1, 2
  and 3 threads and 1, 2, 3 and 7 rows, and the hand program (the knob off)
  at 1, 7 and 64 rows; kernel B's bitwise ``_int8_reference.kernel_b_total``
  and its hand program at 1, 7 and 64 rows, 1, 2 and 3 threads; on each
  vector arch this CPU runs (skipped with the missing flag where it does
  not).
"""

from __future__ import annotations

import numpy as np
import pytest
from _arches import arch_params
from _int8_reference import kernel_b_total
from _numerics import assert_bitwise, random_f32, rng_for
from _schedule_helpers import (
    assert_projection_bitwise,
    bf16_projection,
    f32_projection,
    kernel_a_projection,
    kernel_b_projection,
    projection_weights,
)
from _schedule_helpers import only_kernel as _kernel
from _schedule_helpers import scheduled_copy as _scheduled
from xdsl.dialects import arith

from nanocompile.compiler import compile_loop
from nanocompile.dialects import loop, sched
from nanocompile.schedule.defaults import default_schedules, hand_knobs, knob_space
from nanocompile.schedule.knobs import ProjectionKnobs
from nanocompile.targets.arch import AVX2, AVX512, Arch

N = 32
K = {"f32": 64, "bf16": 64, "kernel A": 72}


BUILDERS = {"f32": f32_projection, "bf16": bf16_projection, "kernel A": kernel_a_projection}


def _weight_arg(kernel: loop.KernelOp, k: int) -> int:
    (index,) = [i for i, fp in enumerate(kernel.footprints.data)
                if sorted(d.const_value for d in fp.dims if d.is_const) == sorted((N, k))]
    return index


def test_the_hand_point_has_no_prefetch_and_old_texts_read_back() -> None:
    old = "rows=6 columns=4 decode=8 strided=1 row_block=1 slp=1"
    point = ProjectionKnobs.parse(old)
    assert point.prefetch == 0
    assert point.text() == old
    on = point.replace(prefetch=2048)
    assert on.text() == old + " prefetch=2048"
    assert ProjectionKnobs.parse(on.text()) == on
    for bad in (-1, 1 << 17, True):
        with pytest.raises(ValueError, match="knob prefetch"):
            point.replace(prefetch=bad)
    for fmt, build in BUILDERS.items():
        for arch in (AVX2, AVX512):
            kernel = _kernel(build(K[fmt], N))
            hand = hand_knobs(kernel, arch)
            assert hand is not None
            assert hand.prefetch == 0, fmt
            assert knob_space(kernel, arch)["prefetch"] == (0, 512, 2048), fmt
            assert not any(isinstance(d, sched.Prefetch)
                           for c in default_schedules(kernel, arch) for d in c), fmt


@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512), quick_on_host_only=True))
@pytest.mark.parametrize("fmt", sorted(BUILDERS))
@pytest.mark.parametrize("ahead", [512, 2048])
def test_prefetch_knob_prefetches_the_weight_rows_bitwise(arch: Arch, fmt: str,
                                                           ahead: int) -> None:
    k = K[fmt]
    module = BUILDERS[fmt](k, N)
    kernel = _kernel(module)
    hand = hand_knobs(kernel, arch)
    assert hand is not None
    candidates = default_schedules(kernel, arch, knobs=hand.replace(prefetch=ahead))
    w_arg = _weight_arg(kernel, k)
    for candidate in candidates:
        last = candidate[-1]
        assert isinstance(last, sched.Prefetch), (fmt, candidate)
        assert (last.arg, last.ahead) == (w_arg, ahead)
    scheduled = _scheduled(module, candidates[0])  # it applies
    assert _prefetched_in_the_tail(_kernel(scheduled), w_arg, candidates[0]) > 0, fmt
    assert_projection_bitwise(scheduled, fmt, N, k, rng_for(f"prefetch knob {fmt}", ahead),
                              f"{fmt} {arch.name} prefetch {ahead}")


def _rows_tail(candidate: list[sched.Directive]) -> str | None:
    """The tail loop of the candidate's peeled split of the rows (``d0``, or the
    rows of a block, ``d0r``), None when it splits no rows."""
    (tail,) = {f"{d.loop}_tail" for d in candidate
               if isinstance(d, sched.Split) and d.peel and d.loop in ("d0", "d0r")} or {None}
    return tail


def _loops(kernel: loop.KernelOp, name: str) -> list[loop.ForOp]:
    return [op for op in kernel.walk() if isinstance(op, loop.ForOp)
            and op.loop_name.data == name]


def _prefetched_in_the_tail(body: loop.KernelOp, w_arg: int,
                            candidate: list[sched.Directive]) -> int:
    """Check that ``body`` (``candidate`` applied) prefetches the weight before
    each of its loads in the candidate's rows tail and nowhere else (none in
    the whole-tile rows loop ``d0o``); the number of prefetches."""
    tail = _rows_tail(candidate)
    assert tail is not None, candidate
    (tail_loop,) = _loops(body, tail)
    (tile,) = _loops(body, "d0o")
    assert not any(isinstance(op, loop.PrefetchOp) for op in tile.walk()), candidate
    prefetches = [op for op in body.walk() if isinstance(op, loop.PrefetchOp)]
    in_tail = [op for op in tail_loop.walk() if isinstance(op, loop.PrefetchOp)]
    assert len(prefetches) == len(in_tail), candidate
    w_ptr = body.body.block.args[w_arg]
    for op in tail_loop.walk():
        if isinstance(op, loop.LoadOp) and op.ptr is w_ptr:
            assert isinstance(op.prev_op, loop.PrefetchOp), candidate
            assert op.prev_op.ptr is w_ptr, candidate
    return len(in_tail)


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=["avx2", "avx512"])
@pytest.mark.parametrize(("fmt", "k"), [("f32", 64), ("bf16", 64), ("kernel A", 72),
                                        ("f32", 4864)])  # 4,864: blocks of rows (d0r)
def test_prefetch_knob_scopes_the_prefetch_to_the_leftover_rows(arch: Arch, fmt: str,
                                                                k: int) -> None:
    module = BUILDERS[fmt](k, N)
    kernel = _kernel(module)
    hand = hand_knobs(kernel, arch)
    assert hand is not None
    candidates = default_schedules(kernel, arch, knobs=hand.replace(prefetch=512))
    assert _rows_tail(candidates[0]) == ("d0r_tail" if k == 4864 else "d0_tail")
    assert _rows_tail(candidates[-1]) is None  # the fallback: no rows split
    w_arg = _weight_arg(kernel, k)
    for candidate in candidates:
        last = candidate[-1]
        assert isinstance(last, sched.Prefetch), candidate
        assert last.within == _rows_tail(candidate), candidate
        if last.within is not None:
            body = _kernel(_scheduled(module, candidate))
            assert _prefetched_in_the_tail(body, w_arg, candidate) > 0, candidate


@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512), quick_on_host_only=True))
@pytest.mark.parametrize("fmt", sorted(BUILDERS))
def test_prefetch_knob_program_is_bitwise_the_hand_program(arch: Arch, fmt: str) -> None:
    k = K[fmt]
    module = BUILDERS[fmt](k, N)
    kernel = _kernel(module)
    hand = hand_knobs(kernel, arch)
    assert hand is not None
    rng = rng_for(f"prefetch knob against hand {fmt} {arch.name}", 0)
    w = projection_weights(fmt, rng, N, k)
    programs = [compile_loop(_scheduled(module, default_schedules(kernel, arch, knobs=knobs)[0]),
                             w)
                for knobs in (hand, hand.replace(prefetch=512))]
    for threads in (1, 2):
        for program in programs:
            assert program.set_threads(threads) == threads
        for seq in (1, 7, 64):
            x = random_f32(rng, (seq, k), specials=False)
            want, got = (program.run({"x": x})["y"] for program in programs)
            assert_bitwise(got, want, f"{fmt} {arch.name}, seq {seq}, {threads} threads")


KB_K = 160  # 5 blocks of 32: four in the accumulators, one left over into acc0


@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512), quick_on_host_only=True))
def test_prefetch_knob_on_kernel_b_runs_along_its_groups_of_four(arch: Arch) -> None:
    module = kernel_b_projection(KB_K, N)
    kernel = _kernel(module)
    hand = hand_knobs(kernel, arch)
    assert hand is not None
    assert hand.prefetch == 0
    assert knob_space(kernel, arch)["prefetch"] == (0, 512, 2048)
    w_arg = _weight_arg(kernel, KB_K)
    (load,) = [op for op in kernel.walk()
               if isinstance(op, loop.LoadOp) and op.ptr is kernel.body.block.args[w_arg]]
    k_dim = [i for i, index in enumerate(load.indices)
             if isinstance(index.owner, arith.MuliOp)]  # 4 * k: the groups of four
    candidates = default_schedules(kernel, arch, knobs=hand.replace(prefetch=512))
    for candidate in candidates:
        last = candidate[-1]
        assert isinstance(last, sched.Prefetch), candidate
        assert (last.arg, [last.dim], last.ahead) == (w_arg, k_dim, 512), candidate
    body = _kernel(_scheduled(module, candidates[0]))
    assert _prefetched_in_the_tail(body, w_arg, candidates[0]) > 0
    rng = rng_for(f"prefetch knob kernel B {arch.name}", 0)
    q = rng.integers(-127, 128, (N, KB_K)).astype(np.int8)
    programs = [compile_loop(_scheduled(module, default_schedules(kernel, arch, knobs=knobs)[0]),
                             {"q": q})
                for knobs in (hand, hand.replace(prefetch=512))]
    for threads in (1, 2, 3):
        for program in programs:
            assert program.set_threads(threads) == threads
        for seq in (1, 7, 64):
            xq = rng.integers(-127, 128, (seq, KB_K)).astype(np.int8)
            xs = rng.uniform(0.5, 2.0, (seq, KB_K // 32)).astype(np.float32)
            want = kernel_b_total(xq, xs, q)
            for name, program in zip(("hand", "prefetch"), programs, strict=True):
                got = program.run({"xq": xq, "xs": xs})["y"]
                assert_bitwise(got, want, f"kernel B {name} {arch.name}, seq {seq}, "
                                          f"{threads} threads")

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
* ``knob_space`` offers 0, 512 and 2,048 for f32, bf16 and kernel-A
  projections;
* with it on, every candidate ends with a ``sched.prefetch`` of the weight
  (the argument of footprint ``[n, k]``) along its ``k`` index, and the first
  candidate puts a ``loop.prefetch`` before every load of the weight;
* every such program is bitwise the independent reference (f32:
  ``_fma_reference.lanes_matmul`` plus the bias; bf16: the same on the
  weights widened by a shift; kernel A: ``_int8_reference.kernel_a``) at 1, 2
  and 3 threads and 1, 2, 3 and 7 rows, on each vector arch this CPU runs
  (skipped with the missing flag where it does not).
"""

from __future__ import annotations

import pytest
from _arches import arch_params
from _numerics import rng_for
from _schedule_helpers import (
    assert_projection_bitwise,
    bf16_projection,
    f32_projection,
    kernel_a_projection,
)
from _schedule_helpers import only_kernel as _kernel
from _schedule_helpers import scheduled_copy as _scheduled

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
    body = _kernel(scheduled)
    w_ptr = body.body.block.args[w_arg]
    for op in body.walk():
        if isinstance(op, loop.LoadOp) and op.ptr is w_ptr:
            before = op.prev_op
            assert isinstance(before, loop.PrefetchOp), fmt
            assert before.ptr is w_ptr, fmt
    assert_projection_bitwise(scheduled, fmt, N, k, rng_for(f"prefetch knob {fmt}", ahead),
                              f"{fmt} {arch.name} prefetch {ahead}")

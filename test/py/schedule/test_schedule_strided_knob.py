"""The ``strided`` knob on every projection format (issue 20's space, issue
18's decode): decode tiles of ``decode`` columns ``n / decode`` apart for f32
weights and spec §5 kernel A, not only bf16.

Why: on a Zen 4 (AMD EPYC family 25 model 17) a decode step's weight rows
stream from memory at the probe's bandwidth only while each stream is
sequential (2 to 4 weight rows ``n / 4`` apart: 22-23 GB/s for int8 rows of
896 bytes), and at a third of it when the tile's rows are adjacent (the hand
schedule of f32 weights and kernel A; 7-8 GB/s) or 16 streams at once.

Claims:

* the hand point has ``strided`` on, ``STRIDED_DECODE_COLUMNS`` (8) wide,
  for every format: bf16 since issue 17, f32 weights and kernel A since
  session 20 (on the Zen 4 gate/up's f32 decode 1.5x faster strided, kernel
  A's decode step 2.8x);
  the knob space offers it, and ``decode`` 2 and 4, for every projection;
* with ``strided`` on, at ``decode`` 2, 4 and 8, the first candidate of an
  f32 projection and of a kernel-A projection is the strided tile and it
  applies: at the leftover rows (decode: one row) tile ``t`` reads the
  weight rows ``t + m * n / decode``, ``m = 0 .. decode - 1``, read off the
  scheduled Loop IR by evaluating its index arithmetic here;
* every such schedule is bitwise the independent reference (f32:
  ``_fma_reference.lanes_matmul`` plus the bias; kernel A:
  ``_int8_reference.kernel_a``) at 1, 2 and 3 threads and 1, 2, 3 and 7 rows,
  on each vector arch this CPU runs (skipped with the missing flag where it
  does not).
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
from _schedule_helpers import index_value as _index
from _schedule_helpers import loop_named as _loop
from _schedule_helpers import only_kernel as _kernel
from _schedule_helpers import scheduled_copy as _scheduled

from nanocompile.dialects import loop, sched
from nanocompile.schedule.defaults import (
    STRIDED_DECODE_COLUMNS,
    default_schedules,
    hand_knobs,
    knob_space,
)
from nanocompile.targets.arch import AVX2, AVX512, Arch

N = 32
KS = {"f32": 64, "kernel A": 72}  # kernel A: blocks of 32 and a group of 8 after them


BUILDERS = {"f32": f32_projection, "kernel A": kernel_a_projection}


def _decode_rows(kernel: loop.KernelOp, tile: int, k: int) -> list[int]:
    """The weight rows (the argument of footprint ``[n, k]``) the leftover-row
    loop's ``k_tail`` reads at tile ``tile`` of loop ``d1o``, its first row and
    first step: each row once, in load order."""
    (w_arg,) = [arg for arg, fp in zip(kernel.body.block.args, kernel.footprints.data,
                                       strict=True)
                if sorted(d.const_value for d in fp.dims if d.is_const) == sorted((N, k))]
    outer, tail, k_tail = (_loop(kernel, name) for name in ("d1o", "d0_tail", "k_tail"))
    ivs = {outer.body.block.args[0]: tile, tail.body.block.args[0]: 0,
           k_tail.body.block.args[0]: 0}
    rows: list[int] = []
    for op in k_tail.body.walk():
        if not (isinstance(op, loop.LoadOp) and op.ptr is w_arg):
            continue
        offset = sum(_index(i, ivs) * int(s.evaluate({}))
                     for i, s in zip(op.indices, op.stride_exprs, strict=True))
        if offset // k not in rows:
            rows.append(offset // k)
    return rows


def _strided(directives: list[sched.Directive]) -> bool:
    return any(isinstance(d, sched.Split) and d.outer == "d1q" for d in directives)


@pytest.mark.parametrize("arch", [AVX2, AVX512], ids=lambda a: a.name)
def test_the_hand_point_strides_every_format_and_the_space_offers_it(arch: Arch) -> None:
    for fmt, module in (("f32", f32_projection(64, N)), ("kernel A", kernel_a_projection(72, N)),
                        ("bf16", bf16_projection(64, N))):
        kernel = _kernel(module)
        hand = hand_knobs(kernel, arch)
        assert hand is not None
        assert hand.strided, fmt
        assert hand.decode == STRIDED_DECODE_COLUMNS, fmt
        space = knob_space(kernel, arch)
        assert space["strided"] == (False, True), fmt
        assert {2, 4} <= set(space["decode"]), fmt
        first = default_schedules(kernel, arch)[0]
        assert _strided(first), fmt


@pytest.mark.parametrize("arch", arch_params((AVX2, AVX512), quick_on_host_only=True))
@pytest.mark.parametrize("fmt", sorted(BUILDERS))
@pytest.mark.parametrize("decode", [2, 4, 8])
def test_strided_decode_reads_rows_n_over_decode_apart_bitwise(arch: Arch, fmt: str,
                                                                decode: int) -> None:
    k = KS[fmt]
    module = BUILDERS[fmt](k, N)
    kernel = _kernel(module)
    hand = hand_knobs(kernel, arch)
    assert hand is not None
    knobs = hand.replace(strided=True, decode=decode, columns=min(hand.columns, decode))
    first = default_schedules(kernel, arch, knobs=knobs)[0]
    assert _strided(first)
    scheduled = _scheduled(module, first)  # it applies
    stride = N // decode
    for tile in (0, stride - 1):
        rows = _decode_rows(_kernel(scheduled), tile, k)
        assert sorted(rows) == [tile + m * stride for m in range(decode)], (tile, rows)
    assert_projection_bitwise(scheduled, fmt, N, k, rng_for(f"strided knob {fmt}", decode),
                              f"{fmt} {arch.name} decode {decode}")

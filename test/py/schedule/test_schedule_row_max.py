"""``vectorize`` of a row's max (schedule/vectorize.py, ``_vectorize_max``):
lanes of partial maxima with an exact fallback to the sequential loop.

Claims:

* the vectorized max (8 and 16 lanes) gives the unscheduled kernel's bits on
  rows built to hit every case the order decides: a largest value that is
  unique or repeated, only -inf, +inf, zeros of both signs in any order (the
  sign of the last one wins sequentially), zeros below negatives, NaNs with
  distinct payloads (the first one wins sequentially) before and after
  larger values, in the vector part and in the tail, and random rows, at
  row lengths from 1 to past several vectors with and without a tail; at 1,
  2 and 3 threads; on every vector arch the CPU has;
* the fallback is there and is the original loop: ``<m>_seq`` under a
  ``loop.if`` on the folded value being NaN or zero;
* softmax's default schedule vectorizes its max (the candidate is first)
  and stays bitwise the unscheduled kernel on such rows (and the interpreter,
  NaN payloads aside: the C target's known limit in exp and the sum);
* kernel B's per-block max of ``|x|`` (``quantize-int8{kernel=b}``: blocks of
  32, a result axis of 1 kept) gets its max vectorized by default, not the
  result loop of one iteration (session 22: its 4,864-wide kernel 1.85x
  faster in a 128-token prefill), and stays bitwise on such blocks.
"""

from __future__ import annotations

import numpy as np
import pytest
from _arches import arch_params
from _schedule_helpers import scheduled_copy
from xdsl.dialects.builtin import ModuleOp

from nanocompile.compiler import compile_loop, lower_to_loop, optimize_graph, schedule_loop
from nanocompile.dialects import loop, sched
from nanocompile.frontend.composites import softmax
from nanocompile.frontend.tensor import GraphBuilder, where
from nanocompile.interpreter import run_graph
from nanocompile.schedule.defaults import default_schedules
from nanocompile.targets.arch import Arch

ROWS = 24
THREADS = (1, 2, 3)


def _nan(payload: int, negative: bool = False) -> np.float32:
    bits = (0xFF800000 if negative else 0x7F800000) | 0x400000 | payload
    return np.array([bits], np.uint32).view(np.float32)[0]


def special_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    """``ROWS`` rows of ``n`` floats, each row one case (see the module docstring)."""
    x = rng.standard_normal((ROWS, n)).astype(np.float32)
    last = n - 1
    mid = n // 2
    x[1, :] = -np.inf
    x[2, mid] = np.inf
    x[3, :] = np.float32(-1.0)
    x[3, mid] = np.float32(0.0)
    x[3, last] = np.float32(-0.0)  # the last zero is -0: sequential keeps -0
    x[4, :] = np.float32(-2.0)
    x[4, 0] = np.float32(-0.0)
    x[4, last] = np.float32(0.0)
    x[5, :] = np.float32(-0.0)
    x[5, mid] = np.float32(0.0)  # +0 in the middle, -0 after it
    x[6, :] = np.float32(0.0)
    x[6, 0] = np.float32(-0.0)
    x[7, mid] = _nan(1)
    x[7, last] = _nan(2)  # two payloads: the first one wins
    x[8, last] = _nan(3, negative=True)  # a NaN in the tail (or the last lane)
    x[9, 0] = _nan(4)
    x[9, mid] = np.float32(1e30)
    x[10, :] = np.float32(3.0)  # one value everywhere
    x[11, mid] = np.float32(1e-45)  # a subnormal beside zeros
    x[11, :mid] = np.float32(-0.0)
    x[11, mid + 1:] = np.float32(0.0)
    x[12, :] = np.float32(-1e-45)
    x[13, last] = np.float32(50.0)
    x[14, 0] = np.float32(50.0)
    if n > 17:  # a later element in a lower lane (8 and 16 lanes: index 16 is lane 0)
        x[15, :] = np.float32(-4.0)
        x[15, 1] = np.float32(0.0)
        x[15, 16] = np.float32(-0.0)  # sequentially -0; lanes folded in order: +0
        x[16, :] = np.float32(-4.0)
        x[16, 1] = np.float32(-0.0)
        x[16, 16] = np.float32(0.0)
        x[17, 1] = _nan(5)
        x[17, 16] = _nan(6)  # sequentially payload 5; lanes folded in order: 6
        x[18, 3] = _nan(7, negative=True)
        x[18, 16] = _nan(8)
        x[18, 17] = np.float32(-0.0)
    return x


def row_max_module(rows: int) -> ModuleOp:
    gb = GraphBuilder("rowmax")
    x = gb.input("x", "f32", [rows, "n"])
    gb.output("y", x.max(1))
    return lower_to_loop(optimize_graph(gb.finish_module()))


LENGTHS = (1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 100, 129)


@pytest.mark.parametrize("arch", [a for a in arch_params(quick_on_host_only=True)
                                  if a.values[0].vector])
def test_vectorized_row_max_is_bitwise(arch: Arch) -> None:
    module = row_max_module(ROWS)
    scheduled = scheduled_copy(module, [sched.Vectorize("m", arch.f32_lanes),
                                    sched.Parallel("d0")])
    names = [op.loop_name.data for op in scheduled.walk() if isinstance(op, loop.ForOp)]
    assert names == ["d0", "d1", "m", "m_tail", "m_seq"], names  # d1: the kept axis of 1
    (fallback,) = [op for op in scheduled.walk() if isinstance(op, loop.IfOp)]
    assert [op.loop_name.data for op in fallback.walk() if isinstance(op, loop.ForOp)] == \
        ["m_seq"]
    plain, fast = compile_loop(module, {}), compile_loop(scheduled, {})
    rng = np.random.default_rng(3)
    for n in LENGTHS:
        x = special_rows(n, rng)
        want = plain.run({"x": x})["y"]
        assert np.isnan(want).any() or n < 3
        for threads in THREADS:
            fast.set_threads(threads)
            got = fast.run({"x": x})["y"]
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (n, threads)


def test_the_sequential_kernel_keeps_the_first_nan_and_the_last_zero() -> None:
    """The reference itself, so the cases above are the ones the order decides."""
    module = row_max_module(ROWS)
    x = special_rows(33, np.random.default_rng(3))
    y = compile_loop(module, {}).run({"x": x})["y"]
    bits = y.view(np.uint32)
    assert bits[3] == 0x80000000  # the last zero's sign
    assert bits[4] == 0x00000000
    assert bits[5] == 0x80000000
    assert bits[6] == 0x00000000
    assert bits[7] == _nan(1).view(np.uint32)
    assert bits[9] == _nan(4).view(np.uint32)
    assert bits[15] == 0x80000000
    assert bits[16] == 0x00000000
    assert bits[17] == _nan(5).view(np.uint32)
    assert bits[18] == _nan(7, negative=True).view(np.uint32)


@pytest.mark.parametrize("arch", [a for a in arch_params(quick_on_host_only=True)
                                  if a.values[0].vector])
def test_softmax_vectorizes_its_max_and_stays_bitwise(arch: Arch) -> None:
    gb = GraphBuilder("softmax")
    x = gb.input("x", "f32", [ROWS, "n"])
    gb.output("y", softmax(x, 1))
    graph = gb.finish_module()
    module = lower_to_loop(optimize_graph(graph))
    scheduled, _ = schedule_loop(module, arch)
    names = [op.loop_name.data for op in scheduled.walk() if isinstance(op, loop.ForOp)]
    assert {"m", "m_tail", "m_seq", "e"} <= set(names), names
    plain, fast = compile_loop(module, {}), compile_loop(scheduled, {})
    rng = np.random.default_rng(5)
    for n in (1, 16, 17, 100):
        feed = {"x": special_rows(n, rng)}
        want = plain.run(feed)["y"]
        exact = run_graph(graph, feed, {}, exact=True)["y"]
        # the interpreter: the same values, NaN where the C has NaN (which payload
        # a NaN carries through exp and the sum is the C target's known limit,
        # test_fuzz.py's xfail; the max's payload is kept exactly)
        assert np.array_equal(np.isnan(want), np.isnan(exact))
        assert np.array_equal(np.where(np.isnan(want), 0, want).view(np.uint32),
                              np.where(np.isnan(exact), 0, exact).view(np.uint32))
        for threads in THREADS:
            fast.set_threads(threads)
            got = fast.run(feed)["y"]
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (n, threads)


@pytest.mark.parametrize("arch", [a for a in arch_params(quick_on_host_only=True)
                                  if a.values[0].vector])
def test_block_max_vectorizes_its_max_and_stays_bitwise(arch: Arch) -> None:
    gb = GraphBuilder("blockmax")
    x = gb.input("x", "f32", [ROWS, "n", 32])
    gb.output("y", where(x <= -x, -x, x).max(2))  # kernel B's |x| per block, [ROWS, n, 1]
    module = lower_to_loop(optimize_graph(gb.finish_module()))
    (kernel,) = [op for op in module.walk() if isinstance(op, loop.KernelOp)]
    first = default_schedules(kernel, arch)[0]
    assert first[0] == sched.Vectorize("m", arch.f32_lanes), first  # not d2, of 1
    scheduled, _ = schedule_loop(module, arch)
    names = [op.loop_name.data for op in scheduled.walk() if isinstance(op, loop.ForOp)]
    assert {"m", "m_tail", "m_seq"} <= set(names), names  # the max's lanes, its fallback
    assert "d2_tail" not in names, names
    plain, fast = compile_loop(module, {}), compile_loop(scheduled, {})
    rng = np.random.default_rng(7)
    for blocks in (1, 3, 5):
        feed = {"x": special_rows(32 * blocks, rng).reshape(ROWS, blocks, 32)}
        want = plain.run(feed)["y"]
        assert np.isnan(want).any()
        for threads in THREADS:
            fast.set_threads(threads)
            got = fast.run(feed)["y"]
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (blocks, threads)

"""The tuning harness (tuning/harness.py): candidates of one kernel in one
library, checked bitwise against the reference on guarded buffers and timed
by a loop in C.

Claims:

* a projection's default schedules (the host arch's first applicable and the
  scalar arch's) and the unscheduled kernel itself all check clean at decode,
  at leftover rows and at 0 rows, at 1 and 2 threads;
* a candidate computing something else is named with its workload, argument
  and first differing element (at decode; one wrong only past the first row at
  the prefill workload only); a store one element past the footprint trips the
  guard after the output, one element before it the guard before; a kernel
  exiting with a code is reported with the code by ``check`` and ``time``;
* a candidate whose signature differs from the reference's is refused, with
  the argument and what differs; so are missing symbols and empty lists;
* ``time`` gives int64 nanoseconds of shape (rounds, candidates), every call
  timed; which candidate ran last on which copy of the arguments (read back
  from their outputs, each candidate writing its own mark) shows that round
  ``r`` starts at candidate ``r % n`` and calls cycle through the copies;
* the number of copies follows ``stream_bytes`` over the weights' bytes,
  capped at 256; the buffers' sizes follow the footprints;
* the timed copies lie one after another in one arena that starts on a 2 MiB
  boundary (``backend.hugepages.huge_array``, tested there).

No duration is asserted (only that each is positive).
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, ModuleOp, f32, i1

from nanocompile.backend.hugepages import HUGE_PAGE
from nanocompile.compiler import lower_to_loop, optimize_graph
from nanocompile.dialects import loop
from nanocompile.frontend import composites as C
from nanocompile.frontend.tensor import GraphBuilder
from nanocompile.passes.apply_schedule import apply_directives
from nanocompile.schedule.defaults import default_schedules
from nanocompile.schedule.primitives import ScheduleError
from nanocompile.targets.arch import SCALAR, Arch, host_arch
from nanocompile.tuning.harness import (
    MAX_COPIES,
    CandidateLibrary,
    TuningError,
    Workload,
    footprint_elements,
    read_values,
)

K = 64
N = 48
DECODE = Workload("decode", {"seq": 1})
PREFILL = Workload("prefill7", {"seq": 7})  # one whole 6-row tile and a leftover row
EMPTY = Workload("empty", {"seq": 0})
WEIGHT_BYTES = N * K * 4


def projection(k: int = K, n: int = N) -> loop.KernelOp:
    """The kernel of ``x @ W.T`` (x: [seq, k], W: [n, k]): args out, W, x."""
    gb = GraphBuilder("proj")
    x = gb.input("x", "f32", ["seq", k])
    gb.output("out", C.linear(x, gb.weight("w", [n, k])))
    module: ModuleOp = lower_to_loop(optimize_graph(gb.finish_module()))
    (kernel,) = [op for op in module.ops if isinstance(op, loop.KernelOp)]
    return kernel


@pytest.fixture(scope="module")
def kernel() -> loop.KernelOp:
    return projection()


def first_schedule(kernel: loop.KernelOp, arch: Arch) -> loop.KernelOp:
    """The kernel under ``arch``'s first default schedule that applies."""
    for directives in default_schedules(kernel, arch):
        try:
            return apply_directives(kernel, directives)
        except ScheduleError:
            continue
    raise AssertionError(f"no default schedule of {arch.name} applies")


def _store(kernel: loop.KernelOp) -> loop.StoreOp:
    (store,) = [op for op in kernel.walk() if isinstance(op, loop.StoreOp)]
    return store


def _before(op: loop.StoreOp, new: arith.ConstantOp | arith.AddiOp | arith.SubiOp) -> None:
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(new, op)


def storing(kernel: loop.KernelOp, value: float) -> loop.KernelOp:
    """A copy that stores ``value`` into every output element."""
    copy = kernel.clone()
    store = _store(copy)
    const = arith.ConstantOp(FloatAttr(value, f32))
    _before(store, const)
    store.operands[0] = const.result
    return copy


def with_accumulator(kernel: loop.KernelOp, value: float) -> loop.KernelOp:
    """A copy whose sums start at ``value`` instead of 0."""
    copy = kernel.clone()
    (zero,) = [op for op in copy.walk() if isinstance(op, arith.ConstantOp)
               and isinstance(op.value, FloatAttr)]
    const = arith.ConstantOp(FloatAttr(value, f32))
    block = zero.parent_block()
    assert block is not None
    block.insert_op_before(const, zero)
    zero.result.replace_all_uses_with(const.result)
    return copy


def shifted_column(kernel: loop.KernelOp, by: int) -> loop.KernelOp:
    """A copy storing output column ``j`` at ``j + by`` (by = +1 / -1)."""
    copy = kernel.clone()
    store = _store(copy)
    one = arith.ConstantOp(IntegerAttr(abs(by), IndexType()))
    _before(store, one)
    column = store.indices[1]
    moved = arith.AddiOp(column, one) if by > 0 else arith.SubiOp(column, one)
    _before(store, moved)
    store.operands[3] = moved.result  # value, ptr, row, column
    return copy


def first_row_only(kernel: loop.KernelOp) -> loop.KernelOp:
    """A copy storing every row into row 0 (right at one row only)."""
    copy = kernel.clone()
    store = _store(copy)
    zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
    _before(store, zero)
    store.operands[2] = zero.result
    return copy


def failing(kernel: loop.KernelOp, code: int) -> loop.KernelOp:
    """A copy that exits with ``code`` (a ``loop.check`` of false) before its loops."""
    copy = kernel.clone()
    false = arith.ConstantOp(IntegerAttr(0, i1))
    check = loop.CheckOp(false.result, code, "always fails")
    first = copy.body.block.first_op
    assert first is not None
    copy.body.block.insert_op_before(false, first)
    copy.body.block.insert_op_before(check, first)
    return copy


@pytest.mark.parametrize("threads", [1, 2])
def test_default_schedules_check_clean(kernel: loop.KernelOp, threads: int) -> None:
    candidates = [first_schedule(kernel, host_arch()), first_schedule(kernel, SCALAR), kernel]
    assert any(op.parallel is not None for op in candidates[0].walk()
               if isinstance(op, loop.ForOp))  # the pool runs
    lib = CandidateLibrary(kernel, candidates, [DECODE, PREFILL, EMPTY], threads=threads)
    assert lib.check() == [None, None, None]
    assert "nc_pool_set_threads" in lib.source


def test_wrong_results_are_named(kernel: loop.KernelOp) -> None:
    candidates = [kernel, with_accumulator(kernel, 1.0), first_row_only(kernel)]
    lib = CandidateLibrary(kernel, candidates, [DECODE, PREFILL])
    assert lib.check() == [
        None,
        "decode: arg 0 differs from the reference at element 0",
        # rows 1..6 are never written (0xFF), row 0 holds row 6's sums
        "prefill7: arg 0 differs from the reference at element 0",
    ]


def test_writes_outside_the_footprint_hit_the_guards(kernel: loop.KernelOp) -> None:
    lib = CandidateLibrary(kernel, [shifted_column(kernel, 1), shifted_column(kernel, -1)],
                           [PREFILL])
    assert lib.check() == ["prefill7: arg 0's guard after it was written",
                           "prefill7: arg 0's guard before it was written"]


def test_error_codes_are_reported(kernel: loop.KernelOp) -> None:
    lib = CandidateLibrary(kernel, [kernel, failing(kernel, 3)], [DECODE])
    assert lib.check() == [None, "decode: the kernel returned 3"]
    with pytest.raises(TuningError, match=r"^decode: candidate 1 returned 3 while being timed$"):
        lib.time(0, 2)


def test_a_failing_reference_is_an_error(kernel: loop.KernelOp) -> None:
    lib = CandidateLibrary(shifted_column(kernel, 1), [kernel], [DECODE])
    with pytest.raises(TuningError, match=r"reference .* fails on decode: arg 0's guard after"):
        lib.check()


def test_signature_mismatches_are_refused(kernel: loop.KernelOp) -> None:
    with pytest.raises(TuningError, match=r"candidate 1 .*: arg 1's footprint shape \[32, 48\], "
                                          r"the reference's \[64, 48\]"):
        CandidateLibrary(kernel, [kernel, projection(k=32)], [DECODE])
    with pytest.raises(TuningError, match=r"candidate 0 .*: arg 0's footprint shape"):
        CandidateLibrary(kernel, [projection(n=16)], [DECODE])
    with pytest.raises(TuningError, match=r"no value for the symbol.* seq"):
        CandidateLibrary(kernel, [kernel], [Workload("nothing", {})])
    with pytest.raises(TuningError, match="no candidates"):
        CandidateLibrary(kernel, [], [DECODE])


def test_time_shape_and_rotation(kernel: loop.KernelOp) -> None:
    n = 3
    marks = [storing(kernel, float(c + 1)) for c in range(n)]  # candidate c writes c + 1
    for copies, rounds in ((3, 1), (3, 2), (3, 3), (2, 3), (1, 2), (4, 5)):
        lib = CandidateLibrary(kernel, marks, [DECODE, PREFILL],
                               stream_bytes=copies * WEIGHT_BYTES)
        assert lib.copies == copies
        ns = lib.time(1, rounds)
        assert ns.shape == (rounds, n)
        assert ns.dtype == np.int64
        assert np.all(ns > 0)
        last = {}  # the candidate of each copy's last call: round r's j-th call is (r + j) % n
        for call in range(rounds * n):
            r, j = divmod(call, n)
            last[call % copies] = (r + j) % n
        buffers = lib.timing_buffers(1)
        assert len(buffers) == copies
        for copy, arrays in enumerate(buffers):
            out = arrays[0]
            assert out.shape == (PREFILL.syms["seq"] * N,)
            expected = float(last[copy] + 1) if copy in last else None
            if expected is None:  # a copy no call reached keeps its 0xFF bytes
                assert np.all(out.view(np.uint8) == 0xFF)
            else:
                assert np.all(out == expected), (copies, rounds, copy)


def test_timed_copies_share_nothing_and_hold_the_inputs(kernel: loop.KernelOp) -> None:
    lib = CandidateLibrary(kernel, [kernel], [PREFILL], stream_bytes=2 * WEIGHT_BYTES)
    lib.time(0, 4)
    copies = lib.timing_buffers(0)
    data = lib.read_data(0)
    addresses = {a.ctypes.data for arrays in copies for a in arrays}
    assert len(addresses) == 2 * 3
    for arrays in copies:
        for array, content in zip(arrays, data, strict=True):
            assert array.ctypes.data % 64 == 0
            if content is not None:
                assert np.array_equal(array.view(np.uint8), content.view(np.uint8))
    w, x = data[1], data[2]
    assert w is not None
    assert x is not None
    # the timed outputs are the projection's (fma in order of k: float64 is close)
    want = x.reshape(7, K).astype(np.float64) @ w.reshape(N, K).T.astype(np.float64)
    np.testing.assert_allclose(copies[0][0].reshape(7, N), want, rtol=1e-4, atol=1e-4)


def test_timed_copies_lie_in_one_arena_on_a_huge_page_boundary(kernel: loop.KernelOp) -> None:
    lib = CandidateLibrary(kernel, [kernel], [PREFILL], stream_bytes=3 * WEIGHT_BYTES)
    copies = lib.timing_buffers(0)
    starts = [a.ctypes.data for arrays in copies for a in arrays]
    ends = [a.ctypes.data + a.nbytes for arrays in copies for a in arrays]
    assert starts[0] % HUGE_PAGE == 0  # the arena's first byte
    assert all(b >= e for e, b in zip(ends, starts[1:], strict=False))  # in order, apart
    assert ends[-1] - starts[0] < 3 * 3 * (WEIGHT_BYTES + 64 * 7 * K)  # and nothing between


def test_copies_follow_stream_bytes(kernel: loop.KernelOp) -> None:
    assert CandidateLibrary(kernel, [kernel], [DECODE],
                            stream_bytes=WEIGHT_BYTES + 1).copies == 2
    assert CandidateLibrary(kernel, [kernel], [DECODE], stream_bytes=1).copies == 1
    assert CandidateLibrary(kernel, [kernel], [DECODE],
                            stream_bytes=10**12).copies == MAX_COPIES
    default = CandidateLibrary(kernel, [kernel], [DECODE])
    assert default.weight_bytes == WEIGHT_BYTES
    assert 1 <= default.copies <= MAX_COPIES


def test_footprints_and_values(kernel: loop.KernelOp) -> None:
    out, w, x = kernel.footprints.data
    assert [footprint_elements(fp, {"seq": 7}) for fp in (out, w, x)] == [7 * N, N * K, 7 * K]
    assert footprint_elements(x, {"seq": 0}) == 0
    rng = np.random.default_rng(0)
    bf16 = read_values("bf16", 1000, rng)
    assert bf16.dtype == np.uint16
    assert np.all(np.isfinite((bf16.astype(np.uint32) << 16).view(np.float32)))
    i8 = read_values("i8", 10000, rng)
    assert i8.min() >= -127
    assert i8.max() <= 127
    assert np.all(read_values("i64", 100, rng) >= 0)
    with pytest.raises(TuningError, match="bool"):
        read_values("bool", 4, rng)
    first = read_values("f32", 8, np.random.default_rng([0, 1, 2]))
    assert np.array_equal(first, read_values("f32", 8, np.random.default_rng([0, 1, 2])))

"""``prefetch`` (schedule/prefetch.py): a hint before every load of a streamed
argument.

Claims:

* before each load of the argument, a ``loop.prefetch`` of the element
  ``ahead`` further along index ``dim``, the other indices and the strides
  the load's; nothing else in the kernel changes (the same ops once the
  prefetches and their index arithmetic are taken out);
* prefetched kernels are bitwise the unprefetched ones, in the tuning
  harness's guard bands, at 1, 2 and 3 threads, with the prefetched rows
  past the end of the argument (a row ahead of a 1-row stream, and a
  million rows ahead: a prefetch never faults);
* ``within`` a loop name: a prefetch before each load of the argument nested
  in the loops of that name (the rows' tail of a peeled split: 1; the 4
  unrolled rows of its whole tiles, or their 4 loops ``k``: 4) and none
  elsewhere, bitwise the unprefetched kernel as above;
* each refusal (an argument the kernel does not have, writes, or never
  loads, or never loads in the ``within`` loop; a ``within`` loop the kernel
  does not have; an index the loads do not have) leaves the kernel as it
  was.
"""

from __future__ import annotations

import pytest
from _schedule_helpers import ROWS_KERNEL, loop_named, only_kernel, parse_module, unchanged
from xdsl.dialects import arith

from nanocompile.dialects import loop, sched
from nanocompile.passes.apply_schedule import apply_directives
from nanocompile.schedule.prefetch import NotStreamed, prefetch
from nanocompile.tuning.harness import CandidateLibrary, Workload

THREADS = (1, 2, 3)

_ROWS = ROWS_KERNEL


def _kernel() -> loop.KernelOp:
    return only_kernel(parse_module(_ROWS))


def _without_prefetches(kernel: loop.KernelOp) -> str:
    """The kernel's text with its prefetches and their index arithmetic removed."""
    copy = kernel.clone()
    for op in [op for op in copy.walk() if isinstance(op, loop.PrefetchOp)]:
        moved = op.indices[0].owner  # the row: prefetched along index #0
        op.detach()
        op.erase()
        assert isinstance(moved, arith.AddiOp)
        distance = moved.rhs.owner
        moved.detach()
        moved.erase()
        assert isinstance(distance, arith.ConstantOp)
        distance.detach()
        distance.erase()
    return str(copy)


def test_each_load_of_the_argument_follows_its_prefetch() -> None:
    kernel = _kernel()
    before = str(kernel)
    prefetch(kernel, 1, 0, 64, 2)
    kernel.verify()
    (load,) = [op for op in kernel.walk() if isinstance(op, loop.LoadOp) and op.ptr is
               kernel.args[1]]
    (hint,) = [op for op in kernel.walk() if isinstance(op, loop.PrefetchOp)]
    assert load.prev_op is hint
    assert hint.ptr is load.ptr
    assert hint.stride_exprs == load.stride_exprs
    assert hint.locality.data == 2
    assert hint.indices[1] is load.indices[1]
    moved = hint.indices[0].owner
    assert isinstance(moved, arith.AddiOp)
    assert moved.lhs is load.indices[0]
    assert isinstance(moved.rhs.owner, arith.ConstantOp)
    assert moved.rhs.owner.value.value.data == 64
    assert _without_prefetches(kernel) == before


@pytest.mark.parametrize("ahead", [1, 1 << 20])
def test_prefetched_kernel_is_bitwise_past_the_end(ahead: int) -> None:
    reference = _kernel()
    candidates = [apply_directives(reference, [sched.Parallel("d0"), sched.Prefetch(1, 0, ahead)]),
                  apply_directives(reference, [sched.Prefetch(1, 0, ahead, 0),
                                               sched.Prefetch(2, 0, ahead, 3)])]
    workloads = [Workload(f"n {n}", {"n": n}) for n in (1, 5, 37)]
    for threads in THREADS:
        library = CandidateLibrary(reference, candidates, workloads, threads=threads)
        assert library.check() == [None] * len(candidates), threads
        assert "__builtin_prefetch" in library.source


@pytest.mark.parametrize(("arg", "dim", "error"), [
    (3, 0, r"the kernel has 3 arguments"),
    (0, 0, r"the kernel writes argument #0; only an argument it only reads is prefetched"),
    (2, 1, r"a load of argument #2 has 1 indices, so no index #1"),
])
def test_refusals_leave_the_kernel_as_it_was(arg: int, dim: int, error: str) -> None:
    kernel = _kernel()
    unchanged(lambda k: prefetch(k, arg, dim, 16, 2), kernel, NotStreamed)
    with pytest.raises(NotStreamed, match=error):
        prefetch(kernel, arg, dim, 16, 2)


def test_an_argument_never_loaded_is_refused() -> None:
    text = _ROWS.replace('access ["w", "r", "r"]', 'access ["w", "r", "r", "r"]').replace(
        "%2: !loop.ptr<f32>)", "%2: !loop.ptr<f32>, %3: !loop.ptr<f32>)").replace(
        "#loop.fp<[40], [1]>]", "#loop.fp<[40], [1]>, #loop.fp<[40], [1]>]")
    kernel = only_kernel(parse_module(text))
    unchanged(lambda k: prefetch(k, 3, 0, 16, 2), kernel, NotStreamed)
    with pytest.raises(NotStreamed, match=r"the kernel never loads argument #3"):
        prefetch(kernel, 3, 0, 16, 2)


_TILES = [sched.Split("d0", 4, "d0o", "d0i", peel=True), sched.Unroll("d0i")]
"""Whole tiles of 4 rows, unrolled (4 loops ``k`` in ``d0o``), the leftover rows
in ``d0_tail`` (its sum ``k_tail``)."""


def _prefetches_in(op: loop.KernelOp | loop.ForOp) -> int:
    return sum(isinstance(o, loop.PrefetchOp) for o in op.walk())


@pytest.mark.parametrize(("within", "tile", "tail"), [("d0_tail", 0, 1), ("d0o", 4, 0),
                                                      ("k", 4, 0), ("k_tail", 0, 1)])
def test_within_prefetches_only_the_loads_in_that_loop(within: str, tile: int,
                                                       tail: int) -> None:
    kernel = apply_directives(_kernel(), _TILES)
    prefetch(kernel, 1, 0, 64, 2, within)
    kernel.verify()
    assert _prefetches_in(loop_named(kernel, "d0o")) == tile
    assert _prefetches_in(loop_named(kernel, "d0_tail")) == tail
    assert _prefetches_in(kernel) == tile + tail
    scopes = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
              and op.loop_name.data == within]
    inside = {id(op) for scope in scopes for op in scope.walk()}
    for load in [op for op in kernel.walk() if isinstance(op, loop.LoadOp)
                 and op.ptr is kernel.args[1]]:
        assert isinstance(load.prev_op, loop.PrefetchOp) == (id(load) in inside), within


def test_within_prefetched_kernel_is_bitwise() -> None:
    reference = _kernel()
    candidates = [apply_directives(reference, [*_TILES, sched.Prefetch(1, 0, 1, 2, "d0_tail"),
                                               sched.Prefetch(2, 0, 1 << 20, 3, "d0_tail")]),
                  apply_directives(reference, [*_TILES, sched.Prefetch(1, 0, 4, 2, "k")])]
    workloads = [Workload(f"n {n}", {"n": n}) for n in (1, 5, 37)]
    for threads in (1, 2):
        library = CandidateLibrary(reference, candidates, workloads, threads=threads)
        assert library.check() == [None] * len(candidates), threads
        assert "__builtin_prefetch" in library.source


def test_within_a_loop_the_kernel_lacks_is_refused() -> None:
    kernel = apply_directives(_kernel(), _TILES)
    unchanged(lambda k: prefetch(k, 1, 0, 16, 2, "d0"), kernel, NotStreamed)
    with pytest.raises(NotStreamed, match=r"@rows: prefetch arg 1 within 'd0': the kernel "
                       r"has no loop named 'd0' \(loops: d0_tail, d0o, k, k_tail\)"):
        prefetch(kernel, 1, 0, 16, 2, "d0")


def test_within_a_loop_without_a_load_of_the_argument_is_refused() -> None:
    text = _ROWS.replace("      loop.store %s, %0[%j] strides [1] : f32\n",
                         '      %c1 = arith.constant 1 : index\n'
                         '      loop.for "st" %u = %c0 to %c1 {\n'
                         "        loop.store %s, %0[%j] strides [1] : f32\n"
                         "      }\n")
    kernel = only_kernel(parse_module(text))
    unchanged(lambda k: prefetch(k, 1, 0, 16, 2, "st"), kernel, NotStreamed)
    with pytest.raises(NotStreamed, match=r"the kernel never loads argument #1 inside "
                       r"loop 'st'"):
        prefetch(kernel, 1, 0, 16, 2, "st")

"""``distribute`` (schedule/distribute.py) and ``split`` of a loop of step > 1
(schedule/primitives.py), the two primitives behind the context's tile of
grouped query heads.

Claims:

* attention's context with grouped query heads (the group's heads and the
  head dim jammed into the sum over the positions, 16 explicit partials per
  vector), its sum distributed whole or in blocks (split by 16, by 3, by 3
  peeled), is bitwise the unscheduled kernel at positions around every block
  and group boundary and at 1, 2 and 3 threads, on every vector arch the CPU
  has; the checks run in the tuning harness (guard bands around every buffer,
  the reads untouched, the written bytes compared);
* distribute groups carried values by what they share: a sum that reads
  another carried value, or a load two sums read, keeps them in one loop;
  index arithmetic is cloned, ops nothing needs are dropped, the loops keep
  the bounds and the step, their results replace the loop's;
* the split of a stepped loop runs the same indices in the same order: the
  indices its loops visit (evaluated from the IR) are the original loop's;
* each precondition's refusal leaves the kernel as it was; a schedule that
  names a distributed loop again does not verify.
"""

from __future__ import annotations

import pytest
from _arches import arch_params
from _schedule_helpers import index_value, only_kernel, parse_module, unchanged
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects import loop, sched
from nanocompile.passes.apply_schedule import apply_directives
from nanocompile.schedule.distribute import distribute
from nanocompile.schedule.primitives import (
    LanesLoop,
    NameTaken,
    NestedParallel,
    NotPerfectlyNested,
    ScheduleError,
    split,
)
from nanocompile.targets.arch import Arch
from nanocompile.tuning.harness import CandidateLibrary, Workload

S, R, V, P, D = sched.Split, sched.Reorder, sched.Vectorize, sched.Privatize, sched.Distribute
THREADS = (1, 2, 3)

_CONTEXT = """builtin.module {{
  loop.kernel @context(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>)
      syms ["n", "seq"] access ["w", "r", "r"]
      footprints [#loop.fp<[{h}, seq, {d}], [{d}*seq, {d}, 1]>,
                  #loop.fp<[{kv}, {g}, n, {d}], [{d}*n, 0, {d}, 1]>,
                  #loop.fp<[{h}, seq, n], [n*seq, n, 1]>] {{
    %n = loop.sym "n"
    %seq = loop.sym "seq"
    %c0 = arith.constant 0 : index
    %cg = arith.constant {g} : index
    %ch = arith.constant {h} : index
    %cd = arith.constant {d} : index
    loop.for "d0" %h = %c0 to %ch {{
      loop.for "d1" %i = %c0 to %seq {{
        loop.for "d2" %d = %c0 to %cd {{
          %z = arith.constant 0.0 : f32
          %s = loop.for "k" %k = %c0 to %n lanes 16 iter(%acc = %z) -> (f32) {{
            %p = loop.load %2[%h, %i, %k] strides [n*seq, n, 1] : f32
            %kvh = arith.divsi %h, %cg : index
            %r = arith.remsi %h, %cg : index
            %v = loop.load %1[%kvh, %r, %k, %d] strides [{d}*n, 0, {d}, 1] : f32
            %t = math.fma %p, %v, %acc : f32
            loop.yield %t : f32
          }}
          loop.store %s, %0[%h, %i, %d] strides [{d}*seq, {d}, 1] : f32
        }}
      }}
    }}
  }}
}}"""


def context(heads: int, kv_heads: int, d: int) -> loop.KernelOp:
    """Attention's context: ``out[h, i, :] = sum_k p[h, i, k] * v[h / g, k, :]``."""
    text = _CONTEXT.format(h=heads, kv=kv_heads, g=heads // kv_heads, d=d)
    return only_kernel(parse_module(text))


def _jammed(lanes: int) -> list[sched.Directive]:
    """The group's heads and the head dim jammed into the sum (3 heads of a KV head)."""
    return [S("d0", 3, "d0o", "d0i"), R(("d0o", "d1", "d0i", "d2")), V("d2", lanes),
            P("k"), P("k")]


def _schedules(lanes: int) -> dict[str, list[sched.Directive]]:
    pool = sched.Parallel("d0o")
    return {
        "whole": [*_jammed(lanes), D("k"), pool],
        "blocks of 16": [*_jammed(lanes), S("k", 16, "kb", "ki"), D("ki"), pool],
        "blocks of 3": [*_jammed(lanes), S("k", 3, "kb", "ki"), D("ki"), pool],
        "blocks of 3 peeled": [*_jammed(lanes), S("k", 3, "kb", "ki", peel=True), D("ki"),
                               D("k_tail"), pool],
    }


# positions: under one group of 16, whole groups and tails, blocks of 3 groups
# (48) and of 16 (256) whole, partial and with a tail; 1 and 2 query rows
POSITIONS = (1, 15, 16, 17, 47, 48, 49, 95, 256, 259, 531)
WORKLOADS = [Workload(f"seq {s} n {n}", {"seq": s, "n": n}) for n in POSITIONS for s in (1, 2)]


@pytest.mark.parametrize("arch", [a for a in arch_params(quick_on_host_only=True)
                                  if a.values[0].vector])
def test_distributed_context_is_bitwise(arch: Arch) -> None:
    reference = context(6, 2, 32)
    schedules = _schedules(arch.f32_lanes)
    candidates = [apply_directives(reference, d) for d in schedules.values()]
    for candidate in candidates:
        candidate.verify()
    for threads in THREADS:
        library = CandidateLibrary(reference, candidates, WORKLOADS, threads=threads)
        assert library.check() == [None] * len(candidates), (list(schedules), threads)


def test_distribute_splits_by_partial_and_keeps_what_each_reads() -> None:
    """16 partials x 3 heads x 2 vectors of the head dim: 16 loops of 6
    accumulators, each loading its rows' 2 vectors once for the 3 heads and a
    weight per head, the bounds and step of the loop before."""
    kernel = apply_directives(context(6, 2, 32), _jammed(16))
    (k,) = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
            and op.loop_name.data == "k"]
    bounds, carried = (k.lb, k.ub, k.step.data), list(k.inits)
    users = [{id(u.operation) for u in r.uses} for r in k.res]
    distribute(kernel, "k")
    kernel.verify()
    loops = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
             and op.loop_name.data.startswith("k_g")]
    assert [op.loop_name.data for op in loops] == [f"k_g{i}" for i in range(16)]
    for i, op in enumerate(loops):
        assert (op.lb, op.ub, op.step.data) == bounds
        assert list(op.inits) == carried[i::16]  # partial i of each of the 6 sums
        loads = [o for o in op.body.block.ops if isinstance(o, loop.LoadOp)]
        assert sorted(o.ptr.index for o in loads) == [1, 1, 2, 2, 2], i  # type: ignore[attr-defined]
        assert sum(o.name == "math.fma" for o in op.body.block.ops) == 6
    for j, old_users in enumerate(users):  # carried value j: partial j % 16 of a sum
        assert {id(u.operation) for u in loops[j % 16].res[j // 16].uses} == old_users


_TWO_SUMS = """builtin.module {{
  loop.kernel @k(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>) syms ["n"]
      access ["w", "r", "r"]
      footprints [#loop.fp<[3], [1]>, #loop.fp<[n], [1]>, #loop.fp<[n], [1]>] {{
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %z = arith.constant 0.0 : f32
    %a, %b, %c = loop.for "k" %k = %c0 to %n{parallel} iter(%x = %z, %y = %z, %w = %z)
        -> (f32, f32, f32) {{
      %u = loop.load %1[%k] strides [1] : f32
      %v = loop.load %2[%k] strides [1] : f32
      %unused = loop.load %2[%k] strides [1] : f32
      %x1 = arith.addf %x, %u : f32
      %y1 = arith.addf %y, {y} : f32
      %w1 = arith.addf %w, {w} : f32
      {body}
      loop.yield %x1, %y1, %w1 : f32, f32, f32
    }}
    loop.store %a, %0[%c0] strides [1] : f32
    loop.store %b, %0[%c1] strides [1] : f32
    loop.store %c, %0[%c2] strides [1] : f32{after}
  }}
}}"""


def _two_sums(y: str = "%u", w: str = "%v", body: str = "", parallel: str = "",
              after: str = "") -> loop.KernelOp:
    return only_kernel(parse_module(_TWO_SUMS.format(y=y, w=w, body=body, parallel=parallel,
                                         after=after)))


def _groups(kernel: loop.KernelOp) -> list[tuple[str, int]]:
    return [(op.loop_name.data, len(op.inits)) for op in kernel.walk()
            if isinstance(op, loop.ForOp)]


def test_groups_follow_shared_loads_and_carried_values() -> None:
    kernel = _two_sums()  # x and y read one load of %1, w its own of %2
    distribute(kernel, "k")
    assert _groups(kernel) == [("k_g0", 2), ("k_g1", 1)]
    g0, g1 = [op for op in kernel.walk() if isinstance(op, loop.ForOp)]
    assert sum(isinstance(o, loop.LoadOp) for o in g0.body.block.ops) == 1
    assert sum(isinstance(o, loop.LoadOp) for o in g1.body.block.ops) == 1  # unused: dropped
    kernel = _two_sums(y="%w")  # y's next value reads w: one group with w
    distribute(kernel, "k")
    assert _groups(kernel) == [("k_g0", 1), ("k_g1", 2)]
    stores = [op for op in kernel.walk() if isinstance(op, loop.StoreOp)]
    g0, g1 = [op for op in kernel.walk() if isinstance(op, loop.ForOp)]
    assert [s.value for s in stores] == [g0.res[0], g1.res[0], g1.res[1]]


def test_distribute_refusals_leave_the_kernel() -> None:
    unchanged(lambda k: distribute(k, "k"), _two_sums(y="%x", w="%u"),  # one group
               ScheduleError)
    store = "loop.store %u, %0[%c0] strides [1] : f32"
    unchanged(lambda k: distribute(k, "k"), _two_sums(body=store), NotPerfectlyNested)
    unchanged(lambda k: distribute(k, "k"), _two_sums(parallel=" parallel 1"),
               NestedParallel)
    unchanged(lambda k: distribute(k, "k"), context(2, 1, 16), LanesLoop)
    taken = _two_sums(after='\n    loop.for "k_g1" %j = %c0 to %c1 {\n    }')
    unchanged(lambda k: distribute(k, "k"), taken, NameTaken)


@pytest.mark.parametrize("peel", [False, True])
@pytest.mark.parametrize(("lb", "ub", "step", "factor"), [
    (0, 48, 16, 3), (0, 50, 16, 3), (5, 100, 16, 2), (0, 7, 4, 4), (3, 3, 8, 2),
    (0, 96, 16, 3)])
def test_split_of_a_stepped_loop_visits_the_same_indices(lb: int, ub: int, step: int,
                                                          factor: int, peel: bool) -> None:
    kernel = only_kernel(parse_module(f"""builtin.module {{
  loop.kernel @k(%0: !loop.ptr<f32>) syms [] access ["w"] footprints [#loop.fp<[128], [1]>] {{
    %lb = arith.constant {lb} : index
    %ub = arith.constant {ub} : index
    %x = arith.constant 1.0 : f32
    loop.for "k" %k = %lb to %ub step {step} {{
      loop.store %x, %0[%k] strides [1] : f32
    }}
  }}
}}"""))
    split(kernel, "k", factor, "ko", "ki", peel)
    kernel.verify()
    assert _visited(kernel.body.block, {}) == list(range(lb, ub, step))
    names = [op.loop_name.data for op in kernel.walk() if isinstance(op, loop.ForOp)]
    assert names == (["ko", "ki", "k_tail"] if peel else ["ko", "ki"])


def _visited(block, ivs: dict) -> list[int]:
    """The store indices, in order, of ``block`` run with loop indices ``ivs``
    (bounds evaluated with ``index_value``)."""
    out: list[int] = []
    for op in block.ops:
        if isinstance(op, loop.ForOp):
            lo, hi = index_value(op.lb, ivs), index_value(op.ub, ivs)
            for i in range(lo, hi, op.step.data):
                out += _visited(op.body.block, {**ivs, op.iv: i})
        elif isinstance(op, loop.StoreOp):
            out.append(index_value(op.indices[0], ivs))
    return out


def test_a_distributed_loop_is_not_named_again() -> None:
    schedule = sched.ScheduleOp.from_directives(
        "k", [D("k"), sched.Unroll("k")])
    with pytest.raises(VerifyException, match="loop 'k' was distributed into 'k_g0'"):
        schedule.verify()
    sched.ScheduleOp.from_directives("k", [D("k"), sched.Unroll("k_g0")]).verify()

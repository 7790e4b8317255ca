"""The ``distribute`` schedule primitive: loop fission of a reduction loop into
one loop per independent group of its carried values.

``distribute "k"`` splits loop ``k``'s carried values into groups that share
nothing but index arithmetic and constants: two carried values fall in one
group when the computation of one's next value reads the other, or when both
read one op's result that is not index arithmetic or a constant (a load, a
splat). Each group gets its own copy of ``k`` over the same bounds and step,
named ``k_g0``, ``k_g1``, ... in the order of the groups' first carried
values, holding the group's ops (index arithmetic cloned into every loop that
needs it; ops no carried value needs are dropped); the loops run one after
the other where ``k`` was, and ``k``'s results become theirs.

Why: after ``privatize`` a loop can carry more accumulators than there are
registers. Attention's context with grouped query heads (a KV head's 7 query
heads jammed, the head dim in 4 vectors, the positions' 16 explicit partials)
carries 7 x 4 x 16 vectors, all spilled to the stack and reloaded at every
FMA; the 16 partials touch different positions, so distributed, each loop
keeps one partial's 28 vectors in registers and loads each row of values once
for the 7 heads. ``split`` of ``k`` first bounds what a loop reads before the
next one runs (a block of positions), so the rows the first loop brings in
are still in the cache for the others.

Bitwise: every carried value goes through the same operations on the same
operands, iteration after iteration in the same order; only the interleaving
of independent computations changes. That needs loads that read the same
memory whenever they run: nothing in ``k`` stores (and the kernel's stores
are outside it).
"""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, Operation, SSAValue

from nanocompile.dialects import loop
from nanocompile.schedule.primitives import (
    _INDEX_OPS,
    LanesLoop,
    NameTaken,
    NestedParallel,
    NotPerfectlyNested,
    ScheduleError,
    _names,
    clone_ops,
    find_loop,
)

_CLONED = _INDEX_OPS  # index arithmetic and constants: each loop computes its own


def group_names(name: str, groups: int) -> list[str]:
    """The names ``distribute`` gives the loops of ``groups`` groups."""
    return [f"{name}_g{i}" for i in range(groups)]


def distribute(kernel: loop.KernelOp, name: str) -> None:
    """Split loop ``name`` into one loop per independent group of its carried values.

    Preconditions (typed; the kernel is unchanged when one fails): 1. loop
    ``name`` exists (``LoopNotFound``); 2. it is not a lanes loop
    (``LanesLoop``: its partials are one carried value) nor parallel
    (``NestedParallel``); 3. its body holds no store, ``loop.check``, loop or
    ``loop.if`` (``NotPerfectlyNested``); 4. its carried values form at least
    two groups (``ScheduleError``); 5. the new names are unused (``NameTaken``).
    """
    target = find_loop(kernel, name)
    where = f"distribute '{name}'"
    if target.lanes is not None:
        raise LanesLoop(f"{where}: a lanes loop's partials are one carried value "
                        "(vectorize it first)")
    if target.parallel is not None:
        raise NestedParallel(f"{where}: the loop is parallel")
    body = target.body.block
    last = body.last_op
    assert isinstance(last, loop.YieldOp)
    ops = [op for op in body.ops if op is not last]
    for op in ops:
        if op.regions or isinstance(op, (loop.StoreOp, loop.CheckOp)):
            raise NotPerfectlyNested(f"{where}: its body holds a {op.name}")
    groups = _groups(target, ops, list(last.values))
    if len(groups) < 2:
        raise ScheduleError(f"{where}: its carried values form one group (nothing to "
                            "distribute)")
    names = group_names(name, len(groups))
    taken = _names(kernel) & set(names)
    if taken:
        raise NameTaken(f"{where}: loop name(s) {sorted(taken)} already used")

    block = target.parent_block()
    assert block is not None
    results: dict[int, SSAValue] = {}
    for group, loop_name in zip(groups, names, strict=True):
        needed = _needed(ops, [last.values[j] for j in group])
        new_body = Block(arg_types=[IndexType(), *[target.iter_args[j].type for j in group]])
        mapping: dict[SSAValue, SSAValue] = {target.iv: new_body.args[0], **{
            target.iter_args[j]: new_body.args[1 + t] for t, j in enumerate(group)}}
        clone_ops([op for op in ops if op in needed], mapping, new_body)
        new_body.add_op(loop.YieldOp(*[mapping.get(last.values[j], last.values[j])
                                       for j in group]))
        new = loop.ForOp(loop_name, target.lb, target.ub, new_body,
                         [target.inits[j] for j in group], target.step.data)
        block.insert_op_before(new, target)
        results |= {j: new.res[t] for t, j in enumerate(group)}
    for j, old in enumerate(target.res):
        old.replace_all_uses_with(results[j])
    target.detach()
    target.erase()


def _groups(target: loop.ForOp, ops: list[Operation], yielded: list[SSAValue]
            ) -> list[list[int]]:
    """The carried values' groups (indices, each group and the groups in order)."""
    carried = {arg: j for j, arg in enumerate(target.iter_args)}
    parent = list(range(len(yielded)))

    def find(j: int) -> int:
        while parent[j] != j:
            parent[j] = parent[parent[j]]
            j = parent[j]
        return j

    def union(a: int, b: int) -> None:
        parent[find(a)] = find(b)

    inside = set(ops)
    readers: dict[Operation, int] = {}  # a shared op -> the first carried value reading it
    for j, value in enumerate(yielded):
        for v in _closure([value], inside):
            if v in carried:
                union(carried[v], j)
            elif v.owner in inside and not isinstance(v.owner, _CLONED):
                union(readers.setdefault(v.owner, j), j)  # type: ignore[arg-type]
    groups: dict[int, list[int]] = {}
    for j in range(len(yielded)):
        groups.setdefault(find(j), []).append(j)
    return sorted(groups.values())


def _closure(values: list[SSAValue], inside: set[Operation]) -> set[SSAValue]:
    """``values`` and every value they are computed from inside the loop body
    (the body's ops' results and block arguments)."""
    seen: set[SSAValue] = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v.owner in inside:
            stack.extend(v.owner.operands)  # type: ignore[union-attr]
    return seen


def _needed(ops: list[Operation], values: list[SSAValue]) -> set[Operation]:
    """The body's ops that ``values`` are computed from."""
    inside = set(ops)
    return {v.owner for v in _closure(values, inside) if v.owner in inside}  # type: ignore[misc]

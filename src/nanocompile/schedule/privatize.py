"""The ``privatize`` schedule primitive: unroll-and-jam around a reduction loop.

``privatize "k"`` takes the loop ``L`` directly around ``k`` (constant trip
count ``T``) and moves it inside ``k``: ``L``'s ``T`` iterations become ``T``
copies of ``k``'s body in one ``k`` loop, so the ``T`` accumulators (one per
copy: e.g. 4 vectors of output columns) are ``k``'s loop-carried values and
stay in registers, and a value loaded once per ``k`` (a row of ``x``) serves
every copy. What ``L`` computed before ``k`` runs first for every copy, what
it computed after (the epilogue and the stores) runs after ``k``, copy by
copy. Applied twice it jams two loops (rows and column tiles).

The copies then share their loads of one address (the same pointer and
indices, each copy's own index arithmetic compared by value, an index at
stride 0 aside: attention's keys, one KV head read by its query heads) and
their splats of one value; index arithmetic left unused goes.

Bitwise: each accumulator still adds its own terms in ``k`` order, and every
other value is computed from the same operands by the same operations; only
the interleaving of independent computations changes. That needs the loads
to read memory that no store of ``L`` changes: ``L`` must not load from an
argument the kernel writes.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block, Operation, SSAValue

from nanocompile.dialects import loop
from nanocompile.schedule.primitives import (
    _INDEX_OPS,
    CarriesValues,
    DynamicTripCount,
    NestedParallel,
    NotPerfectlyNested,
    ScheduleError,
    _depends_on,
    check_no_own_reads,
    clone_ops,
    find_loop,
    folded_const,
)

MAX_COPIES = 32


def privatize(kernel: loop.KernelOp, name: str) -> None:  # noqa: C901 (one check each)
    """Unroll-and-jam the loop around loop ``name`` into it.

    Preconditions (typed; the kernel is unchanged when one fails):
    1. loop ``name`` exists (``LoopNotFound``) and sits directly in a loop
       ``L`` (``NotPerfectlyNested`` otherwise) and stores nothing itself;
       2. ``L`` has a constant trip count of at most 32 (``DynamicTripCount``,
       ``ScheduleError``); 3. ``L`` carries no values (``CarriesValues``) and is not parallel
       (``NestedParallel``); 4. ``name`` is the only loop in ``L``, nothing before
       it stores or checks, nothing in ``L`` is a ``loop.check``, a
       ``loop.if`` only after ``name`` and storing nothing (the explicit
       partials' last terms of a vectorized sum of symbolic length, each
       copy's own), and ``name``'s bounds do not depend on ``L``
       (``NotPerfectlyNested``); 5. ``L`` loads no argument the kernel writes
       (``ReadsOwnWrites``).
    """
    inner = find_loop(kernel, name)
    outer = inner.parent_op()
    where = f"privatize '{name}'"
    if not isinstance(outer, loop.ForOp):
        raise NotPerfectlyNested(f"{where}: the loop is not nested in another loop")
    outer_name = outer.loop_name.data
    lo, hi = folded_const(outer.lb), folded_const(outer.ub)
    if lo is None or hi is None:
        raise DynamicTripCount(f"{where}: loop '{outer_name}' around it has no constant "
                               "trip count (split it first)")
    values = list(range(lo, hi, outer.step.data))
    if not 1 <= len(values) <= MAX_COPIES:
        raise ScheduleError(f"{where}: loop '{outer_name}' has {len(values)} iterations, "
                            f"expected 1 to {MAX_COPIES}")
    if outer.inits:
        raise CarriesValues(f"{where}: loop '{outer_name}' carries values")
    if outer.parallel is not None:
        raise NestedParallel(f"{where}: loop '{outer_name}' is parallel")
    body = [op for op in outer.body.block.ops if not isinstance(op, loop.YieldOp)]
    pos = body.index(inner)
    pre, post = body[:pos], body[pos + 1:]
    after = {id(o) for p in post if isinstance(p, loop.IfOp) for o in p.walk()}
    for op in outer.body.walk():
        if op is not inner and isinstance(op, loop.ForOp):
            raise NotPerfectlyNested(f"{where}: loop '{outer_name}' holds another loop, "
                                     f"'{op.loop_name.data}' (its copies would share names)")
        if isinstance(op, loop.CheckOp) or (isinstance(op, loop.IfOp) and id(op) not in after):
            raise NotPerfectlyNested(f"{where}: loop '{outer_name}' holds a {op.name}")
        if id(op) in after and isinstance(op, loop.StoreOp):
            raise NotPerfectlyNested(f"{where}: a loop.if after '{name}' stores")
    if any(isinstance(op, loop.StoreOp) for p in pre for op in p.walk()):
        raise NotPerfectlyNested(f"{where}: loop '{outer_name}' stores before '{name}'")
    if any(_depends_on(b, outer.iv) for b in (inner.lb, inner.ub)):
        raise NotPerfectlyNested(f"{where}: the bounds of '{name}' depend on "
                                 f"'{outer_name}'")
    if any(isinstance(op, loop.StoreOp) for op in inner.body.walk()):
        raise NotPerfectlyNested(f"{where}: '{name}' stores inside its body; the copies' "
                                 "stores would be reordered")
    check_no_own_reads(kernel, outer, where)

    block = outer.parent_block()
    assert block is not None
    setup = Block()
    maps: list[dict[SSAValue, SSAValue]] = []
    for v in values:
        const = arith.ConstantOp(IntegerAttr(v, IndexType()))
        setup.add_op(const)
        mapping: dict[SSAValue, SSAValue] = {outer.iv: const.result}
        clone_ops(pre, mapping, setup)
        maps.append(mapping)
    carried = len(inner.inits)
    inits = [m.get(v, v) for m in maps for v in inner.inits]
    jammed = Block(arg_types=[IndexType(), *[v.type for v in inits]])
    yielded: list[SSAValue] = []
    for t, mapping in enumerate(maps):
        mapping[inner.iv] = jammed.args[0]
        for j, arg in enumerate(inner.iter_args):
            mapping[arg] = jammed.args[1 + t * carried + j]
        ops = [op for op in inner.body.block.ops if not isinstance(op, loop.YieldOp)]
        clone_ops(ops, mapping, jammed)
        last = inner.body.block.last_op
        assert isinstance(last, loop.YieldOp)
        yielded += [mapping.get(v, v) for v in last.values]
    jammed.add_op(loop.YieldOp(*yielded))
    # bounds computed before the loop in L (independent of it): copy 0's clones
    lb, ub = (maps[0].get(v, v) for v in (inner.lb, inner.ub))
    new = loop.ForOp(name, lb, ub, jammed, inits, inner.step.data)
    inner.copy_order_to(new)  # a lanes loop keeps its lanes, tree and tail
    setup.add_op(new)
    for t, mapping in enumerate(maps):
        for j, res in enumerate(inner.res):
            mapping[res] = new.res[t * carried + j]
        clone_ops(post, mapping, setup)
    _share_loads(jammed)
    for op in list(setup.ops):
        op.detach()
        block.insert_op_before(op, outer)
    outer.detach()
    outer.erase()


def _same_index(a: SSAValue, b: SSAValue) -> bool:
    """``a`` and ``b`` are the same index: the same value, equal constants, or
    the same pure index op of the same indices (each copy computes its own)."""
    if a is b:
        return True
    x, y = a.owner, b.owner
    if isinstance(x, arith.ConstantOp) and isinstance(y, arith.ConstantOp):
        return x.value == y.value
    return (isinstance(x, _INDEX_OPS) and type(x) is type(y)
            and all(_same_index(u, v) for u, v in zip(x.operands, y.operands, strict=True)))


def _same_address(a: loop.LoadOp, b: loop.LoadOp) -> bool:
    """The two loads read the same element(s): the same pointer, strides and
    type, the same index wherever the stride is not 0."""
    return (a.ptr is b.ptr and a.strides == b.strides and a.result.type == b.result.type
            and all(s == 0 or _same_index(u, v) for u, v, s in
                    zip(a.indices, b.indices, a.stride_exprs, strict=True)))


def _share_loads(block: Block) -> None:
    """In the jammed loop's body (no store in it): one load for each group of
    loads of the same address, one splat of each value; the first stays, the
    others' uses read it, and the index arithmetic left unused goes."""
    loads: list[loop.LoadOp] = []
    splats: dict[SSAValue, Operation] = {}
    for op in list(block.ops):
        first: Operation | None = None
        if isinstance(op, loop.LoadOp):
            first = next((ld for ld in loads if _same_address(ld, op)), None)
            if first is None:
                loads.append(op)
        elif isinstance(op, loop.SplatOp):
            first = splats.setdefault(op.input, op)
            first = None if first is op else first
        if first is not None:
            op.results[0].replace_all_uses_with(first.results[0])
            op.detach()
            op.erase()
    for op in reversed(list(block.ops)):  # the removed copies' index arithmetic
        if isinstance(op, _INDEX_OPS) and not op.results[0].uses:
            op.detach()
            op.erase()

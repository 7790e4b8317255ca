"""The ``privatize`` schedule primitive: unroll-and-jam around a reduction loop.

``privatize "k"`` takes the loop ``L`` directly around ``k`` (constant trip
count ``T``) and moves it inside ``k``: ``L``'s ``T`` iterations become ``T``
copies of ``k``'s body in one ``k`` loop, so the ``T`` accumulators (one per
copy: e.g. 4 vectors of output columns) are ``k``'s loop-carried values and
stay in registers, and a value loaded once per ``k`` (a row of ``x``) serves
every copy. What ``L`` computed before ``k`` runs first for every copy, what
it computed after (the epilogue and the stores) runs after ``k``, copy by
copy. Applied twice it jams two loops (rows and column tiles).

The copies then share what they compute alike: a load whose address is the
same in every copy (the same pointer and indices, an index at stride 0
aside: attention's keys, one KV head read by its query heads) is loaded
once, and so is index arithmetic of the same operands.

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
       it stores or checks, nothing in ``L`` is a ``loop.if`` or
       ``loop.check``, and ``name``'s bounds do not depend on ``L``
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
    for op in outer.body.walk():
        if op is not inner and isinstance(op, loop.ForOp):
            raise NotPerfectlyNested(f"{where}: loop '{outer_name}' holds another loop, "
                                     f"'{op.loop_name.data}' (its copies would share names)")
        if isinstance(op, loop.IfOp | loop.CheckOp):
            raise NotPerfectlyNested(f"{where}: loop '{outer_name}' holds a {op.name}")
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
    _share_loads(jammed)
    new = loop.ForOp(name, inner.lb, inner.ub, jammed, inits, inner.step.data)
    inner.copy_order_to(new)  # a lanes loop keeps its lanes, tree and tail
    setup.add_op(new)
    for t, mapping in enumerate(maps):
        for j, res in enumerate(inner.res):
            mapping[res] = new.res[t * carried + j]
        clone_ops(post, mapping, setup)
    for op in list(setup.ops):
        op.detach()
        block.insert_op_before(op, outer)
    outer.detach()
    outer.erase()


_SHARED = (arith.ConstantOp, arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.DivSIOp,
           arith.RemSIOp, arith.MinSIOp, arith.MaxSIOp)


def _share_loads(block: Block) -> None:
    """One op for each group of the block's loads (no store runs in it) that
    read the same address, and of its pure index arithmetic on the same
    operands: the first stays, the others' uses read it."""
    seen: dict[tuple[object, ...], Operation] = {}
    for op in list(block.ops):
        if isinstance(op, loop.LoadOp):
            index = tuple(v if s != 0 else None
                          for v, s in zip(op.indices, op.stride_exprs, strict=True))
            key: tuple[object, ...] = (op.name, op.ptr, index, op.strides, op.result.type)
        elif isinstance(op, _SHARED) and not isinstance(op, arith.ConstantOp):
            key = (op.name, *op.operands, *op.result_types)
        elif isinstance(op, arith.ConstantOp):
            key = (op.name, op.value, *op.result_types)
        else:
            continue
        first = seen.setdefault(key, op)
        if first is not op:
            for old, new in zip(op.results, first.results, strict=True):
                old.replace_all_uses_with(new)
            op.detach()
            op.erase()

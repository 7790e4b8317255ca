"""Schedule primitives (phase 4). Implemented so far: ``parallel``, ``split``,
``reorder``, ``unroll``.

Every primitive checks all of its preconditions before it changes anything:
a primitive that raises has left the kernel exactly as it was.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntAttr, IntegerAttr, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from nanocompile.dialects import loop


class ScheduleError(ValueError):
    """A schedule primitive's precondition does not hold (the IR is unchanged)."""


class LoopNotFound(ScheduleError):
    """Precondition 1: exactly one loop of the kernel has the name."""


class CarriesValues(ScheduleError):
    """The loop has loop-carried values (its iterations depend on each other)."""


class NestedParallel(ScheduleError):
    """The loop is inside a parallel loop, or contains one."""


class SharedWrite(ScheduleError):
    """A store in the loop does not depend on its index: iterations would write
    the same elements."""


class LanesLoop(CarriesValues):
    """The loop is (or is inside) a lanes loop, whose reduction order only
    ``vectorize`` and ``privatize`` keep."""


class ReadsOwnWrites(ScheduleError):
    """The loop loads from an argument the kernel writes: reordering its
    iterations could read a value before or after a store it used to follow."""


def check_no_own_reads(kernel: loop.KernelOp, target: loop.ForOp, where: str) -> None:
    """Raise ``ReadsOwnWrites`` if ``target`` loads from an argument the kernel
    writes, unless the load is an in-place update of the iteration's own
    element: every store to that argument in ``target`` has the load's indices
    and strides, one of which is ``target``'s own index with a nonzero stride
    (each iteration reads and writes only its element, which no other
    iteration touches: a softmax's store loop dividing the terms its sum
    loop stored)."""
    written = {a for a, m in zip(kernel.args, kernel.modes, strict=True) if m == "w"}
    iv = target.body.block.args[0]
    for op in target.body.walk():
        if isinstance(op, loop.LoadOp) and op.ptr in written and not _own_element(op, target,
                                                                                  iv):
            index = kernel.args.index(op.ptr)
            raise ReadsOwnWrites(f"{where}: loop '{target.loop_name.data}' loads from "
                                 f"argument #{index}, which the kernel writes")


def _own_element(load: loop.LoadOp, target: loop.ForOp, iv: SSAValue) -> bool:
    address = (tuple(load.indices), load.stride_exprs)
    if not any(i is iv and st != 0 for i, st in zip(load.indices, load.stride_exprs,
                                                    strict=True)):
        return False
    stores = [op for op in target.body.walk()
              if isinstance(op, loop.StoreOp) and op.ptr is load.ptr]
    return all((tuple(st.indices), st.stride_exprs) == address for st in stores)


def arg_label(ptr: SSAValue) -> str:
    """``argument #i`` for a kernel argument (kernel arguments have no names)."""
    if isinstance(ptr, BlockArgument):
        return f"argument #{ptr.index}"
    return "a pointer"


def find_loop(kernel: loop.KernelOp, name: str) -> loop.ForOp:
    found = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
             and op.loop_name.data == name]
    if len(found) != 1:
        names = sorted({op.loop_name.data for op in kernel.walk() if isinstance(op, loop.ForOp)})
        raise LoopNotFound(f"@{kernel.sym_name.data}: {len(found)} loops named '{name}' "
                           f"(loops: {', '.join(names)})")
    return found[0]


def _depends_on(value: SSAValue, iv: SSAValue, seen: set[SSAValue] | None = None) -> bool:
    if value is iv:
        return True
    owner = value.owner
    if not isinstance(owner, Operation) or isinstance(owner, loop.ForOp):
        return False
    seen = set() if seen is None else seen
    if value in seen:
        return False
    seen.add(value)
    return any(_depends_on(v, iv, seen) for v in owner.operands)


def parallel(kernel: loop.KernelOp, name: str, grain: int = 1) -> None:
    """Run the iterations of loop ``name`` on the thread pool, in contiguous chunks.

    Preconditions:
    1. the kernel has exactly one loop named ``name`` (``LoopNotFound``);
    2. the loop carries no values (``CarriesValues``): iterations are independent;
    3. no enclosing or nested loop is already parallel (``NestedParallel``);
    4. every store inside depends on the loop's index through a non-zero stride
       (``SharedWrite``): each iteration writes its own elements.
    ``grain`` >= 1 is the fewest iterations worth a chunk (``ScheduleError``).

    Bitwise: each iteration computes exactly what it did serially; no sum is
    split between threads, so any thread count gives the same bits.
    """
    if grain < 1:
        raise ScheduleError(f"parallel '{name}': grain must be >= 1, got {grain}")
    target = find_loop(kernel, name)
    if target.inits:
        raise CarriesValues(f"parallel '{name}': the loop carries {len(target.inits)} "
                            "value(s) from one iteration to the next")
    outer = target.parent_op()
    while outer is not None and outer is not kernel:
        if isinstance(outer, loop.ForOp) and outer.parallel is not None:
            raise NestedParallel(f"parallel '{name}': enclosing loop "
                                 f"'{outer.loop_name.data}' is already parallel")
        if isinstance(outer, loop.ForOp) and outer.lanes is not None:
            raise LanesLoop(f"parallel '{name}': enclosing loop '{outer.loop_name.data}' is "
                            "a lanes loop")
        outer = outer.parent_op()
    for op in target.body.walk():
        if isinstance(op, loop.ForOp) and op.parallel is not None:
            raise NestedParallel(f"parallel '{name}': nested loop '{op.loop_name.data}' "
                                 "is already parallel")
        if isinstance(op, loop.StoreOp) and not any(
                stride != 0 and _depends_on(idx, target.iv)
                for idx, stride in zip(op.indices, op.stride_exprs, strict=True)):
            raise SharedWrite(f"parallel '{name}': a store does not depend on the "
                              "loop's index")
    target.properties["parallel"] = IntAttr(grain)


# --------------------------------------------------------------------------
# split, reorder, unroll
# --------------------------------------------------------------------------


class NameTaken(ScheduleError):
    """A loop name a primitive would introduce is already used in the kernel."""


class NotPerfectlyNested(ScheduleError):
    """The loops to reorder are not a perfect nest (other ops sit between them)."""


class DynamicTripCount(ScheduleError):
    """A full unroll needs a constant trip count."""


def _names(kernel: loop.KernelOp) -> set[str]:
    return {op.loop_name.data for op in kernel.walk() if isinstance(op, loop.ForOp)}


def _const(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return int(owner.value.value.data)
    return None


_FOLD: dict[type[Operation], Callable[[int, int], int]] = {
    arith.AddiOp: lambda a, b: a + b, arith.SubiOp: lambda a, b: a - b,
    arith.MuliOp: lambda a, b: a * b}


def folded_const(value: SSAValue) -> int | None:
    """``value`` when it is index arithmetic (add, sub, mul, a division of
    non-negative values) of constants only, e.g. ``split``'s tile count
    ``(ub - lb) / f`` of constant bounds; None otherwise."""
    c = _const(value)
    owner = value.owner
    if c is not None or not isinstance(owner, Operation) or len(owner.operands) != 2:
        return c
    a, b = (folded_const(v) for v in owner.operands)
    if a is None or b is None:
        return None
    fold = _FOLD.get(type(owner))
    if fold is not None:
        return fold(a, b)
    if isinstance(owner, arith.DivSIOp) and a >= 0 and b > 0:
        return a // b
    return None


def _insert_before(anchor: Operation, ops: list[Operation]) -> None:
    block = anchor.parent_block()
    assert block is not None
    for op in ops:
        block.insert_op_before(op, anchor)


def clone_ops(ops: Sequence[Operation], mapping: dict[SSAValue, SSAValue], into: Block) -> None:
    """Clone ``ops`` in order into ``into``, extending ``mapping`` with their results."""
    for op in ops:
        clone = op.clone(value_mapper=mapping)
        into.add_op(clone)
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new


def _clone_body(body: Block, mapping: dict[SSAValue, SSAValue], into: Block,
                skip_yield: bool = False) -> list[SSAValue]:
    """Clone ``body``'s ops into ``into`` with ``mapping``; returns what it yields."""
    clone_ops([op for op in body.ops if not isinstance(op, loop.YieldOp)], mapping, into)
    last = body.last_op
    yielded = [mapping.get(v, v) for v in last.values] if isinstance(last, loop.YieldOp) else []
    if isinstance(last, loop.YieldOp) and not skip_yield:
        into.add_op(loop.YieldOp(*yielded))
    return yielded


def _hoist_point(target: loop.ForOp, uses: list[SSAValue]) -> Operation:
    """The outermost loop around ``target`` (or ``target``) before which values
    computed from ``uses`` can be placed: loop-invariant setup stays out of the
    nest, which stays perfect for ``reorder``."""
    anchor: Operation = target
    parent = target.parent_op()
    while isinstance(parent, loop.ForOp):
        args = set(parent.body.block.args)
        if any(_depends_on(u, a) for u in uses for a in args) or any(
                u.owner is not None and _inside(u.owner, parent) for u in uses):
            break
        anchor, parent = parent, parent.parent_op()
    return anchor


def _inside(op: object, region_owner: Operation) -> bool:
    parent = op.parent_op() if isinstance(op, Operation) else None
    while parent is not None:
        if parent is region_owner:
            return True
        parent = parent.parent_op()
    return False


def tail_names(target: loop.ForOp) -> set[str]:
    """The loop names ``tail_loop`` gives: ``<name>_tail`` for the loop and every
    loop nested in it."""
    nested = [op.loop_name.data for op in target.body.walk() if isinstance(op, loop.ForOp)]
    return {f"{n}_tail" for n in [target.loop_name.data, *nested]}


def tail_loop(target: loop.ForOp, start: SSAValue, inits: Sequence[SSAValue]) -> loop.ForOp:
    """A copy of ``target`` running ``[start, ub)`` from ``inits``, named
    ``<name>_tail`` (nested loops too, so every name stays unique)."""
    block = Block(arg_types=[IndexType(), *[a.type for a in target.iter_args]])
    mapping: dict[SSAValue, SSAValue] = {target.iv: block.args[0], **dict(
        zip(target.iter_args, block.args[1:], strict=True))}
    _clone_body(target.body.block, mapping, block)
    for op in block.walk():
        if isinstance(op, loop.ForOp):
            op.properties["name"] = StringAttr(f"{op.loop_name.data}_tail")
    return loop.ForOp(f"{target.loop_name.data}_tail", start, target.ub, block, list(inits),
                      target.step.data)


def split(kernel: loop.KernelOp, name: str, factor: int, outer: str, inner: str,
          peel: bool = False) -> None:
    """Loop ``name`` over ``[lb, ub)`` becomes ``outer`` over ``ceil((ub - lb) /
    factor)`` tiles and ``inner`` over ``min(factor, ub - lb - tile * factor)``
    iterations: the last tile is the tail, guarded by its shorter bound, so the
    body stays one copy and every loop keeps a unique name. When constant
    bounds divide evenly, ``inner`` runs exactly ``factor`` iterations (a
    constant trip count, so it can be unrolled).

    With ``peel``, ``outer`` runs only the whole tiles (``inner`` always has
    ``factor`` iterations: a constant trip count, e.g. for ``privatize``) and
    the remaining ``(ub - lb) % factor`` iterations run after them in a copy of
    the loop named ``<name>_tail`` (its nested loops get the suffix too).

    A loop of step ``s`` (a vectorized sum's loop over groups of lanes) splits
    its iterations the same way: a tile is ``factor`` iterations, ``factor * s``
    of the index, and ``inner`` keeps step ``s`` (its index the offset from the
    tile's start).

    Preconditions: 1. the loop exists (``LoopNotFound``); 2. ``factor >= 2``;
    3. ``outer`` and ``inner`` (and with ``peel`` the ``_tail`` names) are
    unused (``NameTaken``); 4. it is not a lanes loop (``LanesLoop``).

    Bitwise: iterations run in the same order (tile-major), so even a loop
    carrying a sum adds the same terms in the same order.

    A loop from 0 indexed as ``i / factor`` and ``i % factor`` (attention's
    heads: ``h / 7`` is the KV head a query head reads, GQA) reads the tile
    indices instead, ``outer`` and ``inner`` (the same values: ``i = outer *
    factor + inner`` with ``0 <= inner < factor``), so a copy of the body per
    ``inner`` (``privatize``) sees the KV head as one value.
    """
    if factor < 2:
        raise ScheduleError(f"split '{name}': factor must be >= 2, got {factor}")
    target = find_loop(kernel, name)
    if target.lanes is not None:
        raise LanesLoop(f"split '{name}': a lanes loop's order is fixed by its lanes (vectorize "
                        "it instead)")
    taken = _names(kernel) & ({outer, inner} | (tail_names(target) if peel else set()))
    if taken:
        raise NameTaken(f"split '{name}': loop name(s) {sorted(taken)} already used")
    step = target.step.data
    if step != 1:
        _split_stepped(target, factor, outer, inner, peel)
        return
    lb, ub = target.lb, target.ub
    f = arith.ConstantOp(IntegerAttr(factor, IndexType()))
    f_minus_1 = arith.ConstantOp(IntegerAttr(factor - 1, IndexType()))
    zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
    n = arith.SubiOp(ub, lb)
    setup: list[Operation] = [f, zero, n]
    if peel:  # whole tiles only
        tiles = arith.DivSIOp(n, f)
    else:
        padded = arith.AddiOp(n, f_minus_1)
        tiles = arith.DivSIOp(padded, f)
        setup += [f_minus_1, padded]
    _insert_before(_hoist_point(target, [lb, ub]), [*setup, tiles])
    carried = [a.type for a in target.iter_args]
    outer_block = Block(arg_types=[IndexType(), *carried])
    io = outer_block.args[0]
    start = arith.MuliOp(io, f)                      # offset of this tile from lb
    base = arith.AddiOp(lb, start)
    lo, hi = _const(lb), _const(ub)
    exact = lo is not None and hi is not None and (hi - lo) % factor == 0
    if exact or peel:  # whole tiles: the inner loop has a constant trip count
        outer_block.add_ops([start, base])
        inner_ub = f.result
    else:
        left = arith.SubiOp(n, start)                # iterations left from here
        count = arith.MinSIOp(left, f)               # this tile's length
        outer_block.add_ops([start, left, count, base])
        inner_ub = count.result
    inner_block, i = _tile_body(target, base.result)
    if lo == 0:
        _fold_tile_index(inner_block, i, factor, io, inner_block.args[0])
    _replace_by_tiles(target, (outer, inner), (outer_block, inner_block), zero.result,
                      (tiles.result, inner_ub), 1, f.result if peel and not exact else None)


def _split_stepped(target: loop.ForOp, factor: int, outer: str, inner: str,
                   peel: bool) -> None:
    """``split`` of a loop of step ``s > 1``: ``count = ceil((ub - lb) / s)``
    iterations in tiles of ``factor``; ``inner`` runs the offsets ``[0, min(ub -
    base, factor * s))`` of its tile (step ``s``), from index ``base = lb + outer
    * factor * s``; with ``peel`` the whole tiles only (offsets ``[0, factor *
    s)``), the rest in ``<name>_tail``."""
    step = target.step.data
    lb, ub = target.lb, target.ub

    def index(v: int) -> arith.ConstantOp:
        return arith.ConstantOp(IntegerAttr(v, IndexType()))

    span, s_minus_1, s_const, f_const, zero = (index(v) for v in (
        factor * step, step - 1, step, factor, 0))
    n = arith.SubiOp(ub, lb)
    rounded = arith.AddiOp(n, s_minus_1)
    count = arith.DivSIOp(rounded, s_const)
    setup: list[Operation] = [span, s_minus_1, s_const, f_const, zero, n, rounded, count]
    if peel:  # whole tiles only
        tiles = arith.DivSIOp(count, f_const)
    else:
        f_minus_1 = index(factor - 1)
        padded = arith.AddiOp(count, f_minus_1)
        tiles = arith.DivSIOp(padded, f_const)
        setup += [f_minus_1, padded]
    _insert_before(_hoist_point(target, [lb, ub]), [*setup, tiles])
    carried = [a.type for a in target.iter_args]
    outer_block = Block(arg_types=[IndexType(), *carried])
    start = arith.MuliOp(outer_block.args[0], span)
    base = arith.AddiOp(lb, start)
    if peel:
        outer_block.add_ops([start, base])
        inner_ub: SSAValue = span.result
    else:
        left = arith.SubiOp(ub, base)
        end = arith.MinSIOp(left, span)
        outer_block.add_ops([start, base, left, end])
        inner_ub = end.result
    inner_block, _ = _tile_body(target, base.result)
    _replace_by_tiles(target, (outer, inner), (outer_block, inner_block), zero.result,
                      (tiles.result, inner_ub), step, span.result if peel else None)


def _tile_body(target: loop.ForOp, base: SSAValue) -> tuple[Block, SSAValue]:
    """The inner loop's body for ``split``: ``target``'s body at index ``base +
    offset`` (the block's first argument), its carried values the block's
    others; the block and the index."""
    block = Block(arg_types=[IndexType(), *[a.type for a in target.iter_args]])
    i = arith.AddiOp(base, block.args[0])
    block.add_op(i)
    mapping: dict[SSAValue, SSAValue] = {target.iv: i.result, **dict(
        zip(target.iter_args, block.args[1:], strict=True))}
    _clone_body(target.body.block, mapping, block)
    return block, i.result


def _replace_by_tiles(target: loop.ForOp, names: tuple[str, str], blocks: tuple[Block, Block],
                      zero: SSAValue, bounds: tuple[SSAValue, SSAValue], step: int,
                      tail_span: SSAValue | None) -> None:
    """``split``'s last step: ``target`` replaced by the loops ``names`` (outer
    over ``[0, bounds[0])`` tiles, inner over ``[0, bounds[1])`` by ``step``) of
    ``blocks`` carrying its values, then, with ``tail_span`` (the index extent
    of a tile), its copy ``<name>_tail`` from ``lb + tiles * tail_span``."""
    outer_block, inner_block = blocks
    inner_loop = loop.ForOp(names[1], zero, bounds[1], inner_block,
                            list(outer_block.args[1:]), step)
    outer_block.add_op(inner_loop)
    outer_block.add_op(loop.YieldOp(*inner_loop.res))
    outer_loop = loop.ForOp(names[0], zero, bounds[0], outer_block, list(target.inits))
    results = outer_loop.res
    new_ops: list[Operation] = [outer_loop]
    if tail_span is not None:
        whole = arith.MuliOp(bounds[0], tail_span)
        tail_start = arith.AddiOp(target.lb, whole)
        tail = tail_loop(target, tail_start.result, list(outer_loop.res))
        new_ops += [whole, tail_start, tail]
        results = tail.res
    _insert_before(target, new_ops)
    for old, new in zip(target.res, results, strict=True):
        old.replace_all_uses_with(new)
    target.detach()
    target.erase()


def _fold_tile_index(body: Block, index: SSAValue, factor: int, outer: SSAValue,
                     inner: SSAValue) -> None:
    """In ``body``, ``index / factor`` becomes ``outer`` and ``index % factor``
    ``inner`` (``index = outer * factor + inner``, ``0 <= inner < factor``,
    ``outer >= 0``: a split of a loop from 0)."""
    for op in list(body.walk()):
        if isinstance(op, arith.DivSIOp | arith.RemSIOp) and op.lhs is index \
                and _const(op.rhs) == factor:
            op.result.replace_all_uses_with(outer if isinstance(op, arith.DivSIOp) else inner)
            op.detach()
            op.erase()


_INDEX_OPS = (arith.ConstantOp, arith.AddiOp, arith.SubiOp, arith.MuliOp, arith.DivSIOp,
              arith.RemSIOp, arith.MinSIOp, arith.MaxSIOp)


def _index_prologue(outer: loop.ForOp, inner: loop.ForOp) -> list[Operation]:
    """The pure index arithmetic before ``inner`` in ``outer``'s body (``split``'s
    tile offsets), which ``reorder`` sinks into the innermost body; anything
    else beside ``inner`` makes the nest imperfect."""
    body = [op for op in outer.body.block.ops if not isinstance(op, loop.YieldOp)]
    if inner not in body or body[-1] is not inner or not all(
            isinstance(op, _INDEX_OPS) and all(isinstance(r.type, IndexType) for r in op.results)
            for op in body[:-1]):
        raise NotPerfectlyNested(f"reorder: loop '{outer.loop_name.data}' holds other "
                                 f"ops besides loop '{inner.loop_name.data}'")
    return body[:-1]


def _perfect_nest(kernel: loop.KernelOp, names: list[str]
                  ) -> tuple[list[loop.ForOp], list[Operation], list[Operation]]:
    """The nest outermost first, the index arithmetic between its loops that
    depends on their indices (sunk into the innermost body) and the one that
    does not (hoisted before the nest: e.g. a bound ``past + seq`` computed
    inside the nest)."""
    loops = [find_loop(kernel, n) for n in names]
    by_depth = sorted(loops, key=lambda op: _depth(op))
    prologue: list[Operation] = []
    for outer, inner in itertools.pairwise(by_depth):
        prologue += _index_prologue(outer, inner)
    ivs = [op.iv for op in loops]
    hoisted = [op for op in prologue
               if not any(_depends_on(v, iv) for v in op.operands for iv in ivs)]
    prologue = [op for op in prologue if op not in hoisted]
    sunk = {r for op in prologue for r in op.results}
    for op in by_depth[1:]:
        if any(_depends_on(b, v) for b in (op.lb, op.ub) for v in sunk):
            raise NotPerfectlyNested(f"reorder: the bounds of '{op.loop_name.data}' depend "
                                     "on index arithmetic of an outer loop of the nest")
    for op in loops:
        if op.inits:
            raise CarriesValues(f"reorder: loop '{op.loop_name.data}' carries values")
        if op.parallel is not None:
            raise NestedParallel(f"reorder: loop '{op.loop_name.data}' is parallel")
    iv_set = {op.iv for op in loops}
    for op in loops:
        for bound in (op.lb, op.ub):
            if any(_depends_on(bound, iv) for iv in iv_set):
                raise NotPerfectlyNested(f"reorder: the bounds of '{op.loop_name.data}' "
                                         "depend on another loop of the nest")
    return by_depth, prologue, hoisted


def _depth(op: Operation) -> int:
    depth = 0
    parent = op.parent_op()
    while parent is not None:
        depth += 1
        parent = parent.parent_op()
    return depth


def reorder(kernel: loop.KernelOp, names: list[str]) -> None:
    """Permute a perfect nest of loops to the order of ``names`` (outermost first).

    Preconditions: 1. every loop exists (``LoopNotFound``); 2. they form a
    perfect nest (``NotPerfectlyNested``: nothing between them but pure index
    arithmetic, e.g. ``split``'s tile offsets, which moves into the innermost
    body, or arithmetic independent of the nest's indices, e.g. a bound
    ``past + seq``, which moves before the nest; bounds independent of the
    nest's indices and of the arithmetic that moves in);
    3. none carries values
    (``CarriesValues``: reordering a sum would reorder its terms) or is
    parallel. Bitwise: each innermost iteration computes its own elements
    from the same operands; only the order of independent iterations changes.
    """
    if len(set(names)) != len(names) or len(names) < 2:
        raise ScheduleError(f"reorder: expected at least two distinct loops, got {names}")
    nest, prologue, hoisted = _perfect_nest(kernel, names)
    for op in hoisted:  # invariant index arithmetic: before the nest, in order
        op.detach()
        _insert_before(nest[0], [op])
    innermost = nest[-1]
    by_name = {op.loop_name.data: op for op in nest}
    body_ops = prologue + [op for op in innermost.body.block.ops
                           if not isinstance(op, loop.YieldOp)]
    new_blocks = [Block(arg_types=[IndexType()]) for _ in names]
    mapping = {by_name[n].iv: blk.args[0] for n, blk in zip(names, new_blocks, strict=True)}
    for op in body_ops:
        op.detach()
        new_blocks[-1].add_op(op)
    for old, new in mapping.items():
        old.replace_all_uses_with(new)
    inner_op: loop.ForOp | None = None
    for name, blk in reversed(list(zip(names, new_blocks, strict=True))):
        if inner_op is not None:
            blk.add_op(inner_op)
        src = by_name[name]
        inner_op = loop.ForOp(name, src.lb, src.ub, blk, [], src.step.data)
    assert inner_op is not None
    outermost = nest[0]
    _insert_before(outermost, [inner_op])
    outermost.detach()
    outermost.erase(safe_erase=False)


def unroll(kernel: loop.KernelOp, name: str, factor: int | None = None) -> None:
    """Replicate the body of loop ``name``: fully (``factor`` None: the loop
    disappears) or by ``factor`` (a ``split`` whose inner loop is then unrolled).

    Preconditions: 1. the loop exists; 2. a full unroll needs constant bounds
    (``DynamicTripCount``) and at most 64 iterations. Bitwise: the copies run
    in iteration order, carrying values from one copy to the next.
    """
    if factor is not None:
        split(kernel, name, factor, f"{name}_o", f"{name}_u")
        unroll(kernel, f"{name}_u")
        return
    target = find_loop(kernel, name)
    if target.lanes is not None:
        raise LanesLoop(f"unroll '{name}': a lanes loop's order is fixed by its lanes "
                        "(vectorize it instead)")
    lo, hi = _const(target.lb), _const(target.ub)
    if lo is None or hi is None:
        raise DynamicTripCount(f"unroll '{name}': the trip count is not a constant")
    if hi - lo > 64:
        raise ScheduleError(f"unroll '{name}': {hi - lo} iterations is more than 64")
    values: list[SSAValue] = list(target.inits)
    block = target.parent_block()
    assert block is not None
    scratch = Block()
    for i in range(lo, hi, target.step.data):
        c = arith.ConstantOp(IntegerAttr(i, IndexType()))
        scratch.add_op(c)
        mapping: dict[SSAValue, SSAValue] = {target.iv: c.result,
                                             **dict(zip(target.iter_args, values, strict=True))}
        values = _clone_body(target.body.block, mapping, scratch, skip_yield=True)
    for op in list(scratch.ops):
        op.detach()
        block.insert_op_before(op, target)
    for old, new in zip(target.res, values, strict=True):
        old.replace_all_uses_with(new)
    target.detach()
    target.erase()

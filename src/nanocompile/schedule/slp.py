"""The ``slp`` schedule primitive: the jammed copies' epilogues as the lanes of
one vector (superword-level parallelism, as LLVM's SLP vectorizer).

After ``privatize`` jams ``T`` copies of a matmul's result into its reduction
loop ``k``, the code after ``k`` is ``T`` copies of one epilogue, each scalar
(a copy: the ops its values connect, wherever they stand): the lanesums of
the copy's accumulators, what the kernel computes from them (a bias, a
residual, gate/up's SwiGLU with its ``exp`` and division) and the store.
``slp "k" width 4`` runs each group of 4 consecutive copies as the 4 lanes
of ``vector<4xf32>`` values: copy ``l`` of a group is lane ``l``. Per group, in this order:

1. the ops that use no vectorized value, as they were (the scalar leaves:
   loads, index arithmetic, constants, the vector adds that end an AVX2 sum);
2. the operands of the vector ops: 4 lanesums of the same vector type as one
   ``loop.lanesums`` (lane ``i``: the halving tree of operand ``i``, the
   lanesum's bits), a value or equal constants every lane shares as a
   ``loop.splat``, other f32 lanes as a ``loop.vpack``;
3. every float op of the epilogue ``vectorize`` has a vector form for
   (``addf``, ``subf``, ``mulf``, ``divf``, ``maximumf``, ``negf``, ``exp``,
   ``sqrt``, ``fma``, ``cmpf``, ``select``), as that op on the vectors;
4. the ops that use a vectorized value (the stores), lane by lane in the
   copies' order, each reading its lane through ``loop.extract``.

First, the lane-wise float ops and the loads of arguments the kernel does not
write that stand ahead of ``k`` and that only the epilogue uses move after
``k`` (``_sink_prologue``: kernel B's up projection computes SiLU of the gate
it loads before its sum), to be vectorized with it; a refusal puts them back.

Bitwise: lane ``l`` performs exactly copy ``l``'s operations on the same
operands (the vector forms are lane-wise the scalar ops, ``exp`` included:
``targets/c_expf.py``), so every value is the scalar one; the stores keep
their order, and the loads that move ahead of them read no argument the
kernel writes. Two or more copies left over (``T`` not a multiple of 4)
run as the first lanes of one more group whose other lanes repeat the last
copy's operands (computed, never stored: lanes are independent); a single
one stays scalar (its vector form would cost as much).

Refused, leaving the kernel unchanged (``ScheduleError`` subclasses): loop
``k`` missing; code after it that is not straight-line (``EpilogueNotCopies``:
a loop, ``loop.if`` or ``loop.check``) or not ``width`` or more isomorphic
copies (``EpilogueNotCopies``); an epilogue that loads an argument the kernel
writes (``ReadsOwnWrites``) or has no op with a vector form
(``NotVectorizable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import f32, i1
from xdsl.ir import Operation, SSAValue

from nanocompile.dialects import loop
from nanocompile.dialects.sched import SLP_WIDTHS
from nanocompile.schedule.primitives import ReadsOwnWrites, ScheduleError, find_loop
from nanocompile.schedule.vectorize import NotVectorizable

_BINARY = (arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.MaximumfOp)
_UNARY = (arith.NegfOp, xmath.ExpOp, xmath.SqrtOp)


class EpilogueNotCopies(ScheduleError):
    """The code after the loop is not straight-line copies of one epilogue."""


def _lanewise(op: Operation) -> bool:
    """An op with a lane-wise vector form, on scalars."""
    if isinstance(op, arith.CmpfOp):
        return op.lhs.type == f32
    if isinstance(op, (arith.SelectOp, xmath.FmaOp, *_BINARY, *_UNARY)):
        return op.results[0].type == f32
    return False


def _same_shape(a: Operation, b: Operation) -> bool:
    return (a.name == b.name and a.properties == b.properties and a.attributes == b.attributes
            and [r.type for r in a.results] == [r.type for r in b.results]
            and len(a.operands) == len(b.operands) and not a.regions and not b.regions)


def _segments(tail: Sequence[Operation], width: int) -> list[list[Operation]] | None:
    """``tail`` as its copies: the ops connected by their values (each copy's own
    chain, wherever a schedule put its ops: ``vectorize`` after ``privatize``
    prints every copy's lanesum before the first epilogue), in order of their
    first op, when there are ``width`` or more and all are isomorphic."""
    parent = list(range(len(tail)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    index = {op: i for i, op in enumerate(tail)}
    for i, op in enumerate(tail):
        for value in op.operands:
            owner = value.owner
            if isinstance(owner, Operation) and owner in index:
                parent[root(i)] = root(index[owner])
    copies: dict[int, list[Operation]] = {}
    for i, op in enumerate(tail):
        copies.setdefault(root(i), []).append(op)
    segs = sorted(copies.values(), key=lambda seg: index[seg[0]])
    if len(segs) < width or not all(_isomorphic(segs[0], seg) for seg in segs[1:]):
        return None
    return segs


def _isomorphic(first: list[Operation], other: list[Operation]) -> bool:
    """Op by op the same, each operand from the same position of its own copy or
    from outside both."""
    if len(first) != len(other):
        return False
    for a, b in zip(first, other, strict=True):
        if not _same_shape(a, b):
            return False
        for va, vb in zip(a.operands, b.operands, strict=True):
            if _position(first, va) != _position(other, vb):
                return False
    return True


def _position(seg: list[Operation], value: SSAValue) -> int | None:
    """The place in ``seg`` of the op computing ``value`` (None: outside it)."""
    owner = value.owner
    if isinstance(owner, Operation):
        for i, op in enumerate(seg):
            if op is owner:
                return i
    return None


@dataclass
class _Group:
    """One group of ``width`` copies being rewritten; the plan (``vector``,
    ``after``) is the same for every group, computed on the first copy."""

    lanes: list[list[Operation]]
    vector: set[int]
    after: set[int]
    real: int = 0  # the lanes that are copies (0: all); the rest repeat the last one
    made: dict[tuple[SSAValue, ...], SSAValue] = field(default_factory=dict)
    out: list[Operation] = field(default_factory=list)

    @property
    def copies(self) -> list[list[Operation]]:
        """The lanes that are copies, without the padding."""
        return self.lanes[:self.real] if self.real else self.lanes

    def lane_values(self, pos: int, operand: int) -> tuple[SSAValue, ...]:
        return tuple(seg[pos].operands[operand] for seg in self.lanes)


def _packable(values: tuple[SSAValue, ...]) -> bool:
    """Lanes a vector can be made of (step 2): f32, or one shared i1."""
    if all(v.type == f32 for v in values):
        return True
    return values[0].type == i1 and all(v is values[0] for v in values)


def _plan(segs: list[list[Operation]], width: int) -> tuple[set[int], set[int]]:
    """The positions computed as vectors (lane-wise ops whose operands are
    vectors or lanes step 2 can make, of every group) and those of step 4 (ops
    with effects, and the others that use a vector, directly or not)."""
    seg = segs[0]
    groups = [segs[g:g + width] for g in range(0, len(segs) - width + 1, width)]
    vector: set[int] = set()
    after: set[int] = set()
    for pos, op in enumerate(seg):
        inner = [_position(seg, v) for v in op.operands]
        if any(i in after for i in inner):
            after.add(pos)
            continue
        if _lanewise(op) and all(
                i in vector or _packable(tuple(lane[pos].operands[j] for lane in group))
                for j, i in enumerate(inner) for group in groups):
            vector.add(pos)
        elif any(i in vector for i in inner) or isinstance(op, loop.StoreOp):
            after.add(pos)
    return vector, after


def _operand(group: _Group, values: tuple[SSAValue, ...], width: int) -> SSAValue:
    """The vector of ``values`` (one per lane), made once per group (step 2); a
    shared ``i1`` stays the scalar condition of a ``loop.vselect``."""
    if values in group.made:
        return group.made[values]
    first = values[0]
    if first.type == i1:
        return first
    owners = [v.owner for v in values]
    consts = [o for o in owners if isinstance(o, arith.ConstantOp)]
    sums = [o for o in owners if isinstance(o, loop.LaneSumOp) and o.tree is None]
    if all(v is first for v in values) or (
            len(consts) == width and len({c.value for c in consts}) == 1):
        new: Operation = loop.SplatOp(first, width)
    elif len(sums) == width and len({o.input.type for o in sums}) == 1:
        new = loop.LaneSumsOp([o.input for o in sums])
    else:
        new = loop.VPackOp(list(values))
    group.out.append(new)
    group.made[values] = new.results[0]
    return new.results[0]


def _vector_op(op: Operation, operands: list[SSAValue]) -> Operation:
    if isinstance(op, arith.CmpfOp):
        pred = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
        return loop.VCmpOp(pred, operands[0], operands[1])
    if isinstance(op, arith.SelectOp):
        return loop.VSelectOp(*operands)
    if isinstance(op, xmath.FmaOp):
        return xmath.FmaOp(operands[0], operands[1], operands[2])
    return type(op)(*operands)


def slp(kernel: loop.KernelOp, name: str, width: int) -> None:
    """Vectorize the copies of the epilogue after loop ``name`` in groups of
    ``width`` lanes (the module docstring)."""
    where = f"slp '{name}'"
    if width not in SLP_WIDTHS:
        raise ScheduleError(f"{where}: width {width}, expected one of {list(SLP_WIDTHS)}")
    k = find_loop(kernel, name)
    sunk = _sink_prologue(kernel, k)
    try:
        _slp_after(kernel, k, where, width)
    except ScheduleError:
        _unsink(sunk)
        raise


def _slp_after(kernel: loop.KernelOp, k: loop.ForOp, where: str, width: int) -> None:
    """``slp`` on the code after ``k`` (its prologue already moved there)."""
    tail: list[Operation] = []
    op = k.next_op
    while op is not None and not isinstance(op, loop.YieldOp):
        tail.append(op)
        op = op.next_op
    for op in tail:
        if op.regions or isinstance(op, loop.CheckOp):
            raise EpilogueNotCopies(f"{where}: the code after the loop holds a {op.name}")
    segs = _segments(tail, width)
    if segs is None:
        raise EpilogueNotCopies(f"{where}: the {len(tail)} ops after the loop are not "
                                f"{width} or more copies of one epilogue")
    written = {a for a, m in zip(kernel.args, kernel.modes, strict=True) if m == "w"}
    for op in tail:
        if isinstance(op, loop.LoadOp) and op.ptr in written:
            raise ReadsOwnWrites(f"{where}: the epilogue loads argument "
                                 f"#{kernel.args.index(op.ptr)}, which the kernel writes")
    vector, after = _plan(segs, width)
    if not vector:
        raise NotVectorizable(f"{where}: no op of the epilogue has a vector form")
    for g in range(0, len(segs) - width + 1, width):
        _rewrite(_Group(segs[g:g + width], vector, after), width)
    rest = len(segs) % width
    if rest >= 2:  # the copies left over as the first lanes, the last one repeated
        lanes = segs[-rest:] + [segs[-1]] * (width - rest)
        _rewrite(_Group(lanes, vector, after, real=rest), width)


def _sink_prologue(kernel: loop.KernelOp, k: loop.ForOp) -> list[tuple[Operation, Operation]]:
    """Move the ops before loop ``k`` whose values only the code after it uses
    (directly or through other such ops) to just after it, in their order: the
    lane-wise float ops, and the loads of arguments the kernel does not write.
    An epilogue's part that does not need the sum (kernel B's up projection
    computes SiLU of the gate, a value it loads, ahead of its reduction):
    held across ``k``, its values took registers from the accumulators; moved,
    ``slp`` runs it with the epilogue, as vectors. The loads read memory no
    op writes, the float ops none, and their operands are defined before
    ``k``: each computes the same value after it. Returns each moved op with
    the op it stood before (``_unsink``)."""
    block = k.parent_block()
    assert block is not None
    written = {a for a, m in zip(kernel.args, kernel.modes, strict=True) if m == "w"}
    before: list[Operation] = []
    op = k.prev_op
    while op is not None:
        before.append(op)
        op = op.prev_op
    after = set()
    op = k.next_op
    while op is not None:
        after.add(op)
        op = op.next_op
    sunk: list[tuple[Operation, Operation]] = []
    for op in before:  # last first: an op's users are settled before it
        movable = _lanewise(op) or (isinstance(op, loop.LoadOp) and op.ptr not in written
                                    and op.result.type == f32)
        if movable and op.results and all(use.operation in after
                                          for r in op.results for use in r.uses):
            nxt = op.next_op
            assert nxt is not None  # k follows
            sunk.append((op, nxt))
            after.add(op)
    anchor = k.next_op
    for op, _ in reversed(sunk):  # in their order, right after k
        op.detach()
        if anchor is None:
            block.add_op(op)
        else:
            block.insert_op_before(op, anchor)
    return sunk


def _unsink(sunk: list[tuple[Operation, Operation]]) -> None:
    """Put the ops ``_sink_prologue`` moved back where they stood (the last one
    first: the op it stood before is then in place)."""
    for op, nxt in sunk:
        op.detach()
        block = nxt.parent_block()
        assert block is not None
        block.insert_op_before(op, nxt)


def _rewrite(group: _Group, width: int) -> None:
    """Replace the group's ops by steps 1-4 (the module docstring), in place."""
    size = len(group.lanes[0])
    leaves = [lane[p] for lane in group.copies for p in range(size)
              if p not in group.vector and p not in group.after]
    vectors = _vector_ops(group, width)
    late = _lane_ops(group, vectors)
    seg = group.lanes[0]
    parent = seg[0].parent_block()
    assert parent is not None
    anchor = group.lanes[-1][-1].next_op
    old = [lane[p] for lane in group.copies for p in sorted(group.vector)]
    for op in [*leaves, *group.out, *late]:
        if op.parent is not None:
            op.detach()
        if anchor is None:
            parent.add_op(op)
        else:
            parent.insert_op_before(op, anchor)
    for op in reversed(old):  # the scalar forms of the vectorized ops: no uses left
        op.detach()
        op.erase()
    for op in reversed(leaves):  # lanesums loop.lanesums took over, constants a splat read
        if isinstance(op, loop.LaneSumOp | arith.ConstantOp) and \
                all(not r.uses for r in op.results):
            op.detach()
            op.erase()


def _vector_ops(group: _Group, width: int) -> dict[int, SSAValue]:
    """Steps 2 and 3 into ``group.out``: per vectorized position, its vector."""
    vectors: dict[int, SSAValue] = {}
    seg = group.lanes[0]
    for pos in sorted(group.vector):
        operands = []
        for j, value in enumerate(seg[pos].operands):
            inner = _position(seg, value)
            if inner in group.vector:
                operands.append(vectors[inner])
            else:
                operands.append(_operand(group, group.lane_values(pos, j), width))
        new = _vector_op(seg[pos], operands)
        group.out.append(new)
        vectors[pos] = new.results[0]
    return vectors


def _lane_ops(group: _Group, vectors: dict[int, SSAValue]) -> list[Operation]:
    """Step 4: the ops after the vectors, lane by lane, their vector operands
    replaced by ``loop.extract`` of their lane (new ops, then the old ones)."""
    extracts: dict[tuple[int, int], SSAValue] = {}
    late: list[Operation] = []
    for lane, ops in enumerate(group.copies):
        for pos in sorted(group.after):
            op = ops[pos]
            for j, value in enumerate(op.operands):
                inner = _position(ops, value)
                if inner not in group.vector:
                    continue
                if (inner, lane) not in extracts:
                    ext = loop.ExtractOp(vectors[inner], lane)
                    late.append(ext)
                    extracts[inner, lane] = ext.result
                op.operands[j] = extracts[inner, lane]
            late.append(op)
    return late

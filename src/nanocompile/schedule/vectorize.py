"""The ``vectorize`` schedule primitive: ``W`` iterations of a loop as the
lanes of one f32 vector.

The loop ``name`` over ``[lb, ub)`` becomes a main loop over ``[lb, mid)``
with step ``W`` whose body computes iterations ``i .. i + W - 1`` at once
(iteration ``i + l`` in lane ``l``), then the unchanged scalar body over
``[mid, ub)`` (the tail, loop ``<name>_tail``; its nested loops get the same
suffix). Each lane executes exactly the operations the scalar iteration
executes, in the same order, so the result is bitwise the scalar one:

* a value that does not depend on the lane (*uniform*) is computed once, as
  a scalar, and broadcast (``loop.splat``) where a lane-varying op uses it;
* an index that varies with the lane must be ``base + lane`` (coefficient
  one); it may only address memory at a position with stride 1 (consecutive
  lanes read consecutive elements), or pass through ``divsi``/``remsi`` by a
  tile ``T`` when its base is a known multiple of ``W`` and ``W`` divides
  ``T`` (the lanes stay in one tile: a packed weight's column ``n / T``,
  ``n % T``, or ``k / 64``, ``k % 64`` reading heads as one row), or through
  ``divsi`` by a ``T`` that divides ``W`` (a *block index*, ``base / T + l
  div T``: only a stride-1 load of f32 may use it, read as ``W / T`` scalars
  each in ``T`` lanes, ``loop.vpack``; kernel B's scale of block ``t div 8``
  in vectors of 16 lane terms, two blocks);
* a compare of such an index ``base + lane`` with a uniform ``c`` is uniform
  when it is ``<`` (or ``>=``, either side) and ``base`` and ``c`` are known
  multiples of ``W``: all ``W`` lanes lie on one side of ``c`` (a
  concatenation's select of its part, e.g. RoPE's halves, read by vectors
  within one part); it is computed once on the base;
* a loop nested in the vectorized one keeps its order; its loop-carried
  values become vectors, so lane ``l`` sums its own terms in the scalar order
  (a nested lanes loop of symbolic trip count gets its partials explicit:
  ``_Builder``).

Refused, leaving the kernel untouched (each a ``ScheduleError`` subclass):
a loop that carries values itself (a reduction across lanes), integer index
arithmetic that differs per lane other than the forms above, a lane-varying
index at a stride other than 1, a store whose address does not depend on the
lane, a ``loop.if`` or ``loop.check`` whose condition depends on the lane (a
blend would load both branches; a ``loop.if`` on a uniform condition is kept
as a branch whose taken side yields vectors), and lane-varying values of a type or op
without an exact vector form (integer data, casts), and a loop that
loads from an argument the kernel writes (a recurrence through memory).

A row's max (a loop carrying ``acc = arith.maximumf(acc, x)``: NaN-propagating,
``nc_maxf``) is the one reduction across lanes vectorized, exactly: lane ``l``
takes the max of the iterations ``i + l`` (the same ``nc_maxf`` per lane),
the lanes' results (by halves down to 4 lanes, then in order) and then the
tail's iterations are folded into one value ``r``, and where ``r`` is NaN or
zero the original loop runs again
(``<name>_seq``) and its result is taken instead. Every ``nc_maxf`` returns
one of its operands, so ``r`` is the init's or an element's bits; a NaN
anywhere makes ``r`` NaN; otherwise ``r`` has the largest value, and a
nonzero float value has one encoding, so ``r`` is the sequential result's
bits. Only which NaN (its payload) and which zero (its sign) wins depend on
the order, and those cases take the sequential result.

A lane-varying load of bf16 data is vectorized when its every use is the
exact widening ``arith.extf`` to f32: a ``vector<Wxbf16>`` load (``W`` bf16
bit patterns) and one ``arith.extf`` of the vector, whose lane ``l`` is the
scalar widening of element ``l`` (the C target: zero-extend to 32 bits,
shift left by 16). A lane-varying load of i8 data (int8 weights) likewise
when its every use is ``arith.sitofp`` to f32: a ``vector<Wxi8>`` load and a
``loop.vsitofp`` (the C target: sign-extend to 32 bits, convert exactly).

spec §5 kernel B's lane terms (``loop.dot4`` of two ``vector<4xi8>`` loads
from column ``4 t``, ``emit_matmul_i8``): the index ``(base + lane) * 4``,
when only such 4-byte groups read it, steps by 4 per lane, so a group load
whose address steps by 4 bytes per lane (stride 1) is a ``vector<4Wxi8>``
load of the ``W`` lanes' bytes; ``loop.dot4`` of two of them is ``W`` lanes
of i32 (lane ``l`` the scalar term ``t + l``'s exact integer), and its
``arith.sitofp`` a ``loop.vsitofp``. A group read by anything else, or ``4
t`` addressing single elements, is refused (``NoVectorForm``,
``LaneIndexArithmetic``).

Kernel B's quantization of the activations (``round``, clamp to [-127, 127],
``arith.fptosi`` to i8, stored): ``math.round`` is a float op like the
others (C: ``roundf`` per lane, halves away from zero, exactly), and an f32
-> i8 ``arith.fptosi`` whose every use is a store becomes ``loop.vfptosi``,
stored as a ``vector<Wxi8>``; any other integer result is refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    StringAttr,
    VectorType,
    bf16,
    f32,
    i1,
    i8,
)
from xdsl.ir import Block, Operation, SSAValue

from nanocompile.dialects import loop
from nanocompile.dialects.loop.vector import VectorSplit, halving_tree, lane_bits
from nanocompile.schedule.primitives import (
    CarriesValues,
    NameTaken,
    ScheduleError,
    _const,
    _hoist_point,
    _insert_before,
    _names,
    arg_label,
    check_no_own_reads,
    clone_ops,
    find_loop,
    tail_loop,
    tail_names,
)

WIDTHS = (4, 8, 16)
_HUGE = 1 << 40  # the alignment of 0: a multiple of everything


class NotVectorizable(ScheduleError):
    """The loop body has no exact vector form."""


class CrossLaneReduction(CarriesValues, NotVectorizable):
    """Precondition 2: the loop carries a value (a sum across iterations would
    become a sum across lanes)."""


class LaneIndexArithmetic(NotVectorizable):
    """Precondition 3: integer index arithmetic that differs per lane in a way
    a vector cannot express (a coefficient other than 1, a per-lane compare,
    a division that splits the lanes)."""


class NonContiguous(NotVectorizable):
    """Precondition 4: a lane-varying index addresses memory at a stride other
    than 1 (or at two positions): the lanes would not be consecutive."""


class UniformStore(NotVectorizable):
    """Precondition 5: a store's address does not depend on the lane: every
    lane would write the same element."""


class LaneBranch(NotVectorizable):
    """Precondition 6: a ``loop.if`` or ``loop.check`` depends on the lane; a
    blend would execute (and load) both branches."""


class NoVectorForm(NotVectorizable):
    """Precondition 7: a lane-varying value of a type or op with no exact
    vector form (integer data, bf16 data other than widened to f32, casts)."""


class RaggedLanes(NotVectorizable):
    """A lanes loop whose trip count is not a known multiple of its lanes (of
    its tail's lanes, when it has a tail), or whose lanes the width does not
    divide: the vectors would not hold whole lane groups."""


class LanesTree(NotVectorizable):
    """A lanes loop whose tree does not combine the vectors of ``width``
    lanes first (its first bits must be the bits that select a vector), or
    whose tail's groups are narrower than a vector."""


@dataclass(frozen=True)
class Lane:
    """An index value: ``base + coef * lane``, ``base`` a multiple of ``align``;
    with ``repeat`` ``T > 1``, ``base + lane div T`` (a block index: ``T``
    lanes share each value, only a stride-1 load may use it)."""

    coef: int
    align: int
    repeat: int = 1


_FLOAT_BINARY = (arith.AddfOp, arith.SubfOp, arith.MulfOp, arith.DivfOp, arith.MaximumfOp)
_FLOAT_TERNARY = (xmath.FmaOp,)
_FLOAT_UNARY = (arith.NegfOp, xmath.ExpOp, xmath.SqrtOp, xmath.SinOp, xmath.CosOp,
                xmath.RoundOp)


def _is_widening(op: Operation) -> bool:
    """The exact bf16 -> f32 ``arith.extf``, or the exact i8 -> f32 ``arith.sitofp``."""
    if isinstance(op, arith.ExtFOp):
        return op.input.type == bf16 and op.result.type == f32
    return isinstance(op, arith.SIToFPOp) and op.input.type == i8 and op.result.type == f32


def _is_narrowing(op: Operation) -> bool:
    """An f32 -> i8 ``arith.fptosi`` whose every use stores it (kernel B's
    quantized activations): the one integer result a lane may carry."""
    return (isinstance(op, arith.FPToSIOp) and op.input.type == f32 and op.result.type == i8
            and bool(op.result.uses)
            and all(isinstance(u.operation, loop.StoreOp) and u.index == 0
                    for u in op.result.uses))


def _is_dot_group(value: SSAValue) -> bool:
    """A ``vector<4xi8>``: one lane term's 4 bytes, a ``loop.dot4`` operand."""
    t = value.type
    return isinstance(t, VectorType) and t.element_type == i8 \
        and t.get_shape() == (loop.DOT_GROUP,)


def _groups_only(op: Operation) -> bool:
    """Every use of ``op``'s result is an index of a ``vector<4xi8>`` load."""
    uses = op.results[0].uses
    return bool(uses) and all(isinstance(u.operation, loop.LoadOp)
                              and _is_dot_group(u.operation.result)
                              and u.index > 0 for u in uses)


def _is_dot_convert(op: Operation) -> bool:
    """``arith.sitofp`` of a ``loop.dot4``'s i32 (exact below 2**24; kernel B's)."""
    return isinstance(op, arith.SIToFPOp) and isinstance(op.input.owner, loop.DotI8Op) \
        and op.result.type == f32


def _only_widened(value: SSAValue) -> bool:
    """Every use of ``value`` (a bf16 or i8 load) widens it to f32."""
    return all(_is_widening(use.operation) for use in value.uses)


WIDENED = ("bf16", "i8")  # data a lane-varying load may read, when only widened


def known_divisor(value: SSAValue) -> int:
    """A known divisor of a uniform index value (constants, products, sums and
    loop indices with aligned starts; 1 when nothing is known)."""
    c = _const(value)
    if c is not None:
        return abs(c) if c else _HUGE
    owner = value.owner
    if isinstance(owner, arith.MuliOp):
        return min(_HUGE, known_divisor(owner.lhs) * known_divisor(owner.rhs))
    if isinstance(owner, arith.AddiOp | arith.SubiOp):
        return math.gcd(known_divisor(owner.lhs), known_divisor(owner.rhs))
    if isinstance(owner, Block) and isinstance(owner.parent_op(), loop.ForOp):
        for_op = owner.parent_op()
        assert isinstance(for_op, loop.ForOp)
        if value is for_op.iv:
            return math.gcd(known_divisor(for_op.lb), for_op.step.data)
    return 1


class _Analysis:
    """Which values of the loop body vary with the lane (checked, never changed)."""

    def __init__(self, target: loop.ForOp, width: int) -> None:
        self.target, self.width = target, width
        self.index: dict[SSAValue, Lane] = {}
        self.varying: set[SSAValue] = set()
        self.vector_ifs: set[loop.IfOp] = set()
        self.repeats: dict[SSAValue, tuple[int, int]] = {}  # block-index loads: (index, T)
        self.where = f"vectorize '{target.loop_name.data}'"
        self.index[target.iv] = Lane(1, math.gcd(known_divisor(target.lb), width))

    def lane(self, value: SSAValue) -> Lane:
        if value in self.index:
            return self.index[value]
        return Lane(0, known_divisor(value))

    def varies(self, value: SSAValue) -> bool:
        return value in self.varying or self.lane(value).coef != 0

    def run(self) -> None:
        self.block(self.target.body.block)

    def block(self, block: Block) -> None:
        for op in block.ops:
            self.op(op)

    def op(self, op: Operation) -> None:  # noqa: C901 (one dispatch over op kinds)
        if isinstance(op, loop.ForOp):
            self.nested_for(op)
        elif isinstance(op, loop.IfOp):
            self.if_op(op)
        elif isinstance(op, loop.LoadOp) and _is_dot_group(op.result):
            self.group_load(op)
        elif isinstance(op, loop.DotI8Op):
            self.dot(op)
        elif isinstance(op, loop.LoadOp):
            at = self.access(op, op.ptr, op.indices, op.stride_exprs)
            if at is not None:
                ptr = op.ptr.type
                assert isinstance(ptr, loop.PtrType)
                repeat = self.lane(op.indices[at]).repeat
                if repeat > 1:
                    if ptr.dtype.data != "f32":
                        raise NoVectorForm(f"{self.where}: a load of {ptr.dtype.data} data "
                                           f"at a block index (lane div {repeat})")
                    self.repeats[op.result] = (at, repeat)
                if ptr.dtype.data != "f32" and not (ptr.dtype.data in WIDENED
                                                    and _only_widened(op.result)):
                    raise NoVectorForm(f"{self.where}: a lane-varying load of "
                                       f"{ptr.dtype.data} data" + (
                                           " used other than widened to f32"
                                           if ptr.dtype.data in WIDENED else ""))
                self.varying.add(op.result)
        elif isinstance(op, loop.StoreOp):
            if self.access(op, op.ptr, op.indices, op.stride_exprs) is None:
                raise UniformStore(f"{self.where}: a store's address does not depend on "
                                   "the lane")
            owner = op.value.owner
            if op.value.type != f32 and not (op.value in self.varying
                                             and isinstance(owner, Operation)
                                             and _is_narrowing(owner)):
                raise NoVectorForm(f"{self.where}: a lane-varying store of {op.value.type}")
        elif isinstance(op, loop.CheckOp):
            if self.varies(op.cond):
                raise LaneBranch(f"{self.where}: a loop.check depends on the lane")
        elif isinstance(op, loop.YieldOp):
            return
        elif op.results and isinstance(op.results[0].type, IndexType):
            self.index[op.results[0]] = self.index_op(op)
        elif isinstance(op, arith.CmpiOp) and any(self.varies(v) for v in op.operands):
            self.uniform_compare(op)
        elif isinstance(op, (*_FLOAT_BINARY, *_FLOAT_UNARY, *_FLOAT_TERNARY, arith.CmpfOp,
                             arith.SelectOp)) or _is_widening(op) or _is_dot_convert(op) \
                or _is_narrowing(op):
            if any(self.varies(v) for v in op.operands):
                self.varying.update(op.results)
        elif any(self.varies(v) for v in op.operands):
            kind = "integer" if isinstance(op, arith.CmpiOp) else "vector"
            error = LaneIndexArithmetic if kind == "integer" else NoVectorForm
            raise error(f"{self.where}: {op.name} on lane-varying values has no exact "
                        f"{kind} form")

    def index_op(self, op: Operation) -> Lane:
        operands = [self.lane(v) for v in op.operands]
        if all(lane.coef == 0 for lane in operands):
            return Lane(0, known_divisor(op.results[0]))
        c = [_const(v) for v in op.operands]
        repeat = max(lane.repeat for lane in operands)
        if isinstance(op, arith.AddiOp):
            coef = operands[0].coef + operands[1].coef
            if coef == 1:
                return Lane(1, math.gcd(operands[0].align, operands[1].align), repeat)
        elif isinstance(op, arith.SubiOp) and operands[1].coef == 0:
            return Lane(1, math.gcd(operands[0].align, operands[1].align), repeat)
        elif isinstance(op, arith.MuliOp) and 1 in c:
            return operands[c.index(1) ^ 1]
        elif repeat > 1:
            pass  # a block index only offsets and addresses a load
        elif isinstance(op, arith.MuliOp) and loop.DOT_GROUP in c and _groups_only(op):
            # (base + lane) * 4 read only by loop.dot4 groups (kernel B's first column
            # of lane term t): each lane's 4 bytes follow the previous lane's
            other = operands[c.index(loop.DOT_GROUP) ^ 1]
            if other.coef == 1:
                return Lane(loop.DOT_GROUP, min(_HUGE, other.align * loop.DOT_GROUP))
        elif isinstance(op, arith.DivSIOp | arith.RemSIOp) and operands[1].coef == 0 \
                and c[1] is not None and c[1] > 0:
            found = self.tile_index(op, operands[0], c[1])
            if found is not None:
                return found
        raise LaneIndexArithmetic(f"{self.where}: {op.name} makes an index that differs "
                                  "per lane in a way no vector load can follow")

    def tile_index(self, op: Operation, lane: Lane, tile: int) -> Lane | None:
        """``divsi``/``remsi`` of ``base + lane`` by a constant ``tile`` (None:
        no vector form)."""
        if lane.align % self.width:
            return None
        if tile % self.width == 0:  # the lanes base .. base + width - 1 lie in one tile
            if isinstance(op, arith.DivSIOp):
                return Lane(0, 1)
            return Lane(1, math.gcd(lane.align, tile))
        if isinstance(op, arith.DivSIOp) and lane.coef == 1 and 1 < tile < self.width \
                and self.width % tile == 0:
            # the tile dividing the width (kernel B's block of a lane term, t div 8,
            # in vectors of 16): lanes base + l give base / T + l div T
            return Lane(1, lane.align // tile, tile)
        return None

    def uniform_compare(self, op: arith.CmpiOp) -> None:
        """Accept ``base + lane < c`` (``slt``; ``sge`` its negation; either side)
        when ``base`` and ``c`` are known multiples of the width: every lane then
        compares as lane 0 does (``base + l < c`` iff ``base < c`` for ``l`` in
        ``[0, W)``), so the compare is uniform, computed once on the base. This
        is a concatenation's select of its part (``d < 32``) read in whole
        vectors of one part."""
        pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
        lhs, rhs = self.lane(op.lhs), self.lane(op.rhs)
        if lhs.repeat > 1 or rhs.repeat > 1:
            raise LaneIndexArithmetic(f"{self.where}: arith.cmpi of a block index (lane div "
                                      f"{max(lhs.repeat, rhs.repeat)}) has no vector form")
        if (lhs.coef, rhs.coef) == (0, 1):  # c > x is x < c; c <= x is x >= c
            lhs, rhs = rhs, lhs
            pred = {"sgt": "slt", "sle": "sge"}.get(pred, "")
        if not (pred in ("slt", "sge") and (lhs.coef, rhs.coef) == (1, 0)
                and op.lhs not in self.varying and op.rhs not in self.varying
                and lhs.align % self.width == 0 and rhs.align % self.width == 0):
            raise LaneIndexArithmetic(f"{self.where}: arith.cmpi on lane-varying values has "
                                      "no exact integer form (only base + lane < c with "
                                      f"base and c multiples of {self.width} is uniform)")

    def access(self, op: Operation, ptr: SSAValue, indices: tuple[SSAValue, ...] | list,
               strides: tuple, group: int = 1) -> int | None:
        """The position of the lane-varying index (None: uniform address); each
        lane reads ``group`` elements (a ``loop.dot4`` group: 4), so its index
        must step by ``group`` per lane."""
        varying = [k for k, idx in enumerate(indices) if self.lane(idx).coef != 0
                   and strides[k] != 0]
        if not varying:
            return None
        steps = [self.lane(indices[k]).coef * strides[k] for k in varying]
        if len(varying) > 1 or steps[0] != group:
            raise NonContiguous(f"{self.where}: {op.name} of {arg_label(ptr)} "
                                f"steps by {' + '.join(map(str, steps))} elements per lane, "
                                f"not {group}")
        repeat = self.lane(indices[varying[0]]).repeat
        if repeat > 1 and not (isinstance(op, loop.LoadOp) and group == 1):
            raise NonContiguous(f"{self.where}: {op.name} of {arg_label(ptr)} at a block "
                                f"index (lane div {repeat}): only a load reads one")
        return varying[0]

    def group_load(self, op: loop.LoadOp) -> None:
        """A ``vector<4xi8>`` load (a ``loop.dot4`` operand) whose address steps by
        4 bytes per lane: the ``4 W`` consecutive bytes of ``W`` lanes."""
        if self.access(op, op.ptr, op.indices, op.stride_exprs, loop.DOT_GROUP) is None:
            return
        if not all(isinstance(use.operation, loop.DotI8Op) for use in op.result.uses):
            raise NoVectorForm(f"{self.where}: a lane-varying load of 4 bytes used other "
                               "than by loop.dot4")
        self.varying.add(op.result)

    def dot(self, op: loop.DotI8Op) -> None:
        """``loop.dot4`` of lane-varying groups: ``W`` lanes of i32 (both operands
        must vary: a group has no broadcast)."""
        varies = [self.varies(v) for v in (op.lhs, op.rhs)]
        if all(varies):
            self.varying.add(op.result)
        elif any(varies):
            raise NoVectorForm(f"{self.where}: loop.dot4 of a lane-varying and a uniform "
                               "group")

    def nested_for(self, op: loop.ForOp) -> None:
        if self.varies(op.lb) or self.varies(op.ub):
            raise LaneIndexArithmetic(f"{self.where}: the bounds of loop "
                                      f"'{op.loop_name.data}' differ per lane")
        self.index[op.iv] = Lane(0, 1)
        for arg, init in zip(op.iter_args, op.inits, strict=True):
            if self.varies(init):
                self.varying.add(arg)
        while True:
            self.block(op.body.block)
            yielded = op.body.block.last_op
            assert isinstance(yielded, loop.YieldOp)
            grown = [a for a, v in zip(op.iter_args, yielded.values, strict=True)
                     if self.varies(v) and a not in self.varying]
            if not grown:
                break
            self.varying.update(grown)
        for arg, res in zip(op.iter_args, op.res, strict=True):
            if arg in self.varying:
                if arg.type != f32:
                    raise NoVectorForm(f"{self.where}: loop '{op.loop_name.data}' carries a "
                                       f"lane-varying {arg.type}")
                self.varying.add(res)

    def if_op(self, op: loop.IfOp) -> None:
        self.vector_ifs.add(op)  # conservatively rebuilt: its contents may vary
        if self.varies(op.cond):
            raise LaneBranch(f"{self.where}: a loop.if's condition depends on the lane (a "
                             "blend would execute both branches and their loads)")
        for region in (op.then_region, op.else_region):
            self.block(region.block)
            last = region.block.last_op
            assert isinstance(last, loop.YieldOp)
            for res, v in zip(op.res, last.values, strict=True):
                if self.varies(v):
                    if res.type != f32:
                        raise NoVectorForm(f"{self.where}: a loop.if yields a lane-varying "
                                           f"{res.type}")
                    self.varying.add(res)


class _Builder:
    """Builds the vector body from a checked analysis.

    A nested lanes loop of ``L`` lanes whose partials become vectors and whose
    trip count ``n`` is symbolic (``_explicit_partials``) is built with its
    partials explicit, in the order ``loop.ForOp`` defines: a loop ``k`` over
    the whole groups (step ``L``, ``L`` copies of the body, copy ``l``
    updating partial ``l``, all ``L`` partials carried), then ``L - 1``
    copies for the iterations after them (iteration ``J + l``, ``J = lb + L *
    floor(n / L)``, updates partial ``l`` under a ``loop.if`` on ``J + l <
    ub``, uniform), then the tree's adds (per bit, in its order: partial
    ``j`` + partial ``j | 1 << bit``, the lower on the left). Every partial
    adds the same terms in the same order, so the bits are the lanes loop's;
    the C of a symbolic lanes loop otherwise keeps its vector partials in an
    array indexed at run time (memory), these stay in registers.
    """

    def __init__(self, analysis: _Analysis) -> None:
        self.a = analysis
        self.width = analysis.width
        self.map: dict[SSAValue, SSAValue] = {}

    def get(self, value: SSAValue) -> SSAValue:
        return self.map.get(value, value)

    def vec(self, value: SSAValue, into: Block) -> SSAValue:
        """``value`` as a vector: itself when lane-varying, else broadcast."""
        new = self.get(value)
        if isinstance(new.type, VectorType):
            return new
        splat = loop.SplatOp(new, self.width)
        into.add_op(splat)
        return splat.result

    def block(self, old: Block, into: Block) -> None:
        for op in old.ops:
            self.op(op, into)

    def op(self, op: Operation, into: Block) -> None:
        a = self.a
        if isinstance(op, loop.YieldOp):
            into.add_op(loop.YieldOp(*[self.get(v) for v in op.values]))
            return
        if isinstance(op, loop.ForOp):
            self.nested_for(op, into)
            return
        if isinstance(op, loop.IfOp):
            self.if_op(op, into)
            return
        if isinstance(op, loop.LoadOp) and op.result in a.repeats:
            self.block_load(op, into)
            return
        if isinstance(op, loop.LoadOp) and op.result in a.varying:
            group = loop.DOT_GROUP if _is_dot_group(op.result) else 1
            new: Operation = loop.LoadOp(self.get(op.ptr), [self.get(i) for i in op.indices],
                                         op.stride_exprs, self.width * group)
        elif isinstance(op, loop.StoreOp):
            value = self.vec(op.value, into)
            new = loop.StoreOp(value, self.get(op.ptr), [self.get(i) for i in op.indices],
                               op.stride_exprs)
        elif op.results and op.results[0] in a.varying:
            new = self.vector_op(op, into)
        else:
            new = op.clone(value_mapper=self.map)
        into.add_op(new)
        for old, res in zip(op.results, new.results, strict=True):
            self.map[old] = res

    def block_load(self, op: loop.LoadOp, into: Block) -> None:
        """A load at a block index (``Lane.repeat`` ``T``): the ``W / T`` scalars
        from the base's element on, each in ``T`` consecutive lanes
        (``loop.vpack``)."""
        at, repeat = self.a.repeats[op.result]
        base = self.get(op.indices[at])
        values: list[SSAValue] = []
        for j in range(self.width // repeat):
            index = base
            if j:
                offset = arith.ConstantOp(IntegerAttr(j, IndexType()))
                shifted = arith.AddiOp(base, offset)
                into.add_ops([offset, shifted])
                index = shifted.result
            indices = [index if k == at else self.get(v) for k, v in enumerate(op.indices)]
            load = loop.LoadOp(self.get(op.ptr), indices, op.stride_exprs)
            into.add_op(load)
            values += [load.result] * repeat
        pack = loop.VPackOp(values)
        into.add_op(pack)
        self.map[op.result] = pack.result

    def vector_op(self, op: Operation, into: Block) -> Operation:
        if isinstance(op, arith.ExtFOp):  # of a vector<Wxbf16> load (_only_widened)
            return arith.ExtFOp(self.get(op.input), VectorType(f32, [self.width]))
        if isinstance(op, arith.SIToFPOp):  # of a vector<Wxi8> load, or a loop.dot4
            return loop.VSIToFPOp(self.get(op.input))
        if isinstance(op, loop.DotI8Op):  # of two vector<4Wxi8> loads: W lanes of i32
            return loop.DotI8Op(self.get(op.lhs), self.get(op.rhs))
        if isinstance(op, arith.FPToSIOp):  # f32 -> i8, only stored (_is_narrowing)
            return loop.VFPToSIOp(self.get(op.input))
        if isinstance(op, arith.CmpfOp):
            pred = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
            return loop.VCmpOp(pred, self.vec(op.lhs, into), self.vec(op.rhs, into))
        if isinstance(op, arith.SelectOp):
            return loop.VSelectOp(self.get(op.cond), self.vec(op.lhs, into),
                                  self.vec(op.rhs, into))
        if isinstance(op, _FLOAT_BINARY):
            return type(op)(self.vec(op.operands[0], into), self.vec(op.operands[1], into))
        if isinstance(op, _FLOAT_TERNARY):
            a, b, c = (self.vec(v, into) for v in op.operands)
            return xmath.FmaOp(a, b, c)
        assert isinstance(op, _FLOAT_UNARY)
        return type(op)(self.vec(op.operands[0], into))

    def if_op(self, op: loop.IfOp, into: Block) -> None:
        """A uniform condition: one branch runs for all lanes, yielding vectors."""
        varying = [r in self.a.varying for r in op.res]
        blocks = []
        for region in (op.then_region, op.else_region):
            block = Block()
            for inner in region.block.ops:
                if isinstance(inner, loop.YieldOp):
                    block.add_op(loop.YieldOp(*[
                        self.vec(v, block) if vary else self.get(v)
                        for v, vary in zip(inner.values, varying, strict=True)]))
                else:
                    self.op(inner, block)
            blocks.append(block)
        types = [VectorType(r.type, [self.width]) if vary else r.type
                 for r, vary in zip(op.res, varying, strict=True)]
        new = loop.IfOp(self.get(op.cond), types, blocks[0], blocks[1])
        into.add_op(new)
        for old, res in zip(op.res, new.res, strict=True):
            self.map[old] = res

    def lanes_copy(self, op: loop.ForOp, index: SSAValue, carried: list[SSAValue],
                   into: Block) -> list[SSAValue]:
        """``op``'s body at ``index`` from the partials ``carried``, built into
        ``into``; what it yields (vectors where the partials vary)."""
        self.map[op.iv] = index
        for arg, value in zip(op.iter_args, carried, strict=True):
            self.map[arg] = value
        for inner in op.body.block.ops:
            if not isinstance(inner, loop.YieldOp):
                self.op(inner, into)
        last = op.body.block.last_op
        assert isinstance(last, loop.YieldOp)
        return [self.vec(v, into) if arg in self.a.varying else self.get(v)
                for arg, v in zip(op.iter_args, last.values, strict=True)]

    def explicit_lanes(self, op: loop.ForOp, inits: list[SSAValue], into: Block) -> None:
        """A nested lanes loop with its partials explicit (the class docstring)."""
        order = op.lane_order
        assert order is not None
        lanes, m = order.lanes, len(inits)
        lb, ub = self.get(op.lb), self.get(op.ub)
        count = arith.ConstantOp(IntegerAttr(lanes, IndexType()))
        n = arith.SubiOp(ub, lb)
        groups = arith.DivSIOp(n, count)
        span = arith.MuliOp(groups, count)
        whole = arith.AddiOp(lb, span)
        into.add_ops([count, n, groups, span, whole])
        flat = [inits[c] for _ in range(lanes) for c in range(m)]  # lane-major
        body = Block(arg_types=[IndexType(), *[v.type for v in flat]])
        partials: list[list[SSAValue]] = [[body.args[1 + lane * m + c] for lane in range(lanes)]
                                          for c in range(m)]
        for lane in range(lanes):
            index: SSAValue = body.args[0]
            if lane:
                offset = arith.ConstantOp(IntegerAttr(lane, IndexType()))
                shifted = arith.AddiOp(index, offset)
                body.add_ops([offset, shifted])
                index = shifted.result
            new = self.lanes_copy(op, index, [partials[c][lane] for c in range(m)], body)
            for c in range(m):
                partials[c][lane] = new[c]
        body.add_op(loop.YieldOp(*[partials[c][lane] for lane in range(lanes)
                                   for c in range(m)]))
        main = loop.ForOp(op.loop_name.data, lb, whole.result, body, flat, lanes)
        into.add_op(main)
        partials = [[main.res[lane * m + c] for lane in range(lanes)] for c in range(m)]
        for lane in range(lanes - 1):  # the iterations after the whole groups
            offset = arith.ConstantOp(IntegerAttr(lane, IndexType()))
            index_op = arith.AddiOp(whole, offset)
            cond = arith.CmpiOp(index_op, ub, "slt")
            into.add_ops([offset, index_op, cond])
            then, other = Block(), Block()
            old = [partials[c][lane] for c in range(m)]
            then.add_op(loop.YieldOp(*self.lanes_copy(op, index_op.result, old, then)))
            other.add_op(loop.YieldOp(*old))
            branch = loop.IfOp(cond.result, [v.type for v in old], then, other)
            into.add_op(branch)
            for c in range(m):
                partials[c][lane] = branch.res[c]
        for c in range(m):
            live: dict[int, SSAValue] = dict(enumerate(partials[c]))
            for bit in order.tree:
                adds = {j: arith.AddfOp(live[j], live[j | 1 << bit]) for j in sorted(live)
                        if not j & 1 << bit}
                into.add_ops(list(adds.values()))
                live = {j: add.result for j, add in adds.items()}
            self.map[op.res[c]] = live[0]

    def nested_for(self, op: loop.ForOp, into: Block) -> None:
        inits = [self.vec(v, into) if arg in self.a.varying else self.get(v)
                 for arg, v in zip(op.iter_args, op.inits, strict=True)]
        if _explicit_partials(op, self.a.varying):
            self.explicit_lanes(op, inits, into)
            return
        body = Block(arg_types=[IndexType(), *[v.type for v in inits]])
        self.map[op.iv] = body.args[0]
        for old, arg in zip(op.iter_args, body.args[1:], strict=True):
            self.map[old] = arg
        for inner in op.body.block.ops:
            if isinstance(inner, loop.YieldOp):
                values = [self.vec(v, body) if arg in self.a.varying else self.get(v)
                          for arg, v in zip(op.iter_args, inner.values, strict=True)]
                body.add_op(loop.YieldOp(*values))
            else:
                self.op(inner, body)
        new = loop.ForOp(op.loop_name.data, self.get(op.lb), self.get(op.ub), body, inits,
                         op.step.data)
        op.copy_order_to(new)
        into.add_op(new)
        for old, res in zip(op.res, new.res, strict=True):
            self.map[old] = res


def _explicit_partials(op: loop.ForOp, varying: set[SSAValue]) -> bool:
    """A nested lanes loop whose partial sums become vectors, with a trip count
    that is not a constant (the context's sum over the positions), the default
    order (halving tree, no tail) and no loop inside: its partials are made
    explicit (``_Builder.explicit_lanes``)."""
    order = op.lane_order
    return (order is not None and order.tail == order.lanes and order.halving
            and any(arg in varying for arg in op.iter_args)
            and (_const(op.lb) is None or _const(op.ub) is None)
            and not any(isinstance(inner, loop.ForOp) for inner in op.body.walk()))


def vectorize(kernel: loop.KernelOp, name: str, width: int) -> None:
    """Run ``width`` consecutive iterations of loop ``name`` as vector lanes
    (main loop with step ``width``, scalar tail ``<name>_tail``).

    Preconditions (each a typed ``ScheduleError``; the kernel is unchanged
    when one fails): 1. the loop exists (``LoopNotFound``), has step 1 and
    ``width`` is 4, 8 or 16; 2. it carries no values (``CrossLaneReduction``);
    3. lane-varying index arithmetic is ``base + lane`` or a divide/remainder
    by an aligned tile, and a compare of it the uniform ``base + lane < c``
    with ``base`` and ``c`` multiples of ``width`` (``LaneIndexArithmetic``);
    4. lane-varying addresses have stride 1 (``NonContiguous``); 5. every
    store's address depends on the lane (``UniformStore``); 6. no
    ``loop.if``/``loop.check`` depends on the lane (``LaneBranch``); 7.
    lane-varying values are f32 with float ops (``NoVectorForm``), or bf16
    and i8 loads only widened to f32; 8. the tail's loop names are free when
    there is a tail (``NameTaken``); 9. the loop loads no argument the
    kernel writes (``ReadsOwnWrites``: a recurrence through memory would read
    stale lanes).

    A loop carrying one f32 max (``acc = arith.maximumf(acc, x)``, ``acc``
    used nowhere else: a row's ``reduce_max``) is vectorized with an exact
    fallback (``_vectorize_max``); it needs 3.-9. on its body and the names
    ``<name>_tail`` and ``<name>_seq`` free.

    A lanes loop (``_vectorize_lanes``) instead needs: ``width`` divides its
    lanes (``RaggedLanes``) and its tail's lanes, and its tree combines the
    vectors first (``LanesTree``); a constant trip count that is a multiple of
    the tail (``RaggedLanes``), or a symbolic one in the default order (the
    halving tree, no shorter tail: ``_vectorize_ragged_lanes``); the name
    ``<name>_groups`` free when groups of
    the tail follow the whole blocks (``NameTaken``); f32 carried values, not
    parallel, and 2.-7. and 9. on its body (it may carry values: its lanes).

    Bitwise: lane ``l`` performs the scalar iteration ``i + l``'s operations in
    order with the same rounding (see ``targets/c_vector.py``); the tail runs
    the scalar body.
    """
    target = find_loop(kernel, name)
    if width not in WIDTHS:
        raise ScheduleError(f"vectorize '{name}': width must be one of {list(WIDTHS)}, "
                            f"got {width}")
    if target.step.data != 1:
        raise ScheduleError(f"vectorize '{name}': step {target.step.data} is not 1")
    if target.lanes is not None:
        _vectorize_lanes(kernel, target, width)
        return
    if _max_reduction(target) is not None:
        _vectorize_max(kernel, target, width)
        return
    if target.inits:
        raise CrossLaneReduction(f"vectorize '{name}': the loop carries {len(target.inits)} "
                                 "value(s): a reduction across iterations would run across "
                                 "lanes")
    if target.parallel is not None:
        raise ScheduleError(f"vectorize '{name}': the loop is parallel (vectorize its body's "
                            "loop, or vectorize before parallel)")
    check_no_own_reads(kernel, target, f"vectorize '{name}'")
    analysis = _Analysis(target, width)
    analysis.run()
    lo, hi = _const(target.lb), _const(target.ub)
    needs_tail = lo is None or hi is None or (hi - lo) % width != 0
    taken = _names(kernel) & tail_names(target) if needs_tail else set()
    if taken:
        raise NameTaken(f"vectorize '{name}': loop name(s) {sorted(taken)} already used")

    lb = target.lb
    mid: Operation
    if lo is not None and hi is not None:  # constant bounds: a constant trip count
        mid = arith.ConstantOp(IntegerAttr(lo + (hi - lo) // width * width, IndexType()))
        _insert_before(target, [mid])
    else:
        mid = _whole_groups(target, width)

    builder = _Builder(analysis)
    body = Block(arg_types=[IndexType()])
    builder.map[target.iv] = body.args[0]
    builder.block(target.body.block, body)
    main = loop.ForOp(name, lb, mid.results[0], body, [], width)

    ops: list[Operation] = [main]
    if needs_tail:
        ops.append(tail_loop(target, mid.results[0], []))
    _insert_before(target, ops)
    target.detach()
    target.erase()


def _whole_groups(target: loop.ForOp, size: int) -> arith.AddiOp:
    """``lb + size * floor((ub - lb) / size)``, the end of ``target``'s whole
    groups of ``size`` iterations, computed before the loop nest it sits in
    (as far out as its bounds allow)."""
    lb, ub = target.lb, target.ub
    w = arith.ConstantOp(IntegerAttr(size, IndexType()))
    n = arith.SubiOp(ub, lb)
    whole = arith.DivSIOp(n, w)
    span = arith.MuliOp(whole, w)
    mid = arith.AddiOp(lb, span)
    _insert_before(_hoist_point(target, [lb, ub]), [w, n, whole, span, mid])
    return mid


def _check_lanes(kernel: loop.KernelOp, target: loop.ForOp, width: int
                 ) -> tuple[_Analysis, VectorSplit]:
    """``_vectorize_lanes``' preconditions (the kernel is unchanged when one
    fails); the analysis and how the tree runs on the vectors."""
    where = f"vectorize '{target.loop_name.data}'"
    order = target.lane_order
    assert order is not None
    lanes = order.lanes
    if lanes % width != 0:
        raise RaggedLanes(f"{where}: width {width} does not divide the loop's {lanes} lanes")
    lo, hi = _const(target.lb), _const(target.ub)
    tail = lo is None or hi is None or (hi - lo) % lanes != 0  # the tail's groups run
    split = order.vector_split(width, tail)
    if tail and order.tail % width != 0:
        raise LanesTree(f"{where}: width {width} is wider than the tail's groups of "
                        f"{order.tail} lanes")
    if split is None:
        across = list(range(lane_bits(width), lane_bits(lanes)))
        raise LanesTree(f"{where}: the tree {list(order.tree)} does not combine the "
                        f"{lanes // width} vectors of {width} lanes first (its first "
                        f"{len(across)} bit(s) must be {across} in some order, after "
                        f"the vectors' top lane bits, halved)")
    if not _ragged(target):
        if lo is None or hi is None or (hi - lo) % order.tail != 0:
            what = f"{lanes} lanes" if order.tail == lanes else f"the tail's {order.tail} lanes"
            raise RaggedLanes(f"{where}: the trip count is not a known multiple of {what}")
        if (hi - lo) % lanes and f"{target.loop_name.data}_groups" in _names(kernel):
            raise NameTaken(f"{where}: loop name '{target.loop_name.data}_groups' already used")
    if any(v.type != f32 for v in target.inits):
        raise NoVectorForm(f"{where}: the loop carries a non-f32 value")
    if target.parallel is not None:
        raise ScheduleError(f"{where}: the loop is parallel")
    check_no_own_reads(kernel, target, where)
    analysis = _Analysis(target, width)
    analysis.varying.update(target.iter_args)
    analysis.run()
    return analysis, split


def _lanes_loop(target: loop.ForOp, analysis: _Analysis, name: str, bounds: tuple[SSAValue,
                SSAValue], step: int, inits: list[list[SSAValue]]) -> loop.ForOp:
    """A loop over ``bounds`` by ``step`` whose body runs ``target``'s body on
    vectors ``0 .. len(inits[c]) - 1`` of each carried value ``c`` (vector
    ``j`` holding iterations ``i + j * W ..``), carrying them value-major."""
    width = analysis.width
    chunks = len(inits[0])
    flat = [v for per_value in inits for v in per_value]
    body = Block(arg_types=[IndexType(), *[v.type for v in flat]])
    builder = _Builder(analysis)
    yielded: list[SSAValue] = [body.args[0]] * len(flat)
    for j in range(chunks):
        base: SSAValue = body.args[0]
        if j:
            offset = arith.ConstantOp(IntegerAttr(j * width, IndexType()))
            shifted = arith.AddiOp(base, offset)
            body.add_ops([offset, shifted])
            base = shifted.result
        builder.map[target.iv] = base
        for c, arg in enumerate(target.iter_args):
            builder.map[arg] = body.args[1 + c * chunks + j]
        for op in target.body.block.ops:
            if not isinstance(op, loop.YieldOp):
                builder.op(op, body)
        last = target.body.block.last_op
        assert isinstance(last, loop.YieldOp)
        for c, v in enumerate(last.values):
            yielded[c * chunks + j] = builder.vec(v, body)
    body.add_op(loop.YieldOp(*yielded))
    return loop.ForOp(name, bounds[0], bounds[1], body, flat, step)


def _vectorize_lanes(kernel: loop.KernelOp, target: loop.ForOp, width: int) -> None:
    """A lanes loop of ``L`` lanes as ``L / width`` vectors per carried value:
    vector ``j`` holds lanes ``j * width ..``. The loop steps by ``L`` over the
    whole groups of ``L``, then (a tail of ``R`` lanes) loop ``<name>_groups``
    steps by ``R`` over the rest, updating vectors ``0 .. R / width - 1``, so
    iteration ``i`` still updates the lane ``loop.ForOp`` says. After the
    loops each vector is halved while the tree's first bits are its top lane
    bits (``loop.foldhalf``: kernels A and B in vectors of 16), the vectors are
    added by the tree's next bits, in its order (vector ``v`` + vector ``v | 1
    << bit``; the halving tree: vector ``j`` + vector ``j + m/2`` ...), and
    ``loop.lanesum`` does the rest with the tree's other bits: the scalar
    lanes loop's bits (``loop.ForOp``, ``LaneOrder.vector_split``)."""
    name = target.loop_name.data
    analysis, tree = _check_lanes(kernel, target, width)
    if _ragged(target):
        _vectorize_ragged_lanes(target, analysis)
        return
    order = target.lane_order
    assert order is not None
    chunks = order.lanes // width
    lo, hi = _const(target.lb), _const(target.ub)
    assert lo is not None  # _check_lanes
    assert hi is not None
    whole = order.lanes * ((hi - lo) // order.lanes)
    setup: list[Operation] = [loop.SplatOp(v, width) for v in target.inits]
    vectors: list[list[SSAValue]] = [[op.results[0]] * chunks for op in setup]
    after: list[Operation] = list(setup)
    mid = target.ub
    if whole != hi - lo:
        split = arith.ConstantOp(IntegerAttr(lo + whole, IndexType()))
        after.append(split)
        mid = split.result
    if whole or whole == hi - lo:
        main = _lanes_loop(target, analysis, name, (target.lb, mid), order.lanes, vectors)
        after.append(main)
        vectors = [list[SSAValue](main.res[c * chunks:(c + 1) * chunks])
                   for c in range(len(vectors))]
    if whole != hi - lo:
        used = order.tail // width
        groups = _lanes_loop(target, analysis, f"{name}_groups", (mid, target.ub), order.tail,
                             [v[:used] for v in vectors])
        after.append(groups)
        vectors = [[*groups.res[c * used:(c + 1) * used], *v[used:]]
                   for c, v in enumerate(vectors)]
    totals: list[SSAValue] = []
    lanes_left = width >> tree.folds
    for per_value in vectors:
        live = dict(enumerate(per_value))
        for _ in range(tree.folds):
            folds = {v: loop.FoldHalfOp(x) for v, x in live.items()}
            after += folds.values()
            live = {v: fold.result for v, fold in folds.items()}
        for bit in tree.across:
            adds = {v: arith.AddfOp(live[v], live[v | 1 << bit]) for v in sorted(live)
                    if not v & 1 << bit}
            after += adds.values()
            live = {v: add.result for v, add in adds.items()}
        inner = tree.inner
        total = loop.LaneSumOp(live[0], None if inner == halving_tree(lanes_left) else inner)
        after.append(total)
        totals.append(total.result)
    _insert_before(target, after)
    for old, new in zip(target.res, totals, strict=True):
        old.replace_all_uses_with(new)
    target.detach()
    target.erase()


def _ragged(target: loop.ForOp) -> bool:
    """A lanes loop of symbolic trip count in the default order (the halving
    tree, no tail of fewer lanes): ``_vectorize_ragged_lanes``' form."""
    order = target.lane_order
    return (order is not None and order.halving and order.tail == order.lanes
            and (_const(target.lb) is None or _const(target.ub) is None))


def _vectorize_ragged_lanes(target: loop.ForOp, analysis: _Analysis) -> None:
    """A lanes loop of ``L`` lanes and symbolic trip count (``_ragged``: a
    softmax row's sum) as ``L / W`` vectors per carried value over the whole
    groups, ``[lb, J)`` with ``J = lb + L * floor((ub - lb) / L)``, step ``L``;
    then its lanes as scalars (``loop.extract``), and for ``l < L - 1`` the
    iteration ``J + l``, which updates lane ``l``, as the scalar body under a
    ``loop.if`` on ``J + l < ub``; then the halving tree on the scalars
    (``t[j] = p[j] + p[j + L/2]``, ...). Every lane adds the same terms in the
    same order and the tree is the loop's: the scalar lanes loop's bits."""
    name = target.loop_name.data
    order = target.lane_order
    assert order is not None
    lanes, width = order.lanes, analysis.width
    chunks = lanes // width
    lb, ub = target.lb, target.ub
    mid = _whole_groups(target, lanes)
    setup: list[Operation] = [loop.SplatOp(v, width) for v in target.inits]
    main = _lanes_loop(target, analysis, name, (lb, mid.result), lanes,
                       [[op.results[0]] * chunks for op in setup])
    after: list[Operation] = [*setup, main]
    partials: list[list[SSAValue]] = []  # per carried value, its L lanes
    for c in range(len(target.inits)):
        extracts = [loop.ExtractOp(main.res[c * chunks + lane // width], lane % width)
                    for lane in range(lanes)]
        after += extracts
        partials.append([e.result for e in extracts])
    last = target.body.block.last_op
    assert isinstance(last, loop.YieldOp)
    body = [op for op in target.body.block.ops if op is not last]
    for lane in range(lanes - 1):  # the iterations after the whole groups: lane J + l
        offset = arith.ConstantOp(IntegerAttr(lane, IndexType()))
        index = arith.AddiOp(mid, offset)
        inside = arith.CmpiOp(index, ub, "slt")
        then, skip = Block(), Block()
        mapping: dict[SSAValue, SSAValue] = {target.iv: index.result, **{
            arg: partials[c][lane] for c, arg in enumerate(target.iter_args)}}
        clone_ops(body, mapping, then)
        then.add_op(loop.YieldOp(*[mapping.get(v, v) for v in last.values]))
        skip.add_op(loop.YieldOp(*[p[lane] for p in partials]))
        branch = loop.IfOp(inside.result, [f32] * len(partials), then, skip)
        after += [offset, index, inside, branch]
        for c, p in enumerate(partials):
            p[lane] = branch.res[c]
    totals: list[SSAValue] = []
    for p in partials:
        live = list(p)
        half = lanes // 2
        while half:
            adds = [arith.AddfOp(live[j], live[j + half]) for j in range(half)]
            after += adds
            live = [a.result for a in adds]
            half //= 2
        totals.append(live[0])
    _insert_before(target, after)
    for old, new in zip(target.res, totals, strict=True):
        old.replace_all_uses_with(new)
    target.detach()
    target.erase()


def _max_reduction(target: loop.ForOp) -> arith.MaximumfOp | None:
    """The ``arith.maximumf(acc, x)`` that loop ``target`` carries as its one
    value (f32, the carried value used by it alone, ``x`` not computed from
    it), if it is such a max reduction."""
    if len(target.inits) != 1 or target.lanes is not None or target.inits[0].type != f32:
        return None
    (acc,) = target.iter_args
    last = target.body.block.last_op
    assert isinstance(last, loop.YieldOp)
    m = last.values[0].owner
    if not isinstance(m, arith.MaximumfOp) or m.lhs is not acc or len(list(acc.uses)) != 1:
        return None
    return m


def _vectorize_max(kernel: loop.KernelOp, target: loop.ForOp, width: int) -> None:
    """A max reduction (``_max_reduction``) as ``width`` lanes with an exact
    fallback (the module docstring): a main loop over ``[lb, mid)`` carrying
    a vector of lane maxima from a splat of the init, the lanes folded with
    ``arith.maximumf`` by halves down to 4 (``loop.half``), then in lane
    order (``loop.extract``), the tail loop
    ``<name>_tail`` continuing from it, then ``loop.if`` r is NaN or zero:
    the original loop again (``<name>_seq``), else r."""
    name = target.loop_name.data
    where = f"vectorize '{name}'"
    if target.parallel is not None:
        raise ScheduleError(f"{where}: the loop is parallel")
    nested = [op.loop_name.data for op in target.walk() if isinstance(op, loop.ForOp)]
    taken = _names(kernel) & (tail_names(target) | {f"{n}_seq" for n in nested})
    if taken:
        raise NameTaken(f"{where}: loop name(s) {sorted(taken)} already used")
    check_no_own_reads(kernel, target, where)
    (acc,) = target.iter_args
    analysis = _Analysis(target, width)
    analysis.varying.add(acc)
    analysis.run()

    lb = target.lb
    mid = _whole_groups(target, width)

    vector = VectorType(f32, [width])
    start = loop.SplatOp(target.inits[0], width)
    builder = _Builder(analysis)
    body = Block(arg_types=[IndexType(), vector])
    builder.map[target.iv] = body.args[0]
    builder.map[acc] = body.args[1]
    builder.block(target.body.block, body)
    main = loop.ForOp(name, lb, mid.result, body, [start.result], width)
    folded: list[Operation] = []
    lanes: SSAValue = main.res[0]
    for _ in range(lane_bits(width) - 2):  # by halves down to 4 lanes
        low, high = loop.HalfOp(lanes, 0), loop.HalfOp(lanes, 1)
        both = arith.MaximumfOp(low.result, high.result)
        folded += [low, high, both]
        lanes = both.result
    first = loop.ExtractOp(lanes, 0)
    folded.append(first)
    for lane in range(1, min(width, 4)):
        extract = loop.ExtractOp(lanes, lane)
        folded += [extract, arith.MaximumfOp(folded[-1].results[0], extract.result)]
    tail = tail_loop(target, mid.result, [folded[-1].results[0]])
    r = tail.res[0]
    zero = arith.ConstantOp(FloatAttr(0.0, f32))
    nan = arith.CmpfOp(r, r, "une")
    is_zero = arith.CmpfOp(r, zero.result, "oeq")
    true = arith.ConstantOp(IntegerAttr(1, i1))
    slow = arith.SelectOp(nan.result, true.result, is_zero.result)
    again = Block()
    seq = target.clone()
    for op in seq.walk():  # the fallback's loops: <name>_seq (unique names)
        if isinstance(op, loop.ForOp):
            op.properties["name"] = StringAttr(f"{op.loop_name.data}_seq")
    again.add_ops([seq, loop.YieldOp(seq.res[0])])
    keep = Block()
    keep.add_op(loop.YieldOp(r))
    fallback = loop.IfOp(slow.result, [f32], again, keep)
    _insert_before(target, [start, main, *folded, tail, zero, nan, is_zero, true, slow,
                            fallback])
    target.res[0].replace_all_uses_with(fallback.res[0])
    target.detach()
    target.erase()

"""Building ``loop.kernel`` bodies: loop nests, strided loads and stores, and
the scalar semantics of each compute primitive in ``arith``/``math`` ops.

``KernelBuilder`` owns one kernel's block and an insertion point; the
``emit_*`` functions give each primitive its element-level meaning, matching
the interpreter's NumPy calls (spec §2.2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.builder import Builder
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from nanocompile.dialects import loop
from nanocompile.ir.shapes import I8_BLOCK  # spec §5 kernel B's blocks of 32 columns
from nanocompile.ir.symbolic import Expr

FLOAT_IDENTITY = {"sum": 0.0, "max": float("-inf")}
INT_MIN = {"i64": -(2**63), "i32": -(2**31), "i8": -128}


@dataclass
class Arg:
    """A kernel argument: dtype, access mode and the footprint it touches."""

    dtype: str
    mode: str
    shape: tuple[Expr, ...]
    strides: tuple[Expr, ...]


@dataclass
class KernelBuilder:
    """Builds one kernel: arguments, named loops, loads, stores, scalar ops."""

    symbols: tuple[str, ...]
    args: list[Arg]
    block: Block = field(init=False)
    builder: Builder = field(init=False)
    _index_consts: dict[int, SSAValue] = field(default_factory=dict)
    _syms: dict[str, SSAValue] = field(default_factory=dict)
    _loop_count: int = 0

    def __post_init__(self) -> None:
        self.block = Block(arg_types=[loop.PtrType.get(a.dtype) for a in self.args])
        self.builder = Builder(InsertPoint.at_end(self.block))

    # -- values -------------------------------------------------------------
    def op(self, op: Operation) -> SSAValue:
        self.builder.insert(op)
        return op.results[0]

    def ptr(self, i: int) -> SSAValue:
        return self.block.args[i]

    def index(self, value: int) -> SSAValue:
        """An index constant, created once at the top of the kernel."""
        if value not in self._index_consts:
            op = arith.ConstantOp(IntegerAttr(value, IndexType()))
            self._insert_at_top(op)
            self._index_consts[value] = op.result
        return self._index_consts[value]

    def sym(self, name: str) -> SSAValue:
        if name not in self._syms:
            op = loop.SymOp(name)
            self._insert_at_top(op)
            self._syms[name] = op.result
        return self._syms[name]

    def _insert_at_top(self, op: Operation) -> None:
        # after the index constants, before everything else
        anchor = self.block.first_op
        while anchor is not None and isinstance(anchor, arith.ConstantOp | loop.SymOp):
            anchor = anchor.next_op
        if anchor is None:
            self.block.add_op(op)
        else:
            self.block.insert_op_before(op, anchor)

    def expr(self, e: Expr) -> SSAValue:
        """An index value computing the shape expression ``e``."""
        if e.is_const:
            return self.index(e.const_value)
        total: SSAValue | None = None
        for mono, coeff in e.terms:
            term: SSAValue | None = self.index(coeff) if (coeff != 1 or not mono) else None
            for s, p in mono:
                for _ in range(p):
                    factor = self.sym(s)
                    term = factor if term is None else self.op(arith.MuliOp(term, factor))
            assert term is not None
            total = term if total is None else self.op(arith.AddiOp(total, term))
        assert total is not None
        return total

    def const(self, value: float | int | bool, dtype: str) -> SSAValue:
        if dtype == "f32":
            return self.op(arith.ConstantOp(FloatAttr(float(value), f32)))
        return self.op(arith.ConstantOp(IntegerAttr(int(value), _integer_type(dtype))))

    # -- loops ----------------------------------------------------------------
    def loop_nest(self, extents: Sequence[Expr], body: Callable[[list[SSAValue]], None],
                  names: Sequence[str] | None = None) -> None:
        """Nested loops named ``d0 .. dN`` (or ``names``) over ``extents``; ``body(ivs)``."""
        loop_names = list(names) if names is not None else [f"d{i}" for i in range(len(extents))]

        def level(k: int, ivs: list[SSAValue]) -> None:
            if k == len(extents):
                body(ivs)
                return
            self.plain_loop(loop_names[k], extents[k], lambda iv: level(k + 1, [*ivs, iv]))

        level(0, [])

    def plain_loop(self, name: str, extent: Expr, body: Callable[[SSAValue], None]) -> None:
        """``for i < extent: body(i)``, a loop named ``name`` carrying nothing."""
        ub = self.expr(extent)
        inner = Block(arg_types=[IndexType()])
        outer_builder = self.builder
        self.builder = Builder(InsertPoint.at_end(inner))
        body(inner.args[0])
        self.builder = outer_builder
        self.op_noresult(loop.ForOp(name, self.index(0), ub, inner))

    def reduction_loop(self, name: str, extent: Expr, init: SSAValue,
                       step: Callable[[SSAValue, SSAValue], SSAValue],
                       lanes: int | None = None) -> SSAValue:
        """``acc = init; for k < extent: acc = step(k, acc)``; returns the final acc
        (with ``lanes``: a lanes loop, ``loop.ForOp``'s order)."""
        ub = self.expr(extent)
        inner = Block(arg_types=[IndexType(), init.type])
        outer_builder = self.builder
        self.builder = Builder(InsertPoint.at_end(inner))
        nxt = step(inner.args[0], inner.args[1])
        self.builder.insert(loop.YieldOp(nxt))
        self.builder = outer_builder
        return self.op(loop.ForOp(name, self.index(0), ub, inner, [init], lanes=lanes))

    def reduction_loop_multi(self, name: str, extent: Expr, inits: Sequence[SSAValue],
                             step: Callable[[SSAValue, list[SSAValue]], list[SSAValue]],
                             lanes: int | None = None,
                             order: loop.LaneOrder | None = None) -> list[SSAValue]:
        """Like ``reduction_loop`` with several independent accumulators in one
        loop (``order``: a lanes loop with that tree and tail)."""
        ub = self.expr(extent)
        inner = Block(arg_types=[IndexType(), *[v.type for v in inits]])
        outer_builder = self.builder
        self.builder = Builder(InsertPoint.at_end(inner))
        nxt = step(inner.args[0], list(inner.args[1:]))
        self.builder.insert(loop.YieldOp(*nxt))
        self.builder = outer_builder
        if order is not None:
            op = loop.ForOp(name, self.index(0), ub, inner, list(inits), lanes=order.lanes,
                            tree=None if order.halving else order.tree,
                            tail=None if order.tail == order.lanes else order.tail)
        else:
            op = loop.ForOp(name, self.index(0), ub, inner, list(inits), lanes=lanes)
        self.builder.insert(op)
        return list(op.res)

    def if_else(self, cond: SSAValue, then: Callable[[], SSAValue],
                otherwise: Callable[[], SSAValue]) -> SSAValue:
        """``cond ? then() : otherwise()`` where only the taken branch runs."""
        outer_builder = self.builder
        blocks = []
        values = []
        for branch in (then, otherwise):
            block = Block()
            self.builder = Builder(InsertPoint.at_end(block))
            value = branch()
            self.builder.insert(loop.YieldOp(value))
            blocks.append(block)
            values.append(value)
        self.builder = outer_builder
        return self.op(loop.IfOp(cond, [values[0].type], blocks[0], blocks[1]))

    def op_noresult(self, op: Operation) -> None:
        self.builder.insert(op)

    # -- memory -----------------------------------------------------------------
    def load(self, arg: int, ivs: Sequence[SSAValue]) -> SSAValue:
        return self.op(loop.LoadOp(self.ptr(arg), ivs, self.args[arg].strides))

    def load_at(self, arg: int, ivs: Sequence[SSAValue], strides: Sequence[Expr]) -> SSAValue:
        return self.op(loop.LoadOp(self.ptr(arg), ivs, strides))

    def store(self, value: SSAValue, arg: int, ivs: Sequence[SSAValue]) -> None:
        self.op_noresult(loop.StoreOp(value, self.ptr(arg), ivs, self.args[arg].strides))

    def finish(self, name: str) -> loop.KernelOp:
        fps = [loop.FootprintAttr.get(a.shape, a.strides) for a in self.args]
        return loop.KernelOp(name, self.block, self.symbols, [a.mode for a in self.args], fps)


# --------------------------------------------------------------------------
# Scalar semantics of the compute primitives
# --------------------------------------------------------------------------


def is_float(v: SSAValue) -> bool:
    return v.type == f32


def emit_binary(kb: KernelBuilder, kind: str, a: SSAValue, b: SSAValue) -> SSAValue:
    if is_float(a):
        ops = {"add": arith.AddfOp, "sub": arith.SubfOp, "mul": arith.MulfOp,
               "div": arith.DivfOp}
        return kb.op(ops[kind](a, b))
    iops = {"add": arith.AddiOp, "sub": arith.SubiOp, "mul": arith.MuliOp}
    return kb.op(iops[kind](a, b))


MATMUL_LANES = 16
"""The order of every matmul's sum over ``k``: 16 partial sums (``k mod 16``),
each a chain of FMAs in ``k`` order, added by the halving tree at the end
(``loop.ForOp``'s lanes loop). 16 is one AVX-512 vector and two AVX2 vectors,
so the widest schedule of each arch keeps the order; the partial sums also
make the rounding error grow with ``K / 16`` terms per chain, not ``K``."""


def emit_fma(kb: KernelBuilder, a: SSAValue, b: SSAValue, c: SSAValue) -> SSAValue:
    """``a * b + c`` rounded once (``math.fma``)."""
    return kb.op(math.FmaOp(a, b, c))


BLOCKS32 = loop.LaneOrder(32, (3, 4, 2, 0, 1), 8)
"""spec §5 kernel A's order (``graph.matmul ... order = "blocks32"``) over the
first ``K8 = K - K mod 8`` values of ``k``: lane ``8a + l`` is lane ``l`` of
accumulator ``c_a``, so a block of 32 is four chains of 8; the groups of 8
after the last whole block go into ``c0`` (tail 8); the tree ``[3, 4, 2, 0,
1]`` is ``v = (c0 + c1) + (c2 + c3)``, ``s_i = v[i] + v[i + 4]``, ``(s0 + s1)
+ (s2 + s3)``. The last ``K mod 8`` terms follow one by one, multiplied and
then added (``emit_matmul_sums``)."""

BLOCKS32_GROUP = 8


def emit_matmul_sums(kb: KernelBuilder, order: str | None, extent: Expr, count: int,
                     operands: Callable[[SSAValue, int], tuple[SSAValue, SSAValue]],
                     name: str = "k",
                     scope: Callable[[Callable[..., list[SSAValue]]],
                                     Callable[..., list[SSAValue]]] = lambda fn: fn
                     ) -> list[SSAValue]:
    """``count`` sums over ``k < extent`` of ``a * b``, sum ``i``'s pair being
    ``operands(k, i)`` (which emits their loads at ``k``), from +0.0, in the
    order of the matmuls: the default (``order`` None: a lanes loop of
    ``MATMUL_LANES`` FMA chains) or ``"blocks32"`` (``BLOCKS32``, then the
    last ``K mod 8`` terms unrolled, ``acc + a * b``: ``K`` must be a
    constant). ``scope`` wraps the code of each ``k`` (a fused region's memo
    scope: what one ``k`` loads serves every sum at that ``k``)."""
    @scope
    def step(k: SSAValue, accs: list[SSAValue]) -> list[SSAValue]:
        return [emit_fma(kb, *operands(k, i), acc) for i, acc in enumerate(accs)]

    inits = [kb.const(0.0, "f32") for _ in range(count)]
    if order is None:
        return kb.reduction_loop_multi(name, extent, inits, step, MATMUL_LANES)
    if order != "blocks32":
        raise PassFailedException(f"lower-graph-to-loop: graph.matmul: no lowering for "
                                  f"order \"{order}\"")
    if not extent.is_const:
        raise PassFailedException(
            f"lower-graph-to-loop: graph.matmul order \"blocks32\" needs a constant K "
            f"(spec §5's blocks of 32 columns), got K = {extent}")
    k = extent.const_value
    whole = k - k % BLOCKS32_GROUP
    sums = kb.reduction_loop_multi(name, Expr.const(whole), inits, step, order=BLOCKS32)

    @scope
    def tail(t: SSAValue, accs: list[SSAValue]) -> list[SSAValue]:  # multiply, then add
        return [kb.op(arith.AddfOp(acc, kb.op(arith.MulfOp(*operands(t, i)))))
                for i, acc in enumerate(accs)]

    for t in range(whole, k):
        sums = tail(kb.index(t), sums)
    return sums


I8_PER_LANE = 4
"""Kernel B: columns per lane of a block (one ``vpdpbusd`` dword); a block is
``BLOCKS32_GROUP`` lanes of them."""

I8_BIAS = 128
"""Kernel B's weights enter the integer sums as ``w + 128`` (``w XOR 0x80`` as u8)."""

I8_LANES = BLOCKS32
"""Kernel B's order over its lane terms (``emit_matmul_i8``): term ``t`` is lane
``t mod 8`` of block ``t div 8``; 32 lanes (four blocks into four accumulators
of 8, block ``b`` into ``a_(b mod 4)``), tail 8 (the whole blocks after the
last group of four into ``a0``), kernel A's tree ``[3, 4, 2, 0, 1]``."""


def emit_matmul_i8(kb: KernelBuilder, k: int,
                   operands: Callable[[SSAValue], tuple[SSAValue, SSAValue]],
                   scale: Callable[[SSAValue], SSAValue], name: str = "k",
                   scope: Callable[[Callable[..., Any]], Callable[..., Any]] = lambda fn: fn
                   ) -> SSAValue:
    """Spec §5 kernel B's ``total`` (``graph.matmul_i8``) over ``k`` columns:
    ``operands(c)`` emits the i8 pair ``(xq, w)`` at column ``c``, ``scale(b)``
    the f32 ``xs`` of block ``b``. A lanes loop ``name`` (``I8_LANES``) over the
    ``8 * (k div 32)`` lane terms ``t``, each ``fma(f32(p), xs[t div 8], acc)``
    with the exact i32 ``p = sum_{j<4} (w + 128) * xq`` over columns ``4t + j``:
    one ``loop.dot4`` of the 4 bytes of each at column ``4t`` (``vector<4xi8>``
    loads: ``_group_loads``; ``vectorize`` makes it 8 lanes of 32 bytes, which
    the C target prints per ISA), or, when an operand is not a plain load along
    a stride-1 column, 4 widened products added in column order (unrolled);
    then the ``k mod 32`` tail columns: an exact i32 sum in column order
    (unrolled), ``total + f32(p) * xs[last]`` (multiply, then add).
    ``scope`` wraps the lanes loop's body and the tail (a fused region's memo
    scope)."""
    i32 = _integer_type("i32")

    def term(column: SSAValue, acc: SSAValue) -> SSAValue:
        xq, w = operands(column)
        u = kb.op(arith.AddiOp(kb.op(arith.ExtSIOp(w, i32)), kb.const(I8_BIAS, "i32")))
        return kb.op(arith.AddiOp(acc, kb.op(arith.MuliOp(u, kb.op(arith.ExtSIOp(xq, i32))))))

    @scope
    def lane(t: SSAValue, accs: list[SSAValue]) -> list[SSAValue]:
        base = kb.op(arith.MuliOp(t, kb.index(I8_PER_LANE)))
        grouped = _group_loads(kb, operands(base), base)
        if grouped is not None:
            p = kb.op(loop.DotI8Op(*grouped))
        else:
            p = kb.const(0, "i32")
            for j in range(I8_PER_LANE):
                p = term(base if j == 0 else kb.op(arith.AddiOp(base, kb.index(j))), p)
        block = kb.op(arith.DivSIOp(t, kb.index(BLOCKS32_GROUP)))
        return [emit_fma(kb, kb.op(arith.SIToFPOp(p, f32)), scale(block), accs[0])]

    whole = k // I8_BLOCK
    terms = Expr.const(whole * BLOCKS32_GROUP)
    (total,) = kb.reduction_loop_multi(name, terms, [kb.const(0.0, "f32")], lane,
                                       order=I8_LANES)
    if k % I8_BLOCK == 0:
        return total

    @scope
    def tail() -> SSAValue:  # unrolled, as kernel A's: no loop beside the lanes loop
        p = kb.const(0, "i32")
        for c in range(whole * I8_BLOCK, k):
            p = term(kb.index(c), p)
        return p

    p = tail()
    product = kb.op(arith.MulfOp(kb.op(arith.SIToFPOp(p, f32)), scale(kb.index(whole))))
    return kb.op(arith.AddfOp(total, product))


def _group_loads(kb: KernelBuilder, values: tuple[SSAValue, SSAValue], column: SSAValue
                 ) -> tuple[SSAValue, SSAValue] | None:
    """``values`` (the i8 ``xq`` and ``w`` at ``column``, just emitted) as loads of
    the ``I8_PER_LANE`` bytes from there (``vector<4xi8>``, replacing the scalar
    loads), when each is a ``loop.load`` not yet used whose one index that is
    ``column`` has stride 1 (the 4 columns lie side by side in memory); None
    (nothing changed) otherwise."""
    loads = []
    for v in values:
        op = v.owner
        if not isinstance(op, loop.LoadOp) or op.lanes is not None or v.uses:
            return None
        at = [k for k, idx in enumerate(op.indices) if idx is column]
        others = [idx for k, idx in enumerate(op.indices) if k not in at]
        if len(at) != 1 or op.stride_exprs[at[0]] != 1 or any(
                _uses(idx, column) for idx in others):
            return None
        loads.append(op)
    grouped = []
    for op in loads:
        new = loop.LoadOp(op.ptr, list(op.indices), op.stride_exprs, I8_PER_LANE)
        block = op.parent_block()
        assert block is not None
        block.insert_op_before(new, op)
        op.detach()
        op.erase()
        grouped.append(new.result)
    return grouped[0], grouped[1]


def _uses(value: SSAValue, column: SSAValue) -> bool:
    """Whether ``value`` is computed from ``column`` (in the kernel's index ops)."""
    if value is column:
        return True
    owner = value.owner
    return isinstance(owner, Operation) and any(_uses(v, column) for v in owner.operands)


def emit_less_equal(kb: KernelBuilder, a: SSAValue, b: SSAValue) -> SSAValue:
    if is_float(a):
        return kb.op(arith.CmpfOp(a, b, "ole"))
    return kb.op(arith.CmpiOp(a, b, "sle"))


def emit_unary(kb: KernelBuilder, kind: str, a: SSAValue, dtype: str) -> SSAValue:
    if kind == "neg":
        if is_float(a):
            return kb.op(arith.NegfOp(a))
        return kb.op(arith.SubiOp(kb.const(0, dtype), a))
    if kind == "reciprocal":
        return kb.op(arith.DivfOp(kb.const(1.0, "f32"), a))
    ops = {"exp": math.ExpOp, "sqrt": math.SqrtOp, "sin": math.SinOp, "cos": math.CosOp,
           "round": math.RoundOp}  # round: C's roundf, halves away from zero
    return kb.op(ops[kind](a))


def emit_cast(kb: KernelBuilder, a: SSAValue, src: str, dst: str) -> SSAValue:
    """NumPy ``astype``: float->int truncates, to bool is ``!= 0``, bf16 widens exactly."""
    if src == dst:
        return a
    if src == "bf16":
        return kb.op(arith.ExtFOp(a, f32))
    if dst == "bool":
        if src == "f32":
            return kb.op(arith.CmpfOp(a, kb.const(0.0, "f32"), "une"))
        return kb.op(arith.CmpiOp(a, kb.const(0, src), "ne"))
    if dst == "f32":
        op = arith.UIToFPOp(a, f32) if src == "bool" else arith.SIToFPOp(a, f32)
        return kb.op(op)
    target = _integer_type(dst)
    if src == "f32":
        return kb.op(arith.FPToSIOp(a, target))
    src_w = 1 if src == "bool" else _width(a.type)
    dst_w = _width(target)
    if dst_w > src_w:
        return kb.op(arith.ExtUIOp(a, target) if src == "bool" else arith.ExtSIOp(a, target))
    return kb.op(arith.TruncIOp(a, target))


def _width(t: Attribute) -> int:
    assert isinstance(t, IntegerType)
    return t.width.data


def _integer_type(dtype: str) -> IntegerType:
    """The scalar type of an integer or bool ``dtype`` (bool is i1)."""
    t = loop.scalar_type(dtype)
    assert isinstance(t, IntegerType), f"expected an integer dtype, got {dtype}"
    return t


def reduce_lanes(kind: str, dtype: str, order: str | None = None) -> int | None:
    """The lanes of a reduction's loop over its axis: ``MATMUL_LANES`` for an f32
    sum in the default order, None (one accumulator, index order) for a sum
    ``order = "sequential"`` (the graph dialect's ``REDUCE_ORDERS``), a max, or
    an integer sum (exact in any order)."""
    if order is not None and order != "sequential":
        raise PassFailedException(f"lower-graph-to-loop: graph.reduce_sum: no lowering for "
                                  f"order \"{order}\"")
    return MATMUL_LANES if kind == "sum" and dtype == "f32" and order is None else None


MAX_LOOP = "m"
"""The name of a ``reduce_max``'s loop over its axis (a sum's is ``k``), so a
kernel with both (softmax: a row's max, then the sum of its terms) names each
once and a schedule can vectorize the max (``vectorize``'s exact max)."""


def reduction_name(kind: str) -> str:
    """The loop name of a ``kind`` reduction: ``k`` for a sum, ``MAX_LOOP`` for a max."""
    return MAX_LOOP if kind == "max" else "k"


def identity(kind: str, dtype: str) -> float | int:
    if dtype == "f32":
        return FLOAT_IDENTITY[kind]
    return 0 if kind == "sum" else INT_MIN[dtype]


def emit_accumulate(kb: KernelBuilder, kind: str, acc: SSAValue, x: SSAValue) -> SSAValue:
    """``acc + x`` for sums; a NaN-propagating max for ``reduce_max``."""
    if kind == "sum":
        return emit_binary(kb, "add", acc, x)
    if is_float(acc):
        return kb.op(arith.MaximumfOp(acc, x))
    return kb.op(arith.MaxSIOp(acc, x))


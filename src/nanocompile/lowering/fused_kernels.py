"""One ``loop.kernel`` per ``graph.fused`` region.

The kernel loops over the region's result: outer loops over all but the last
axis (``d0 .. d{n-2}``), then the last axis (``d{n-1}``). Values of the
region are produced on demand by ``RegionEmitter.emit(value, index)``, which
reads region arguments through their strides, maps indices back through
index-only ops (permute, broadcast, slice, reshape with div/mod, one branch
per concat operand) and applies elementwise ops, memoized per (value, index)
within the enclosing loop scope. Row-invariant values (shaped like the
result with a last axis of 1: reductions and what is computed from them) are
computed once per row, before the last-axis loop. Matmuls accumulate over
``k`` in the unfused kernel's order (``emit_matmul_sums``: by default a lanes
loop of ``MATMUL_LANES`` FMA chains, or the order the matmul states), the
region's matmuls of one order in one ``k`` loop; spec §5 kernel B's
``matmul_i8`` in its order (``emit_matmul_i8``). A reduction that states its
order (``reduce_sum ... order = "sequential"``) keeps it (``reduce_lanes``).

Every value is computed by the same scalar operation as the unfused kernel of
its primitive, in the same order: fused and unfused programs agree bitwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType
from xdsl.ir import BlockArgument, Operation, SSAValue

from nanocompile.dialects import graph as g
from nanocompile.dialects import loop
from nanocompile.ir.layout import Layout
from nanocompile.ir.shapes import TensorSpec
from nanocompile.ir.symbolic import Expr, product
from nanocompile.lowering.builder import (
    Arg,
    KernelBuilder,
    emit_accumulate,
    emit_binary,
    emit_cast,
    emit_less_equal,
    emit_matmul_i8,
    emit_matmul_sums,
    emit_unary,
    identity,
    reduce_lanes,
    reduction_name,
)

_BINARY: dict[type[Operation], str] = {g.AddOp: "add", g.SubOp: "sub", g.MulOp: "mul",
                                       g.DivOp: "div"}
_UNARY: dict[type[Operation], str] = {g.NegOp: "neg", g.ExpOp: "exp", g.SqrtOp: "sqrt",
                                      g.ReciprocalOp: "reciprocal", g.SinOp: "sin",
                                      g.CosOp: "cos", g.RoundOp: "round"}
_REDUCE: dict[type[Operation], str] = {g.ReduceSumOp: "sum", g.ReduceMaxOp: "max"}
_VIEWS = (g.PermuteOp, g.BroadcastOp, g.SliceOp, g.ReshapeOp)  # read through by index
_EXPENSIVE = (g.ExpOp, g.SinOp, g.CosOp)  # worth a store and a load to compute once

WIDENED = ("bf16", "i8")  # weight data a cast widens exactly to f32 where it is read
Key = tuple[SSAValue, tuple[SSAValue, ...]]
P = ParamSpec("P")
R = TypeVar("R")


def argument_footprint(arg: SSAValue, layout: Layout) -> Layout:
    """The part of a region argument the kernel reads: follow a single chain of
    view-expressible index ops (a sliced last row reads one row); a gather
    table reads one row per id. The widening of bf16 or i8 to f32 reads each
    element where it is read, so the chain goes on through it."""
    while (use := arg.get_unique_use()) is not None:  # a loop: view chains may be long
        user = use.operation
        if isinstance(user, g.CastOp) and g.tensor_type(arg).dtype.data in WIDENED:
            arg = user.result
            continue
        if isinstance(user, g.GatherOp) and use.index == 0:
            ids = g.tensor_type(user.ids).dims
            return Layout(tuple(ids) + layout.shape[1:], layout.offset,
                          tuple(Expr.const(1) for _ in ids) + layout.strides[1:])
        new = view_of(user, layout)
        if new is None:
            return layout
        arg, layout = user.results[0], new
    return layout


def view_of(op: Operation, layout: Layout) -> Layout | None:
    """The layout of an index-only op's result when strides can express it."""
    if isinstance(op, g.PermuteOp):
        return layout.permute(op.permutation)
    if isinstance(op, g.SliceOp):
        return layout.slice(op.axis.data, op.start.data, op.stop.data)
    if isinstance(op, g.BroadcastOp):
        return layout.broadcast(op.result.type.dims)
    if isinstance(op, g.ReshapeOp):
        return layout.reshape(op.result.type.dims)
    return None


class RegionEmitter:
    """Scalar code for the values of one region, at given indices."""

    def __init__(self, kb: KernelBuilder, fused: g.FusedOp, layouts: Sequence[Layout]) -> None:
        self.kb = kb
        self.fused = fused
        self.args = {a: i + 1 for i, a in enumerate(fused.block.args)}
        self.layouts = list(layouts)
        self.scopes: list[dict[Key, SSAValue]] = [{}]
        # values a row reduction's loop stores into the result (argument 0) as it
        # sums them, by reduction; once stored, ``materialized`` reads them back
        # there instead of computing them again (softmax's exp: ``_stored_terms``)
        self.store_terms: dict[Operation, SSAValue] = {}
        self.materialized: set[SSAValue] = set()

    # -- memo scopes ----------------------------------------------------------
    def lookup(self, key: Key) -> SSAValue | None:
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    def scoped(self, fn: Callable[P, R]) -> Callable[P, R]:
        """Run ``fn`` with a fresh memo scope (a loop or branch body)."""
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            self.scopes.append({})
            try:
                return fn(*args, **kwargs)
            finally:
                self.scopes.pop()
        return run

    # -- values -------------------------------------------------------------------
    def emit(self, value: SSAValue, idx: Sequence[SSAValue]) -> SSAValue:
        """The scalar of ``value`` at ``idx``, emitting what it needs first.

        Depth first over the operands, as a recursive emitter would go, but on
        an explicit stack through elementwise and view ops, so a chain of
        thousands of them needs no Python recursion: each op is emitted once
        its operands are, in the order recursion would emit them (a view's
        index arithmetic when it is reached, before what it reads).
        """
        root: Key = (value, tuple(idx))
        hit = self.lookup(root)
        if hit is not None:
            return hit
        stack: list[tuple[Key, list[Key], list[Key]]] = []  # key, operands, still to emit
        operands = self._operand_keys(root)
        stack.append((root, operands, operands[::-1]))
        while stack:
            key, operands, todo = stack[-1]
            if todo:
                child = todo.pop()
                if self.lookup(child) is None:
                    grand = self._operand_keys(child)
                    stack.append((child, grand, grand[::-1]))
                continue
            stack.pop()
            self.scopes[-1][key] = self._finish(key, operands)
        result = self.lookup(root)
        assert result is not None
        return result

    def _operand_keys(self, key: Key) -> list[Key]:
        """What ``_compute`` of ``key`` will read, in its order: the operands of
        an elementwise op at the same index, the operand of a view at its
        mapped index (emitting that index arithmetic now, as ``_compute``
        would before reading it); nothing for the other ops, which
        ``_compute`` emits with their own loops and branches."""
        value, idx = key
        op = value.owner
        if not isinstance(op, Operation) or value in self.materialized:
            return []  # read from memory: nothing of its own to emit first
        if isinstance(op, g.WhereOp):
            return [(op.cond, idx), (op.lhs, idx), (op.rhs, idx)]
        if type(op) in _BINARY or type(op) in _UNARY or isinstance(op, g.LessEqualOp
                                                                  | g.CastOp):
            return [(v, idx) for v in op.operands]
        if isinstance(op, _VIEWS):
            return [(op.operands[0], tuple(self._operand_index(op, list(idx))))]
        return []

    def _finish(self, key: Key, operands: list[Key]) -> SSAValue:
        """``key``'s scalar once its operand keys are emitted: a view is the
        value it reads; anything else is computed (its operands hit the memo)."""
        value, idx = key
        if isinstance(value.owner, _VIEWS):
            source = self.lookup(operands[0])
            assert source is not None
            return source
        return self._compute(value, list(idx))

    def _compute(self, value: SSAValue, idx: list[SSAValue]) -> SSAValue:
        kb = self.kb
        if value in self.materialized:  # stored by a row reduction: read it back
            return kb.load(0, idx)
        if isinstance(value, BlockArgument):
            arg = self.args[value]
            return kb.load_at(arg, idx, self.layouts[arg - 1].strides)
        op = value.owner
        assert isinstance(op, Operation)
        if type(op) in _BINARY:
            return emit_binary(kb, _BINARY[type(op)], self.emit(op.operands[0], idx),
                               self.emit(op.operands[1], idx))
        if isinstance(op, g.LessEqualOp):
            return emit_less_equal(kb, self.emit(op.lhs, idx), self.emit(op.rhs, idx))
        if isinstance(op, g.WhereOp):
            return kb.op(arith.SelectOp(self.emit(op.cond, idx), self.emit(op.lhs, idx),
                                        self.emit(op.rhs, idx)))
        if type(op) in _UNARY:
            return emit_unary(kb, _UNARY[type(op)], self.emit(op.operands[0], idx),
                              g.tensor_type(op.results[0]).dtype.data)
        if isinstance(op, g.CastOp):
            return emit_cast(kb, self.emit(op.operand, idx), g.tensor_type(op.operand).dtype.data,
                             op.result.type.dtype.data)
        return self._compute_other(op, idx)

    def _compute_other(self, op: Operation, idx: list[SSAValue]) -> SSAValue:
        kb = self.kb
        if isinstance(op, g.ConstOp):
            (v,) = op.to_array().reshape(1)
            return kb.const(v.item(), op.result.type.dtype.data)
        if isinstance(op, g.IotaOp):
            i64 = kb.op(arith.IndexCastOp(idx[op.axis.data], loop.scalar_type("i64")))
            return emit_cast(kb, i64, "i64", op.result.type.dtype.data)
        if isinstance(op, g.DimOp):
            return kb.op(arith.IndexCastOp(kb.expr(op.expr.data), loop.scalar_type("i64")))
        if isinstance(op, g.ConcatOp):
            return self._concat(op, idx)
        if isinstance(op, g.GatherOp):
            return self._gather(op, idx)
        if isinstance(op, g.ReduceOp):
            return self._reduce(op, idx)
        if isinstance(op, g.MatmulOp):
            return self.matmuls([op], idx)[0]
        if isinstance(op, g.MatmulI8Op):
            return self.matmul_i8(op, idx)
        return self.emit(op.operands[0], self._operand_index(op, idx))

    def _operand_index(self, op: Operation, idx: list[SSAValue]) -> list[SSAValue]:
        kb = self.kb
        if isinstance(op, g.PermuteOp):
            out = list(idx)
            for i, p in enumerate(op.permutation):
                out[p] = idx[i]
            return out
        if isinstance(op, g.BroadcastOp):
            src, dst = g.tensor_type(op.operand).dims, op.result.type.dims
            return [kb.index(0) if s == 1 and d != 1 else i
                    for s, d, i in zip(src, dst, idx, strict=True)]
        if isinstance(op, g.SliceOp):
            out = list(idx)
            start = op.start.data
            if start != 0:
                out[op.axis.data] = kb.op(arith.AddiOp(idx[op.axis.data], kb.expr(start)))
            return out
        if isinstance(op, g.ReshapeOp):
            return reshape_index(kb, idx, op.result.type.dims, g.tensor_type(op.operand).dims)
        # fuse.py only puts views listed above into a region's read path.
        raise AssertionError(f"internal: fused kernels cannot read through {op.name}")

    def _concat(self, op: g.ConcatOp, idx: list[SSAValue]) -> SSAValue:
        """One branch per operand: ``t < n0 ? a[t] : (t < n0+n1 ? b[t-n0] : ...)``."""
        axis = op.axis.data
        operands = list(op.inputs)

        def branch(k: int, start: Expr) -> SSAValue:
            shifted = list(idx)
            if start != 0:
                shifted[axis] = self.kb.op(arith.SubiOp(idx[axis], self.kb.expr(start)))
            if k == len(operands) - 1:
                return self.emit(operands[k], shifted)
            end = start + g.tensor_type(operands[k]).dims[axis]
            cond = self.kb.op(arith.CmpiOp(idx[axis], self.kb.expr(end), "slt"))
            return self.kb.if_else(cond, self.scoped(lambda: self.emit(operands[k], shifted)),
                                   self.scoped(lambda: branch(k + 1, end)))

        return branch(0, Expr.const(0))

    def check_ids(self, op: g.GatherOp, idx: list[SSAValue]) -> SSAValue:
        """The id at ``idx`` as an index, after checking it names a table row."""
        kb = self.kb
        raw = self.emit(op.ids, idx)
        row = emit_cast(kb, raw, g.tensor_type(op.ids).dtype.data, "i64")
        rows = kb.op(arith.IndexCastOp(kb.expr(g.tensor_type(op.table).dims[0]),
                                       loop.scalar_type("i64")))
        ok = kb.op(arith.AndIOp(kb.op(arith.CmpiOp(row, kb.const(0, "i64"), "sge")),
                                kb.op(arith.CmpiOp(row, rows, "slt"))))
        kb.op_noresult(loop.CheckOp(ok, 1, "graph.gather: id out of range"))
        return kb.op(arith.IndexCastOp(row, IndexType()))

    def _gather(self, op: g.GatherOp, idx: list[SSAValue]) -> SSAValue:
        n_ids = len(g.tensor_type(op.ids).dims)
        return self.emit(op.table, [self.check_ids(op, idx[:n_ids]), *idx[n_ids:]])

    def _reduce(self, op: g.ReduceOp, idx: list[SSAValue]) -> SSAValue:
        """The reduction at ``idx`` (its last index is the kept size-1 axis)."""
        src = op.operand
        axis = op.axis.data
        kind = _REDUCE[type(op)]
        src_type = g.tensor_type(src)
        dtype = src_type.dtype.data
        init = self.kb.const(identity(kind, dtype), dtype)

        stored = self.store_terms.get(op)
        if stored is not None:  # the terms first, in a loop of their own ("e")
            @self.scoped
            def store(e: SSAValue) -> None:
                at = [e if d == axis else i for d, i in enumerate(idx)]
                self.kb.store(self.emit(src, at), 0, at)

            self.kb.plain_loop(STORED_TERMS_LOOP, src_type.dims[axis], store)

        @self.scoped
        def step(k: SSAValue, acc: SSAValue) -> SSAValue:
            at = [k if d == axis else i for d, i in enumerate(idx)]
            term = self.kb.load(0, at) if stored is not None else self.emit(src, at)
            return emit_accumulate(self.kb, kind, acc, term)

        order = op.order_name if isinstance(op, g.ReduceSumOp) else None
        lanes = reduce_lanes(kind, dtype, order)
        return self.kb.reduction_loop(reduction_name(kind), src_type.dims[axis], init, step,
                                      lanes)

    def matmuls(self, ops: Sequence[g.MatmulOp], idx: list[SSAValue]) -> list[SSAValue]:
        """All ``ops`` at ``idx`` = [batch..., m, n]: one k loop per reduction
        order (``emit_matmul_sums``), the matmuls of one order sharing it."""
        batch = len(idx) - 2
        groups: dict[str | None, list[g.MatmulOp]] = {}
        for op in ops:
            groups.setdefault(op.order_name, []).append(op)
        sums: dict[g.MatmulOp, SSAValue] = {}
        for n, (order, group) in enumerate(groups.items()):
            def operands(k: SSAValue, i: int, group: list[g.MatmulOp] = group
                         ) -> tuple[SSAValue, SSAValue]:
                return (self.emit(group[i].lhs, [*idx[:batch], idx[batch], k]),
                        self.emit(group[i].rhs, [*idx[:batch], k, idx[batch + 1]]))

            results = emit_matmul_sums(self.kb, order, g.tensor_type(group[0].lhs).dims[-1],
                                       len(group), operands, "k" if n == 0 else f"k{n}",
                                       self.scoped)
            for op, r in zip(group, results, strict=True):
                self.scopes[-1][(op.result, tuple(idx))] = r
                sums[op] = r
        return [sums[op] for op in ops]

    def matmul_i8(self, op: g.MatmulI8Op, idx: list[SSAValue]) -> SSAValue:
        """Kernel B's ``total`` at ``idx = [m, n]`` (``emit_matmul_i8``)."""
        m, n = idx

        def operands(c: SSAValue) -> tuple[SSAValue, SSAValue]:
            return self.emit(op.lhs, [m, c]), self.emit(op.rhs, [c, n])

        return emit_matmul_i8(self.kb, g.tensor_type(op.lhs).dims[-1].const_value, operands,
                              lambda b: self.emit(op.lhs_scale, [m, b]), scope=self.scoped)


def reshape_index(kb: KernelBuilder, idx: list[SSAValue], result: Sequence[Expr],
                  operand: Sequence[Expr]) -> list[SSAValue]:
    """Indices into ``operand`` of element ``idx`` of its reshape to ``result``.

    Dims are matched in groups of equal products (split, merge, or 1:1), so a
    split costs multiplies and adds and a merge one div/mod per operand dim."""
    out: list[SSAValue] = [kb.index(0)] * len(operand)
    r = [i for i, d in enumerate(result) if d != 1]
    o = [i for i, d in enumerate(operand) if d != 1]
    ri = oi = 0
    while ri < len(r) or oi < len(o):
        nr, no = _group(result, r[ri:], operand, o[oi:])
        linear = _linearize(kb, [idx[i] for i in r[ri:ri + nr]],
                            [result[i] for i in r[ri:ri + nr]])
        dims = [operand[i] for i in o[oi:oi + no]]
        for k, i in enumerate(o[oi:oi + no]):
            inner = product(dims[k + 1:])
            v = linear if inner == 1 else kb.op(arith.DivSIOp(linear, kb.expr(inner)))
            out[i] = v if k == 0 else kb.op(arith.RemSIOp(v, kb.expr(dims[k])))
        ri += nr
        oi += no
    return out


def _group(result: Sequence[Expr], r: list[int], operand: Sequence[Expr],
           o: list[int]) -> tuple[int, int]:
    if not r or not o:  # whatever is left has size 1 (products are equal)
        return len(r), len(o)
    for nr in range(1, len(r) + 1):
        pr = product([result[i] for i in r[:nr]])
        for no in range(1, len(o) + 1):
            if product([operand[i] for i in o[:no]]) == pr:
                return nr, no
    return len(r), len(o)


def _linearize(kb: KernelBuilder, idx: list[SSAValue], dims: list[Expr]) -> SSAValue:
    if not idx:
        return kb.index(0)
    total = idx[0]
    for i, d in zip(idx[1:], dims[1:], strict=True):
        total = kb.op(arith.AddiOp(kb.op(arith.MuliOp(total, kb.expr(d))), i))
    return total


def build_fused(symbols: Sequence[str], spec: TensorSpec, layouts: Sequence[Layout],
                fused: g.FusedOp, name: str, out: Layout | None = None) -> loop.KernelOp:
    """The kernel of one region: argument 0 is the result (row-major, or through
    ``out``'s strides: a block of a state written in place), then the region's
    inputs."""
    out = Layout.contiguous(spec.shape) if out is None else out
    args = [Arg(spec.dtype, "w", out.shape, out.strides)]
    for a, lay in zip(fused.block.args, layouts, strict=True):
        fp = argument_footprint(a, lay)
        args.append(Arg(g.tensor_type(a).dtype.data, "r", fp.shape, fp.strides))
    kb = KernelBuilder(tuple(symbols), args)
    em = RegionEmitter(kb, fused, layouts)
    root = fused.block.last_op
    assert isinstance(root, g.FusedYieldOp)
    out_strides = out.strides
    shape = spec.shape
    matmuls = [op for op in fused.block.ops if isinstance(op, g.MatmulOp)
               and op.result.type.dims == shape]

    def store_at(idx: list[SSAValue]) -> None:
        if matmuls:
            em.matmuls(matmuls, idx)
        kb.op_noresult(loop.StoreOp(em.emit(root.value, idx), kb.ptr(0), idx, out_strides))

    for op in fused.block.ops:  # every id is checked, even where no row element is read
        if isinstance(op, g.GatherOp):
            ids_dims = list(g.tensor_type(op.ids).dims)
            kb.loop_nest(ids_dims, em.scoped(_id_check(em, op)),
                         names=[f"g{i}" for i in range(len(ids_dims))])
    if not shape:
        store_at([])
        return kb.finish(name)
    hoist = _row_invariants(fused, shape)
    em.store_terms = {} if matmuls else _stored_terms(fused, shape, hoist)

    def row(ivs: list[SSAValue]) -> None:
        em.materialized = set()
        for value in hoist:
            em.emit(value, [*ivs, kb.index(0)])
        em.materialized = set(em.store_terms.values())
        kb.loop_nest([shape[-1]], em.scoped(lambda j: store_at([*ivs, *j])),
                     names=[f"d{len(shape) - 1}"])

    kb.loop_nest(list(shape[:-1]), em.scoped(row))
    return kb.finish(name)


def _id_check(em: RegionEmitter, op: g.GatherOp) -> Callable[[list[SSAValue]], None]:
    def check(ivs: list[SSAValue]) -> None:
        em.check_ids(op, ivs)
    return check


STORED_TERMS_LOOP = "e"
"""The loop that stores a row sum's terms (``_stored_terms``) before the sum's
lanes loop reads them back: a plain loop, which a schedule may vectorize
whatever its extent (the terms are elementwise: softmax's ``exp``), while the
sum keeps its order."""


def _stored_terms(fused: g.FusedOp, shape: Sequence[Expr],
                  hoist: Sequence[SSAValue]) -> dict[Operation, SSAValue]:
    """The row sums whose terms the row's store computes again (softmax's
    ``exp(x - max)``, summed, then divided by the sum): an expensive elementwise
    value of the result's shape, read as it is (no view) by the sum over the
    last axis and by one elementwise op, nothing else. A loop of its own
    (``STORED_TERMS_LOOP``) stores each term into the result, the sum's loop
    reads them back, and so does the result's store: the same values (each term
    is computed once either way), the exp computed once per element instead of
    twice, and vectorizable where the sum's lanes loop is not."""
    out: dict[Operation, SSAValue] = {}
    hoisted = {v.owner for v in hoist}
    for op in fused.block.ops:
        if not (isinstance(op, g.ReduceSumOp) and op in hoisted):
            continue
        src = op.operand
        owner = src.owner
        if (not isinstance(owner, _EXPENSIVE) or g.tensor_type(src).dims != tuple(shape)
                or op.axis.data != len(shape) - 1):
            continue
        users = [u.operation for u in src.uses if u.operation is not op]
        if len(users) == 1 and (type(users[0]) in _BINARY or type(users[0]) in _UNARY):
            out[op] = src
    if len(out) > 1:
        return {}  # one stored term at most: the result holds one value per element
    return out


def _row_invariants(fused: g.FusedOp, shape: Sequence[Expr]) -> list[SSAValue]:
    """Region values shaped ``shape[:-1] + [1]`` (computed once per row)."""
    if shape[-1] == 1:
        return []
    want = (*shape[:-1], Expr.const(1))
    out = []
    for op in fused.block.ops:
        if isinstance(op, g.FusedYieldOp) or not op.results:
            continue
        if (g.tensor_type(op.results[0]).dims == want
                and not isinstance(op, g.ConstOp | g.ReshapeOp)):
            out.append(op.results[0])
    return out


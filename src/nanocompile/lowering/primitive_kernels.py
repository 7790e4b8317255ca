"""One ``loop.kernel`` per compute primitive (the unfused, phase-2 kernels).

Every builder has the signature ``build(symbols, result_spec, operand_layouts)
-> KernelOp``. Argument 0 is the result, written row-major; the others are
the operands, read through their layouts' strides (the offset is applied by
the caller, at launch). Loop ``d<i>`` runs over result dim ``i``; reductions
and matmul add a loop ``k``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType
from xdsl.ir import SSAValue

from nanocompile.dialects import loop
from nanocompile.ir.layout import Layout, contiguous_strides
from nanocompile.ir.shapes import TensorSpec
from nanocompile.ir.symbolic import Expr
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

Builder = Callable[[Sequence[str], TensorSpec, Sequence[Layout]], loop.KernelOp]


def _new(symbols: Sequence[str], spec: TensorSpec, operands: Sequence[tuple[str, Layout]],
         out_footprint: Layout | None = None) -> KernelBuilder:
    out = out_footprint or Layout.contiguous(spec.shape)
    args = [Arg(spec.dtype, "w", out.shape, out.strides)]
    args += [Arg(dtype, "r", lay.shape, lay.strides) for dtype, lay in operands]
    return KernelBuilder(tuple(symbols), args)


def _operand_dtypes(kb_specs: Sequence[Layout], dtypes: Sequence[str]) -> list[tuple[str, Layout]]:
    return list(zip(dtypes, kb_specs, strict=True))


def elementwise(symbols: Sequence[str], spec: TensorSpec, layouts: Sequence[Layout],
                dtypes: Sequence[str],
                compute: Callable[[KernelBuilder, list[SSAValue]], SSAValue]) -> KernelBuilder:
    kb = _new(symbols, spec, _operand_dtypes(layouts, dtypes))

    def body(ivs: list[SSAValue]) -> None:
        values = [kb.load(i + 1, ivs) for i in range(len(layouts))]
        kb.store(compute(kb, values), 0, ivs)

    kb.loop_nest(spec.shape, body)
    return kb


def build_binary(kind: str, operand_dtype: str) -> Builder:
    def build(symbols: Sequence[str], spec: TensorSpec,
              layouts: Sequence[Layout]) -> loop.KernelOp:
        dt = operand_dtype

        def compute(kb: KernelBuilder, v: list[SSAValue]) -> SSAValue:
            if kind == "less_equal":
                return emit_less_equal(kb, v[0], v[1])
            return emit_binary(kb, kind, v[0], v[1])

        return elementwise(symbols, spec, layouts, [dt, dt], compute).finish(kind)

    return build


def build_unary(kind: str) -> Builder:
    def build(symbols: Sequence[str], spec: TensorSpec,
              layouts: Sequence[Layout]) -> loop.KernelOp:
        kb = elementwise(symbols, spec, layouts, [spec.dtype],
                         lambda kb, v: emit_unary(kb, kind, v[0], spec.dtype))
        return kb.finish(kind)

    return build


def build_select(symbols: Sequence[str], spec: TensorSpec,
                 layouts: Sequence[Layout]) -> loop.KernelOp:
    kb = elementwise(symbols, spec, layouts, ["bool", spec.dtype, spec.dtype],
                     lambda kb, v: kb.op(arith.SelectOp(v[0], v[1], v[2])))
    return kb.finish("where")


def build_cast(src: str) -> Builder:
    def build(symbols: Sequence[str], spec: TensorSpec,
              layouts: Sequence[Layout]) -> loop.KernelOp:
        kb = elementwise(symbols, spec, layouts, [src],
                         lambda kb, v: emit_cast(kb, v[0], src, spec.dtype))
        return kb.finish("cast")

    return build


def build_copy(symbols: Sequence[str], spec: TensorSpec,
               layouts: Sequence[Layout]) -> loop.KernelOp:
    """Copy a strided view into a fresh row-major buffer. Also serves reshapes that
    strides cannot express: the loops run over the *source* shape, and since a
    reshape keeps row-major order, element ``(i...)`` of the source lands at the
    row-major position of ``(i...)`` in the source shape."""
    (src,) = layouts
    kb = _new(symbols, spec, [(spec.dtype, src)])
    dst_strides = contiguous_strides(src.shape)

    def body(ivs: list[SSAValue]) -> None:
        kb.op_noresult(loop.StoreOp(kb.load(1, ivs), kb.ptr(0), ivs, dst_strides))

    kb.loop_nest(src.shape, body)
    return kb.finish("copy")


def build_copy_into(symbols: Sequence[str], dst: Layout, src: Layout,
                    dtype: str) -> loop.KernelOp:
    """Copy a strided view into a strided destination of the same shape (an
    ``update_slice``'s block written in place: argument 0 is the destination
    view, its offset applied at launch)."""
    kb = _new(symbols, TensorSpec(dtype, src.shape), [(dtype, src)], out_footprint=dst)

    def body(ivs: list[SSAValue]) -> None:
        kb.store(kb.load(1, ivs), 0, ivs)

    kb.loop_nest(src.shape, body)
    return kb.finish("update_slice")


def build_reduce(kind: str, axis: int, order: str | None = None) -> Builder:
    """A reduction over ``axis``; a sum ``order = "sequential"`` is one
    accumulator in index order (``reduce_lanes``)."""
    def build(symbols: Sequence[str], spec: TensorSpec,
              layouts: Sequence[Layout]) -> loop.KernelOp:
        (src,) = layouts
        kb = _new(symbols, spec, [(spec.dtype, src)])

        def body(ivs: list[SSAValue]) -> None:
            init = kb.const(identity(kind, spec.dtype), spec.dtype)

            def step(k: SSAValue, acc: SSAValue) -> SSAValue:
                idx = [k if d == axis else iv for d, iv in enumerate(ivs)]
                return emit_accumulate(kb, kind, acc, kb.load(1, idx))

            lanes = reduce_lanes(kind, spec.dtype, order)
            kb.store(kb.reduction_loop(reduction_name(kind), src.shape[axis], init, step,
                                       lanes), 0, ivs)

        kb.loop_nest(spec.shape, body)
        return kb.finish(f"reduce_{kind}")

    return build


def build_matmul(symbols: Sequence[str], spec: TensorSpec,
                 layouts: Sequence[Layout]) -> loop.KernelOp:
    """``out[..., m, n] = sum_k a[..., m, k] * b[..., k, n]``: a lanes loop of
    ``MATMUL_LANES`` FMA chains over ``k`` (``loop.ForOp``), whatever the layouts."""
    return matmul_builder(None)(symbols, spec, layouts)


def matmul_builder(order: str | None) -> Builder:
    """``build_matmul`` for a matmul summing ``k`` in ``order`` (a key of the
    graph dialect's ``MATMUL_ORDERS``, None: the default; ``emit_matmul_sums``)."""
    def build(symbols: Sequence[str], spec: TensorSpec,
              layouts: Sequence[Layout]) -> loop.KernelOp:
        a, b = layouts
        kb = _new(symbols, spec, [(spec.dtype, a), (spec.dtype, b)])
        batch = len(spec.shape) - 2

        def body(ivs: list[SSAValue]) -> None:
            def operands(k: SSAValue, _: int) -> tuple[SSAValue, SSAValue]:
                return (kb.load(1, [*ivs[:batch], ivs[batch], k]),
                        kb.load(2, [*ivs[:batch], k, ivs[batch + 1]]))

            (total,) = emit_matmul_sums(kb, order, a.shape[-1], 1, operands)
            kb.store(total, 0, ivs)

        kb.loop_nest(spec.shape, body)
        return kb.finish("matmul")

    return build


def build_matmul_i8(symbols: Sequence[str], spec: TensorSpec,
                    layouts: Sequence[Layout]) -> loop.KernelOp:
    """``graph.matmul_i8``: ``out[m, n]`` is spec §5 kernel B's ``total`` of row
    ``m`` of ``xq`` (i8), its block scales ``xs`` (f32) and column ``n`` of ``w``
    (i8) (``emit_matmul_i8``: the order as a lanes loop over the lane terms, each
    an exact integer dot product of 4 columns)."""
    xq, xs, w = layouts
    kb = _new(symbols, spec, [("i8", xq), ("f32", xs), ("i8", w)])
    k = xq.shape[-1].const_value

    def body(ivs: list[SSAValue]) -> None:
        m, n = ivs

        def operands(c: SSAValue) -> tuple[SSAValue, SSAValue]:
            return kb.load(1, [m, c]), kb.load(3, [c, n])

        total = emit_matmul_i8(kb, k, operands, lambda b: kb.load(2, [m, b]))
        kb.store(total, 0, ivs)

    kb.loop_nest(spec.shape, body)
    return kb.finish("matmul_i8")


def build_gather(ids_dtype: str) -> Builder:
    """``out[i..., j...] = table[ids[i...], j...]``; an id outside [0, rows) exits with 1.

    ``rows`` may be symbolic (a table that is an input or a slice): the bound is
    computed at run time from the symbols."""

    def build(symbols: Sequence[str], spec: TensorSpec,
              layouts: Sequence[Layout]) -> loop.KernelOp:
        table, ids = layouts
        n_ids = len(ids.shape)
        # the table footprint is the rows actually read: one per id
        rows_read = Layout(ids.shape + table.shape[1:], table.offset,
                           tuple(Expr.const(1) for _ in ids.shape) + table.strides[1:])
        kb = _new(symbols, spec, [(spec.dtype, rows_read), (ids_dtype, ids)])
        row_dims = list(spec.shape[n_ids:])

        def body(ivs: list[SSAValue]) -> None:  # every id is checked, even for empty rows
            raw = kb.load(2, ivs)
            idx = emit_cast(kb, raw, ids_dtype, "i64")
            ok_lo = kb.op(arith.CmpiOp(idx, kb.const(0, "i64"), "sge"))
            rows = kb.op(arith.IndexCastOp(kb.expr(table.shape[0]), loop.scalar_type("i64")))
            ok_hi = kb.op(arith.CmpiOp(idx, rows, "slt"))
            kb.op_noresult(loop.CheckOp(kb.op(arith.AndIOp(ok_lo, ok_hi)), 1,
                                        "graph.gather: id out of range"))
            row = kb.op(arith.IndexCastOp(idx, IndexType()))

            def copy(cols: list[SSAValue]) -> None:
                kb.store(kb.load_at(1, [row, *cols], table.strides), 0, [*ivs, *cols])

            kb.loop_nest(row_dims, copy, names=[f"d{n_ids + i}" for i in range(len(row_dims))])

        kb.loop_nest(list(ids.shape), body)
        return kb.finish("gather")

    return build


def build_concat(axis: int) -> Builder:
    """One loop nest per operand, each writing its slab of the result."""

    def build(symbols: Sequence[str], spec: TensorSpec,
              layouts: Sequence[Layout]) -> loop.KernelOp:
        kb = _new(symbols, spec, [(spec.dtype, lay) for lay in layouts])
        out_strides = contiguous_strides(spec.shape)
        start = Expr.const(0)
        for i, lay in enumerate(layouts):
            offset = start

            def body(ivs: list[SSAValue], i: int = i, offset: Expr = offset) -> None:
                value = kb.load(i + 1, ivs)
                shifted = list(ivs)
                shifted[axis] = kb.op(arith.AddiOp(ivs[axis], kb.expr(offset))) \
                    if offset != 0 else ivs[axis]
                kb.op_noresult(loop.StoreOp(value, kb.ptr(0), shifted, out_strides))

            kb.loop_nest(lay.shape, body, names=[f"p{i}d{d}" for d in range(len(lay.shape))])
            start = start + lay.shape[axis]
        return kb.finish("concat")

    return build


def build_iota(axis: int) -> Builder:
    def build(symbols: Sequence[str], spec: TensorSpec,
              layouts: Sequence[Layout]) -> loop.KernelOp:
        kb = _new(symbols, spec, [])

        def body(ivs: list[SSAValue]) -> None:
            value = kb.op(arith.IndexCastOp(ivs[axis], loop.scalar_type("i64")))
            kb.store(emit_cast(kb, value, "i64", spec.dtype), 0, ivs)

        kb.loop_nest(spec.shape, body)
        return kb.finish("iota")

    return build


def build_dim(expr: Expr) -> Builder:
    def build(symbols: Sequence[str], spec: TensorSpec,
              layouts: Sequence[Layout]) -> loop.KernelOp:
        kb = _new(symbols, spec, [])
        value = kb.op(arith.IndexCastOp(kb.expr(expr), loop.scalar_type("i64")))
        kb.store(value, 0, [])
        return kb.finish("dim")

    return build

"""Shape and dtype inference for the graph primitives (spec §2.2).

Plain functions over ``TensorSpec`` (dtype + symbolic shape), shared by the
Graph dialect's verifiers, the frontend (which builds result types with them)
and the interpreter (which checks every node against them). Each function
takes its operands as ``(label, spec)`` pairs so that a ``ShapeError`` names
the values involved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nanocompile.ir.dtypes import DTYPES, FLOAT_DTYPES, INT_DTYPES, NUMERIC_DTYPES
from nanocompile.ir.symbolic import Expr, ExprLike, product


class ShapeError(ValueError):
    """A primitive was applied to operands it does not accept."""


@dataclass(frozen=True)
class TensorSpec:
    """The static type of a graph value: dtype and symbolic shape."""

    dtype: str
    shape: tuple[Expr, ...]

    @staticmethod
    def of(dtype: str, shape: Sequence[ExprLike]) -> TensorSpec:
        if dtype not in DTYPES:
            raise ShapeError(f"unknown dtype '{dtype}', expected one of {', '.join(DTYPES)}")
        return TensorSpec(dtype, tuple(Expr.lift(d) for d in shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"[{', '.join(str(d) for d in self.shape)}] {self.dtype}"


Labeled = tuple[str, TensorSpec]


def shape_text(shape: Sequence[Expr]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _normalize_axis(axis: int, rank: int, label: str) -> int:
    if not -rank <= axis < rank:
        raise ShapeError(f"axis {axis} is out of range for {label} of rank {rank}")
    return axis % rank


def _require_dtype(label: str, spec: TensorSpec, allowed: frozenset[str], what: str) -> None:
    if spec.dtype not in allowed:
        raise ShapeError(f"{label} must be {what}, got {spec.dtype}")


def _same(op: str, a: Labeled, b: Labeled) -> None:
    (la, sa), (lb, sb) = a, b
    if sa.shape != sb.shape:
        raise ShapeError(
            f"{op}: shapes of {la} {shape_text(sa.shape)} and {lb} {shape_text(sb.shape)} differ"
        )
    if sa.dtype != sb.dtype:
        raise ShapeError(f"{op}: dtypes of {la} ({sa.dtype}) and {lb} ({sb.dtype}) differ")


def binary(op: str, lhs: Labeled, rhs: Labeled) -> TensorSpec:
    """``add sub mul`` (numeric) and ``div`` (float only)."""
    _same(op, lhs, rhs)
    allowed = FLOAT_DTYPES if op == "div" else NUMERIC_DTYPES
    what = "a float tensor" if op == "div" else "a numeric tensor"
    _require_dtype(f"{op} {lhs[0]}", lhs[1], allowed, what)
    return lhs[1]


def less_equal(lhs: Labeled, rhs: Labeled) -> TensorSpec:
    _same("less_equal", lhs, rhs)
    _require_dtype(f"less_equal {lhs[0]}", lhs[1], NUMERIC_DTYPES, "a numeric tensor")
    return TensorSpec("bool", lhs[1].shape)


def where(cond: Labeled, a: Labeled, b: Labeled) -> TensorSpec:
    _require_dtype(f"where {cond[0]}", cond[1], frozenset({"bool"}), "bool")
    _same("where", a, b)
    if cond[1].shape != a[1].shape:
        raise ShapeError(
            f"where: shapes of {cond[0]} {shape_text(cond[1].shape)} and "
            f"{a[0]} {shape_text(a[1].shape)} differ"
        )
    _require_dtype(f"where {a[0]}", a[1], NUMERIC_DTYPES, "a numeric tensor")
    return a[1]


def unary(op: str, x: Labeled) -> TensorSpec:
    """``neg`` (numeric); ``exp sqrt reciprocal sin cos`` (float only)."""
    if op == "neg":
        _require_dtype(f"neg {x[0]}", x[1], NUMERIC_DTYPES, "a numeric tensor")
    else:
        _require_dtype(f"{op} {x[0]}", x[1], FLOAT_DTYPES, "a float tensor")
    return x[1]


def cast(x: Labeled, dtype: str) -> TensorSpec:
    if dtype not in DTYPES:
        raise ShapeError(f"cast: unknown dtype '{dtype}'")
    if x[1].dtype == "bf16" and dtype != "f32":
        raise ShapeError(f"cast: bf16 {x[0]} can only be cast to f32, not {dtype}")
    if dtype == "bf16":
        raise ShapeError(f"cast: bf16 is a storage type; {x[0]} cannot be cast to it")
    return TensorSpec(dtype, x[1].shape)


def reduce(op: str, x: Labeled, axis: int) -> TensorSpec:
    _require_dtype(f"{op} {x[0]}", x[1], NUMERIC_DTYPES, "a numeric tensor")
    ax = _normalize_axis(axis, x[1].rank, x[0])
    shape = list(x[1].shape)
    shape[ax] = Expr.const(1)
    return TensorSpec(x[1].dtype, tuple(shape))


def reshape(x: Labeled, shape: Sequence[ExprLike]) -> TensorSpec:
    new = tuple(Expr.lift(d) for d in shape)
    for d in new:
        if d.provably_negative():
            raise ShapeError(f"reshape of {x[0]}: negative dimension {d}")
    if product(x[1].shape) != product(new):
        raise ShapeError(
            f"reshape of {x[0]}: element count of {shape_text(x[1].shape)} "
            f"({product(x[1].shape)}) differs from {shape_text(new)} ({product(new)})"
        )
    return TensorSpec(x[1].dtype, new)


def permute(x: Labeled, perm: Sequence[int]) -> TensorSpec:
    if sorted(perm) != list(range(x[1].rank)):
        raise ShapeError(
            f"permute of {x[0]}: {list(perm)} is not a permutation of range({x[1].rank})"
        )
    return TensorSpec(x[1].dtype, tuple(x[1].shape[p] for p in perm))


def broadcast(x: Labeled, shape: Sequence[ExprLike]) -> TensorSpec:
    new = tuple(Expr.lift(d) for d in shape)
    if len(new) != x[1].rank:
        raise ShapeError(
            f"broadcast of {x[0]}: rank {x[1].rank} {shape_text(x[1].shape)} differs from "
            f"target rank {len(new)} {shape_text(new)}"
        )
    for i, (old, target) in enumerate(zip(x[1].shape, new, strict=True)):
        if old != target and old != 1:
            raise ShapeError(
                f"broadcast of {x[0]}: dim {i} of size {old} is neither 1 nor {target}"
            )
    return TensorSpec(x[1].dtype, new)


def slice_(x: Labeled, axis: int, start: ExprLike, stop: ExprLike) -> TensorSpec:
    ax = _normalize_axis(axis, x[1].rank, x[0])
    lo, hi, size = Expr.lift(start), Expr.lift(stop), x[1].shape[ax]
    for what, diff in (("start", lo), ("stop - start", hi - lo), ("size - stop", size - hi)):
        if diff.provably_negative():
            raise ShapeError(
                f"slice of {x[0]}: bounds [{lo}, {hi}) do not fit axis {ax} of size {size} "
                f"({what} = {diff} < 0)"
            )
    shape = list(x[1].shape)
    shape[ax] = hi - lo
    return TensorSpec(x[1].dtype, tuple(shape))


def update_slice(dest: Labeled, update: Labeled, offsets: Sequence[Expr]) -> TensorSpec:
    """``dest``'s type, after checking that ``update`` fits at ``offsets`` where
    it can be decided (the rest is a run-time requirement)."""
    (ld, d), (lu, u) = dest, update
    if d.dtype != u.dtype:
        raise ShapeError(f"update_slice: dtypes of {ld} ({d.dtype}) and {lu} ({u.dtype}) differ")
    if d.rank != u.rank or len(offsets) != d.rank:
        raise ShapeError(f"update_slice: {ld} has rank {d.rank}, {lu} rank {u.rank} and "
                         f"{len(offsets)} offsets given")
    for ax, (size, n, off) in enumerate(zip(d.shape, u.shape, offsets, strict=True)):
        for what, diff in (("offset", off), ("dest dim - offset - update dim", size - off - n)):
            if diff.provably_negative():
                raise ShapeError(f"update_slice: {lu} at offset {off} does not fit axis {ax} "
                                 f"of {ld} (size {size}; {what} = {diff} < 0)")
    return d


def concat(xs: Sequence[Labeled], axis: int) -> TensorSpec:
    if not xs:
        raise ShapeError("concat needs at least one operand")
    first_label, first = xs[0]
    ax = _normalize_axis(axis, first.rank, first_label)
    total = Expr.const(0)
    for label, spec in xs:
        if spec.dtype != first.dtype:
            raise ShapeError(
                f"concat: dtypes of {first_label} ({first.dtype}) and {label} ({spec.dtype}) differ"
            )
        if spec.rank != first.rank:
            raise ShapeError(
                f"concat: ranks of {first_label} ({first.rank}) and {label} ({spec.rank}) differ"
            )
        for i, (a, b) in enumerate(zip(first.shape, spec.shape, strict=True)):
            if i != ax and a != b:
                raise ShapeError(
                    f"concat along axis {ax}: dim {i} of {first_label} ({a}) and "
                    f"{label} ({b}) differ"
                )
        total = total + spec.shape[ax]
    shape = list(first.shape)
    shape[ax] = total
    return TensorSpec(first.dtype, tuple(shape))


def matmul(lhs: Labeled, rhs: Labeled) -> TensorSpec:
    (la, a), (lb, b) = lhs, rhs
    _require_dtype(f"matmul {la}", a, FLOAT_DTYPES, "a float tensor")
    if a.dtype != b.dtype:
        raise ShapeError(f"matmul: dtypes of {la} ({a.dtype}) and {lb} ({b.dtype}) differ")
    if a.rank < 2 or a.rank != b.rank:
        raise ShapeError(
            f"matmul: ranks of {la} ({a.rank}) and {lb} ({b.rank}) must be equal and >= 2"
        )
    if a.shape[:-2] != b.shape[:-2]:
        raise ShapeError(
            f"matmul: batch dims of {la} {shape_text(a.shape[:-2])} and "
            f"{lb} {shape_text(b.shape[:-2])} differ"
        )
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul: inner dims differ: {la} {shape_text(a.shape)} has K = {a.shape[-1]}, "
            f"{lb} {shape_text(b.shape)} has K = {b.shape[-2]}"
        )
    return TensorSpec(a.dtype, (*a.shape[:-1], b.shape[-1]))


def gather(table: Labeled, ids: Labeled) -> TensorSpec:
    _require_dtype(f"gather {ids[0]}", ids[1], INT_DTYPES, "an integer tensor")
    if table[1].rank < 1:
        raise ShapeError(f"gather: table {table[0]} must have rank >= 1")
    return TensorSpec(table[1].dtype, (*ids[1].shape, *table[1].shape[1:]))


def iota(shape: Sequence[ExprLike], axis: int, dtype: str) -> TensorSpec:
    spec = TensorSpec.of(dtype, shape)
    _normalize_axis(axis, spec.rank, "iota")
    _require_dtype("iota", spec, NUMERIC_DTYPES, "numeric")
    return spec


I8_BLOCK = 32
"""Columns per activation block of ``matmul_i8`` (spec §5 kernel B): one f32 scale
per token row and block; the last block holds the ``K mod 32`` leftover columns."""


def i8_blocks(k: int) -> int:
    """The number of activation blocks over ``k`` columns: ``ceil(k / 32)``."""
    return -(-k // I8_BLOCK)


def matmul_i8(lhs: Labeled, lhs_scale: Labeled, rhs: Labeled) -> TensorSpec:
    """``[M, K] i8, [M, ceil(K / 32)] f32, [K, N] i8 -> [M, N] f32``, K a constant."""
    (la, a), (ls, s), (lb, b) = lhs, lhs_scale, rhs
    for label, spec, dtype in ((la, a, "i8"), (ls, s, "f32"), (lb, b, "i8")):
        if spec.dtype != dtype:
            raise ShapeError(f"matmul_i8: {label} must be {dtype}, got {spec.dtype}")
        if spec.rank != 2:
            raise ShapeError(f"matmul_i8: {label} must have rank 2, got {spec.rank} "
                             f"{shape_text(spec.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ShapeError(
            f"matmul_i8: inner dims differ: {la} {shape_text(a.shape)} has K = {a.shape[1]}, "
            f"{lb} {shape_text(b.shape)} has K = {b.shape[0]}"
        )
    k = a.shape[1]
    if not k.is_const:
        raise ShapeError(f"matmul_i8: K of {la} {shape_text(a.shape)} must be a constant, "
                         f"got {k}")
    want = (a.shape[0], Expr.const(i8_blocks(k.const_value)))
    if s.shape != want:
        raise ShapeError(
            f"matmul_i8: {ls} {shape_text(s.shape)} must be {shape_text(want)} (a scale "
            f"per row of {la} and block of {I8_BLOCK} of its K = {k})"
        )
    return TensorSpec("f32", (a.shape[0], b.shape[1]))

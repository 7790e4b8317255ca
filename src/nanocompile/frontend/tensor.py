"""Tensor-like handles whose Python operators build Graph dialect ops.

``GraphBuilder`` appends ops to one ``graph.func`` block; ``Tensor`` wraps an
SSA value of that block. Binary operators broadcast the NumPy way by
inserting explicit ``graph.reshape`` (to align ranks) and ``graph.broadcast``
(to stretch size-1 dims), because the Graph IR has no implicit broadcasting.
A Python scalar becomes a 0-d ``graph.const`` of the other operand's dtype.

    gb = GraphBuilder("f")
    x = gb.input("x", "f32", ["seq", 896])
    y = (x * x).sum(-1) / 896          # reduce_sum, then const/reshape/broadcast/div
    gb.output("y", y)
    module = gb.finish()
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from nanocompile.dialects import graph as g
from nanocompile.ir.shapes import ShapeError, shape_text
from nanocompile.ir.symbolic import Expr, ExprLike

Scalar = int | float | bool
_BinaryOpClass = type[g.BinaryOp]  # spelled here: inside Tensor, ``type`` is its property


class GraphBuilder:
    """Appends graph ops to the block of one ``graph.func``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.block = Block()
        self.outputs: list[tuple[str, SSAValue]] = []
        self.scalars: list[str] = []
        self._weights: dict[str, Tensor] = {}

    def add(self, op: Operation) -> Tensor:
        self.block.add_op(op)
        return Tensor(self, op.results[0])

    # -- sources ------------------------------------------------------------
    def input(self, name: str, dtype: str, shape: Sequence[ExprLike]) -> Tensor:
        return self.add(g.InputOp(name, dtype, shape)).named(name)

    def scalar(self, name: str) -> Expr:
        """Declare symbol ``name`` a scalar of the graph (its value is given by the
        caller, not bound by a shape); returns it as a shape expression."""
        if name not in self.scalars:
            self.scalars.append(name)
        return Expr.sym(name)

    def weight(self, name: str, shape: Sequence[int], dtype: str = "f32") -> Tensor:
        """One node per weight name: asking again returns the same value."""
        if name in self._weights:
            existing = self._weights[name]
            if existing.shape != tuple(Expr.lift(d) for d in shape):
                raise ShapeError(f"weight '{name}' requested with shape {list(shape)}, "
                                 f"already declared as {shape_text(existing.shape)}")
            return existing
        t = self.add(g.WeightOp(name, shape, dtype))
        self._weights[name] = t
        return t

    def const(self, value: np.ndarray | Scalar, dtype: str) -> Tensor:
        return self.add(g.ConstOp(np.asarray(value), dtype))

    def iota(self, shape: Sequence[ExprLike], axis: int, dtype: str = "i64") -> Tensor:
        return self.add(g.IotaOp(shape, axis, dtype))

    def dim(self, expr: ExprLike) -> Tensor:
        return self.add(g.DimOp(expr))

    # -- finishing ----------------------------------------------------------
    def output(self, name: str, value: Tensor) -> None:
        self.outputs.append((name, value.value))

    def finish(self) -> g.GraphFuncOp:
        self.block.add_op(g.ReturnOp(self.outputs))
        return g.GraphFuncOp(self.name, self.block, self.scalars)

    def finish_module(self) -> ModuleOp:
        return ModuleOp([self.finish()])


class Tensor:
    """A graph value with NumPy-like operators."""

    __array_priority__ = 1000  # keep NumPy scalars from swallowing our operators

    def __init__(self, builder: GraphBuilder, value: SSAValue) -> None:
        self.builder = builder
        self.value = value

    # -- type ---------------------------------------------------------------
    @property
    def type(self) -> g.TensorType:
        assert isinstance(self.value.type, g.TensorType)
        return self.value.type

    @property
    def shape(self) -> tuple[Expr, ...]:
        return self.type.dims

    @property
    def dtype(self) -> str:
        return self.type.dtype.data

    @property
    def rank(self) -> int:
        return len(self.shape)

    def named(self, name: str) -> Tensor:
        """Give the value a readable SSA name in printed IR."""
        self.value.name_hint = name
        return self

    def __repr__(self) -> str:
        return f"Tensor({shape_text(self.shape)}, {self.dtype})"

    # -- movement -------------------------------------------------------------
    def reshape(self, *shape: ExprLike) -> Tensor:
        return self.builder.add(g.ReshapeOp(self.value, shape))

    def permute(self, *perm: int) -> Tensor:
        return self.builder.add(g.PermuteOp(self.value, perm))

    @property
    def T(self) -> Tensor:
        if self.rank != 2:
            raise ShapeError(f".T needs a rank-2 tensor, got {self!r}")
        return self.permute(1, 0)

    def broadcast_to(self, *shape: ExprLike) -> Tensor:
        target = tuple(Expr.lift(d) for d in shape)
        if target == self.shape:
            return self
        t = self
        if t.rank < len(target):
            t = t.reshape(*([1] * (len(target) - t.rank)), *t.shape)
        if t.shape == target:
            return t
        return self.builder.add(g.BroadcastOp(t.value, target))

    def slice(self, axis: int, start: ExprLike, stop: ExprLike) -> Tensor:
        return self.builder.add(g.SliceOp(self.value, axis, start, stop))

    # -- elementwise ------------------------------------------------------------
    def _binary(self, op: _BinaryOpClass, other: Tensor | Scalar, swap: bool = False) -> Tensor:
        a, b = broadcast_all(self, other)
        if swap:
            a, b = b, a
        return self.builder.add(op(a.value, b.value))

    def __add__(self, other: Tensor | Scalar) -> Tensor:
        return self._binary(g.AddOp, other)

    def __radd__(self, other: Scalar) -> Tensor:
        return self._binary(g.AddOp, other, swap=True)

    def __sub__(self, other: Tensor | Scalar) -> Tensor:
        return self._binary(g.SubOp, other)

    def __rsub__(self, other: Scalar) -> Tensor:
        return self._binary(g.SubOp, other, swap=True)

    def __mul__(self, other: Tensor | Scalar) -> Tensor:
        return self._binary(g.MulOp, other)

    def __rmul__(self, other: Scalar) -> Tensor:
        return self._binary(g.MulOp, other, swap=True)

    def __truediv__(self, other: Tensor | Scalar) -> Tensor:
        return self._binary(g.DivOp, other)

    def __rtruediv__(self, other: Scalar) -> Tensor:
        return self._binary(g.DivOp, other, swap=True)

    def __le__(self, other: Tensor | Scalar) -> Tensor:
        return self._binary(g.LessEqualOp, other)

    def __ge__(self, other: Tensor | Scalar) -> Tensor:
        """``x >= y`` is ``less_equal(y, x)``."""
        return self._binary(g.LessEqualOp, other, swap=True)

    def __neg__(self) -> Tensor:
        return self.builder.add(g.NegOp(self.value))

    def __matmul__(self, other: Tensor) -> Tensor:
        return self.builder.add(g.MatmulOp(self.value, other.value))

    def exp(self) -> Tensor:
        return self.builder.add(g.ExpOp(self.value))

    def sqrt(self) -> Tensor:
        return self.builder.add(g.SqrtOp(self.value))

    def reciprocal(self) -> Tensor:
        return self.builder.add(g.ReciprocalOp(self.value))

    def sin(self) -> Tensor:
        return self.builder.add(g.SinOp(self.value))

    def cos(self) -> Tensor:
        return self.builder.add(g.CosOp(self.value))

    def cast(self, dtype: str) -> Tensor:
        if dtype == self.dtype:
            return self
        return self.builder.add(g.CastOp(self.value, dtype))

    # -- reductions -------------------------------------------------------------
    def sum(self, axis: int) -> Tensor:
        return self.builder.add(g.ReduceSumOp(self.value, axis))

    def max(self, axis: int) -> Tensor:
        return self.builder.add(g.ReduceMaxOp(self.value, axis))


def _scalar_dtype(x: Scalar) -> str:
    if isinstance(x, bool | np.bool_):
        return "bool"
    return "i64" if isinstance(x, int | np.integer) else "f32"


def _as_tensor(builder: GraphBuilder, x: Tensor | Scalar, dtype: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, bool | int | float | np.generic):
        return builder.const(x, dtype)
    raise TypeError(f"expected a Tensor or a Python scalar, got {type(x).__name__}")


def broadcast_shapes(*shapes: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """NumPy's broadcasting rule over symbolic shapes."""
    rank = max(len(s) for s in shapes)
    padded = [(Expr.const(1),) * (rank - len(s)) + tuple(s) for s in shapes]
    out = []
    for axis in range(rank):
        dims = {d for p in padded for d in [p[axis]] if d != 1}
        if len(dims) > 1:
            raise ShapeError(
                "cannot broadcast shapes " + ", ".join(shape_text(s) for s in shapes)
                + f" (axis {axis}: {', '.join(sorted(str(d) for d in dims))})"
            )
        out.append(dims.pop() if dims else Expr.const(1))
    return tuple(out)


def broadcast_all(*xs: Tensor | Scalar) -> list[Tensor]:
    """Operands as tensors of one common shape; scalars take the tensors' dtype."""
    tensors = [x for x in xs if isinstance(x, Tensor)]
    if not tensors:
        raise TypeError("at least one operand must be a Tensor")
    builder = tensors[0].builder
    dtype = next((t.dtype for t in tensors if t.dtype != "bool"), None)
    if dtype is None:  # only bool tensors: the scalars say what the values are
        dtype = next((_scalar_dtype(x) for x in xs if not isinstance(x, Tensor)), "bool")
    as_t = [_as_tensor(builder, x, dtype) for x in xs]
    target = broadcast_shapes(*(t.shape for t in as_t))
    return [t.broadcast_to(*target) for t in as_t]


def where(cond: Tensor, a: Tensor | Scalar, b: Tensor | Scalar) -> Tensor:
    c, x, y = broadcast_all(cond, a, b)
    return cond.builder.add(g.WhereOp(c.value, x.value, y.value))


def concat(xs: Sequence[Tensor], axis: int) -> Tensor:
    if not xs:
        raise ShapeError("concat needs at least one tensor")
    return xs[0].builder.add(g.ConcatOp([x.value for x in xs], axis))


def update_slice(dest: Tensor, update: Tensor, offsets: Sequence[ExprLike]) -> Tensor:
    """``dest`` with the block at ``offsets`` replaced by ``update``."""
    return dest.builder.add(g.UpdateSliceOp(dest.value, update.value, offsets))


def gather(table: Tensor, ids: Tensor) -> Tensor:
    return table.builder.add(g.GatherOp(table.value, ids.value))

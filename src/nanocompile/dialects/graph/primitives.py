"""The primitive ops of the Graph dialect (spec §2.2): sources, elementwise,
reductions, layout, matmul and gather, and spec §5 kernel B's ``round`` and
``matmul_i8``, sharing one custom syntax (see ``dialects/graph/__init__.py``,
which registers them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects.common.syntax import (
    as_elements,
    parse_dim_expr,
)
from nanocompile.dialects.graph.types import (
    DimAttr,
    ElementsAttr,
    TensorType,
    _label,
    tensor_spec,
)
from nanocompile.ir import shapes
from nanocompile.ir.dtypes import numpy_dtype
from nanocompile.ir.shapes import Labeled, ShapeError, TensorSpec
from nanocompile.ir.symbolic import Expr, ExprLike

# --------------------------------------------------------------------------
# The shared custom syntax of the primitives
# --------------------------------------------------------------------------

# Property kinds: "int", "ints", "dim", "dims" are printed as `key = value`;
# "name" (a string) and "expr" (a shape expression) are printed positionally;
# "str?" is an optional string, printed as `key = "value"` only when present.
_POSITIONAL = ("name", "expr")
_OPTIONAL = ("str?",)


def _print_prop(printer: Printer, kind: str, attr: Attribute) -> None:
    if kind in ("name", "str?"):
        assert isinstance(attr, StringAttr)
        printer.print_string_literal(attr.data)
    elif kind == "int":
        assert isinstance(attr, IntAttr)
        printer.print_string(str(attr.data))
    elif kind in ("ints", "dims"):
        assert isinstance(attr, ArrayAttr)
        printer.print_string("[" + ", ".join(str(a.data) for a in attr.data) + "]")
    else:  # "dim" and "expr"
        assert isinstance(attr, DimAttr)
        printer.print_string(str(attr.data))


def _parse_prop(parser: Parser, kind: str) -> Attribute:
    if kind in ("name", "str?"):
        return StringAttr(parser.parse_str_literal())
    if kind == "int":
        return IntAttr(parser.parse_integer(allow_boolean=False))
    if kind == "ints":
        values = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
        )
        return ArrayAttr([IntAttr(v) for v in values])
    if kind == "dims":
        exprs = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                  lambda: parse_dim_expr(parser))
        return ArrayAttr([DimAttr(e) for e in exprs])
    return DimAttr(parse_dim_expr(parser))


class GraphPrimitiveOp(IRDLOperation):
    """Base of every graph primitive: custom syntax and inference-based verify."""

    PROPS: ClassVar[tuple[tuple[str, str], ...]] = ()
    ROLES: ClassVar[tuple[str, ...]] = ("operand",)

    # -- inference ----------------------------------------------------------
    def labeled_operands(self) -> list[Labeled]:
        roles = self.ROLES
        out = []
        for i, v in enumerate(self.operands):
            role = roles[i] if i < len(roles) else f"operand #{i}"
            out.append((_label(role, v), tensor_spec(v)))
        return out

    def infer(self) -> TensorSpec:
        """The result type implied by the operands and properties. Every primitive
        overrides it (test_graph_dialect checks each registered one); reaching
        this base means a new op class forgot to."""
        raise TypeError(f"{type(self).__name__} ({self.name}) does not define infer()")

    def verify_(self) -> None:
        try:
            inferred = self.infer()
        except ShapeError as e:
            msg = str(e)
            kind = self.name.removeprefix("graph.")
            msg = f"graph.{msg}" if msg.startswith(kind) else f"{self.name}: {msg}"
            raise VerifyException(msg) from None
        declared = tensor_spec(self.results[0])
        if declared != inferred:
            name = f" %{self.results[0].name_hint}" if self.results[0].name_hint else ""
            raise VerifyException(
                f"{self.name}: declared result type{name} {declared} differs from "
                f"inferred type {inferred}"
            )

    # -- syntax ---------------------------------------------------------------
    def print(self, printer: Printer) -> None:
        if self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
        keyword = []
        for name, kind in self.PROPS:
            if kind in _OPTIONAL and name not in self.properties:
                continue
            attr = self.properties[name]
            if kind in _POSITIONAL:
                printer.print_string(" ")
                _print_prop(printer, kind, attr)
            else:
                keyword.append((name, kind, attr))
        for i, (name, kind, attr) in enumerate(keyword):
            printer.print_string(f"{',' if i else ''} {name} = ")
            _print_prop(printer, kind, attr)
        if self.attributes:
            printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        _print_types(printer, [v.type for v in self.operands], self.results[0].type)

    @classmethod
    def parse(cls, parser: Parser) -> GraphPrimitiveOp:
        unresolved = []
        if (first := parser.parse_optional_unresolved_operand()) is not None:
            unresolved.append(first)
            while parser.parse_optional_punctuation(",") is not None:
                unresolved.append(parser.parse_unresolved_operand())
        props: dict[str, Attribute] = {}
        keyword = [(n, k) for n, k in cls.PROPS if k not in _POSITIONAL]
        for name, kind in cls.PROPS:
            if kind in _POSITIONAL:
                props[name] = _parse_prop(parser, kind)
        leading = True  # no keyword property parsed yet (no comma before the next)
        for name, kind in keyword:
            if kind in _OPTIONAL:
                comma = not leading and parser.parse_optional_punctuation(",") is not None
                if parser.parse_optional_keyword(name) is None:
                    if comma:
                        parser.raise_error(f"expected '{name}' after ','")
                    continue
            else:
                if not leading:
                    parser.parse_punctuation(",")
                parser.parse_keyword(name)
            leading = False
            parser.parse_punctuation("=")
            props[name] = _parse_prop(parser, kind)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        operand_types, result_type = _parse_types(parser, len(unresolved))
        operands = [
            parser.resolve_operand(u, t) for u, t in zip(unresolved, operand_types, strict=True)
        ]
        op = cls.build(operands=_group_operands(cls, operands), result_types=[result_type],
                       properties=props, attributes=attrs)
        return op


class PurePrimitiveOp(GraphPrimitiveOp):
    """A primitive without side effects (everything but ``input`` and ``weight``)."""

    traits = traits_def(Pure())


def _group_operands(cls: type[IRDLOperation], operands: list[SSAValue]) -> list:
    if cls is ConcatOp:
        return [operands]
    return operands


def _print_types(printer: Printer, operand_types: list[Attribute], result: Attribute) -> None:
    if all(t == result for t in operand_types):
        printer.print_attribute(result)
        return
    if all(t == operand_types[0] for t in operand_types):
        printer.print_attribute(operand_types[0])
    else:
        printer.print_string("(")
        printer.print_list(operand_types, printer.print_attribute)
        printer.print_string(")")
    printer.print_string(" -> ")
    printer.print_attribute(result)


def _parse_types(parser: Parser, n_operands: int) -> tuple[list[Attribute], Attribute]:
    if parser.parse_optional_punctuation("(") is not None:
        types: list[Attribute] = parser.parse_comma_separated_list(parser.Delimiter.NONE,
                                                                   parser.parse_type)
        parser.parse_punctuation(")")
        parser.parse_punctuation("->")
        result = parser.parse_type()
    else:
        first = parser.parse_type()
        if parser.parse_optional_punctuation("->") is not None:
            types, result = [first] * max(n_operands, 1), parser.parse_type()
        else:
            types, result = [first] * n_operands, first
    if len(types) != n_operands:
        parser.raise_error(f"expected {n_operands} operand types, got {len(types)}")
    return types, result


def _props(**kwargs: Attribute) -> dict[str, Attribute]:
    return kwargs


# --------------------------------------------------------------------------
# Sources: input, weight, const, iota, dim
# --------------------------------------------------------------------------


@irdl_op_definition
class InputOp(GraphPrimitiveOp):
    """A graph argument; a dim that is exactly one symbol binds it.

    ``%ids = graph.input "token_ids" : !graph.tensor<[seq], i64>``
    """

    name = "graph.input"
    arg_name = prop_def(StringAttr, prop_name="name")
    result = result_def(TensorType)
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("name", "name"),)
    # not Pure: an unused input is still part of the signature

    def __init__(self, name: str, dtype: str, shape: Sequence[ExprLike]) -> None:
        super().__init__(result_types=[TensorType.get(dtype, shape)],
                         properties=_props(name=StringAttr(name)))

    def infer(self) -> TensorSpec:
        return self.result.type.spec


@irdl_op_definition
class WeightOp(GraphPrimitiveOp):
    """A named constant tensor supplied at run time; its shape is concrete.

    ``%w = graph.weight "model.norm.weight" : !graph.tensor<[896], f32>``
    """

    name = "graph.weight"
    weight_name = prop_def(StringAttr, prop_name="name")
    result = result_def(TensorType)
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("name", "name"),)
    # not Pure: weights are the graph's signature too

    def __init__(self, name: str, shape: Sequence[int], dtype: str = "f32") -> None:
        super().__init__(result_types=[TensorType.get(dtype, shape)],
                         properties=_props(name=StringAttr(name)))

    def infer(self) -> TensorSpec:
        spec = self.result.type.spec
        symbolic = [str(d) for d in spec.shape if not d.is_const]
        if symbolic:
            raise ShapeError(
                f"weight '{self.weight_name.data}' must have a concrete shape, "
                f"got symbolic dims {symbolic}"
            )
        return spec


@irdl_op_definition
class ConstOp(PurePrimitiveOp):
    """A literal array (0-d for scalars).

    ``%c = graph.const #graph.elements<f32: [0.125]> : !graph.tensor<[], f32>``
    """

    name = "graph.const"
    value = prop_def(ElementsAttr)
    result = result_def(TensorType)

    def __init__(self, array: np.ndarray | float | int | bool, dtype: str) -> None:
        arr = as_elements(array, dtype)  # a ValueError for a value the dtype cannot hold
        super().__init__(result_types=[TensorType.get(dtype, arr.shape)],
                         properties=_props(value=ElementsAttr.from_array(arr, dtype)))

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)
        if self.attributes:
            printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ConstOp:
        value = parser.parse_attribute()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        result_type = parser.parse_type()
        return cls.build(result_types=[result_type], properties={"value": value},
                         attributes=attrs)

    def infer(self) -> TensorSpec:
        spec = self.result.type.spec
        dtype, raw = self.value.data
        if dtype != spec.dtype:
            raise ShapeError(f"value dtype {dtype} differs from result dtype {spec.dtype}")
        if any(not d.is_const for d in spec.shape):
            raise ShapeError(f"a constant must have a concrete shape, got {spec}")
        count = int(np.prod([d.const_value for d in spec.shape], dtype=np.int64))
        have = len(raw) // numpy_dtype(dtype).itemsize
        if have != count:
            raise ShapeError(f"{have} values for a result of {count} elements ({spec})")
        return spec

    def to_array(self) -> np.ndarray:
        shape = tuple(d.const_value for d in self.result.type.dims)
        return self.value.to_array().reshape(shape)


@irdl_op_definition
class IotaOp(PurePrimitiveOp):
    """Each element is its index along ``axis``.

    ``%i = graph.iota axis = 0 : !graph.tensor<[seq], i64>``
    """

    name = "graph.iota"
    axis = prop_def(IntAttr)
    result = result_def(TensorType)
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("axis", "int"),)

    def __init__(self, shape: Sequence[ExprLike], axis: int, dtype: str = "i64") -> None:
        super().__init__(result_types=[TensorType.get(dtype, shape)],
                         properties=_props(axis=IntAttr(axis)))

    def infer(self) -> TensorSpec:
        spec = self.result.type.spec
        return shapes.iota(spec.shape, self.axis.data, spec.dtype)


@irdl_op_definition
class DimOp(PurePrimitiveOp):
    """The run-time value of a shape expression, as a 0-d i64.

    ``%p = graph.dim past : !graph.tensor<[], i64>``
    """

    name = "graph.dim"
    expr = prop_def(DimAttr)
    result = result_def(TensorType)
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("expr", "expr"),)

    def __init__(self, expr: ExprLike) -> None:
        super().__init__(result_types=[TensorType.get("i64", [])],
                         properties=_props(expr=DimAttr(Expr.lift(expr))))

    def infer(self) -> TensorSpec:
        return TensorSpec("i64", ())


# --------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------


class BinaryOp(PurePrimitiveOp):
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    ROLES: ClassVar[tuple[str, ...]] = ("lhs", "rhs")
    KIND: ClassVar[str]

    def __init__(self, lhs: SSAValue, rhs: SSAValue) -> None:
        spec = self._infer_from([("lhs", tensor_spec(lhs)), ("rhs", tensor_spec(rhs))])
        super().__init__(operands=[lhs, rhs], result_types=[TensorType.from_spec(spec)])

    @classmethod
    def _infer_from(cls, ops: list[Labeled]) -> TensorSpec:
        return shapes.binary(cls.KIND, ops[0], ops[1])

    def infer(self) -> TensorSpec:
        return self._infer_from(self.labeled_operands())


@irdl_op_definition
class AddOp(BinaryOp):
    """``%z = graph.add %x, %y : !graph.tensor<[seq, 896], f32>`` (ints wrap)."""

    name = "graph.add"
    KIND: ClassVar[str] = "add"


@irdl_op_definition
class SubOp(BinaryOp):
    """``%z = graph.sub %x, %y : !graph.tensor<[seq, 896], f32>``"""

    name = "graph.sub"
    KIND: ClassVar[str] = "sub"


@irdl_op_definition
class MulOp(BinaryOp):
    """``%z = graph.mul %x, %y : !graph.tensor<[seq, 896], f32>``"""

    name = "graph.mul"
    KIND: ClassVar[str] = "mul"


@irdl_op_definition
class DivOp(BinaryOp):
    """Float division. ``%z = graph.div %x, %y : !graph.tensor<[seq, 1], f32>``"""

    name = "graph.div"
    KIND: ClassVar[str] = "div"


@irdl_op_definition
class LessEqualOp(BinaryOp):
    """``%m = graph.less_equal %j, %i : !graph.tensor<[seq], i64> -> ...bool``

    Written ``(T, T) -> !graph.tensor<[seq], bool>``.
    """

    name = "graph.less_equal"
    KIND: ClassVar[str] = "less_equal"

    @classmethod
    def _infer_from(cls, ops: list[Labeled]) -> TensorSpec:
        return shapes.less_equal(ops[0], ops[1])


@irdl_op_definition
class WhereOp(PurePrimitiveOp):
    """``%y = graph.where %c, %a, %b : (!graph.tensor<[4], bool>, T, T) -> T``"""

    name = "graph.where"
    cond = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    ROLES: ClassVar[tuple[str, ...]] = ("condition", "lhs", "rhs")

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue) -> None:
        spec = shapes.where(("condition", tensor_spec(cond)), ("lhs", tensor_spec(lhs)),
                            ("rhs", tensor_spec(rhs)))
        super().__init__(operands=[cond, lhs, rhs], result_types=[TensorType.from_spec(spec)])

    def infer(self) -> TensorSpec:
        return shapes.where(*self.labeled_operands())


class UnaryOp(PurePrimitiveOp):
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    KIND: ClassVar[str]

    def __init__(self, operand: SSAValue) -> None:
        spec = shapes.unary(self.KIND, ("operand", tensor_spec(operand)))
        super().__init__(operands=[operand], result_types=[TensorType.from_spec(spec)])

    def infer(self) -> TensorSpec:
        return shapes.unary(self.KIND, self.labeled_operands()[0])


@irdl_op_definition
class NegOp(UnaryOp):
    """``%y = graph.neg %x : !graph.tensor<[seq, 32], f32>``"""

    name = "graph.neg"
    KIND: ClassVar[str] = "neg"


@irdl_op_definition
class ExpOp(UnaryOp):
    """``%y = graph.exp %x : !graph.tensor<[seq, 4864], f32>``"""

    name = "graph.exp"
    KIND: ClassVar[str] = "exp"


@irdl_op_definition
class SqrtOp(UnaryOp):
    """``%y = graph.sqrt %x : !graph.tensor<[seq, 1], f32>``"""

    name = "graph.sqrt"
    KIND: ClassVar[str] = "sqrt"


@irdl_op_definition
class ReciprocalOp(UnaryOp):
    """``1 / x``: ``%y = graph.reciprocal %x : !graph.tensor<[seq, 1], f32>``"""

    name = "graph.reciprocal"
    KIND: ClassVar[str] = "reciprocal"


@irdl_op_definition
class SinOp(UnaryOp):
    """``%y = graph.sin %x : !graph.tensor<[seq, 64], f32>``"""

    name = "graph.sin"
    KIND: ClassVar[str] = "sin"


@irdl_op_definition
class CosOp(UnaryOp):
    """``%y = graph.cos %x : !graph.tensor<[seq, 64], f32>``"""

    name = "graph.cos"
    KIND: ClassVar[str] = "cos"


@irdl_op_definition
class RoundOp(UnaryOp):
    """To the nearest integer, halves away from zero: C's ``roundf``, exact.

    ``%r = graph.round %x : !graph.tensor<[seq, 28, 32], f32>``

    Not ``floor(|x| + 0.5)`` (at ``0.49999997`` that gives 1). ``-0.4`` gives
    ``-0.0``; NaN and the infinities are kept. A vector lowering: ``t =
    trunc(x)``, then ``t + copysign(1, x)`` where ``|x - t| >= 0.5`` (``x - t``
    is exact), else ``t``. Spec §5 kernel B's activation quantization uses it.
    """

    name = "graph.round"
    KIND: ClassVar[str] = "round"


@irdl_op_definition
class CastOp(PurePrimitiveOp):
    """NumPy ``astype``; to bool means != 0; bf16 only widens to f32.

    ``%y = graph.cast %x : !graph.tensor<[seq], i64> -> !graph.tensor<[seq], f32>``
    """

    name = "graph.cast"
    operand = operand_def(TensorType)
    result = result_def(TensorType)

    def __init__(self, operand: SSAValue, dtype: str) -> None:
        spec = shapes.cast(("operand", tensor_spec(operand)), dtype)
        super().__init__(operands=[operand], result_types=[TensorType.from_spec(spec)])

    def infer(self) -> TensorSpec:
        return shapes.cast(self.labeled_operands()[0], self.result.type.dtype.data)


# --------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------


class ReduceOp(PurePrimitiveOp):
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntAttr)
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("axis", "int"),)
    KIND: ClassVar[str]

    def __init__(self, operand: SSAValue, axis: int) -> None:
        spec = shapes.reduce(self.KIND, ("operand", tensor_spec(operand)), axis)
        rank = len(spec.shape)
        super().__init__(operands=[operand], result_types=[TensorType.from_spec(spec)],
                         properties=_props(axis=IntAttr(axis % rank if rank else axis)))

    def infer(self) -> TensorSpec:
        return shapes.reduce(self.KIND, self.labeled_operands()[0], self.axis.data)


REDUCE_ORDERS: dict[str, str] = {
    "sequential": "one add per element in index order along the axis, from +0.0, each "
                  "rounded to the dtype (spec §5 kernel B's offset: its blocks in order)",
}
"""The named orders a ``graph.reduce_sum`` may state (``order = "..."``). Without
one, an f32 sum is in the compiler's default order (16 partial sums and their
halving tree, ``lowering/builder.py``'s ``MATMUL_LANES``); an integer sum is
exact (it wraps) in any order."""


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    """Sum along ``axis``, kept with size 1, accumulated in the input dtype.

    ``%s = graph.reduce_sum %x axis = 1 : !graph.tensor<[seq, 896], f32> ->
    !graph.tensor<[seq, 1], f32>``

    ``order = "sequential"`` (optional) fixes the order of the sum to one of
    ``REDUCE_ORDERS``: ``graph.reduce_sum %t axis = 1, order = "sequential" : ...``.
    """

    name = "graph.reduce_sum"
    KIND: ClassVar[str] = "reduce_sum"
    order = opt_prop_def(StringAttr)
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("axis", "int"), ("order", "str?"))

    def __init__(self, operand: SSAValue, axis: int, order: str | None = None) -> None:
        super().__init__(operand, axis)
        if order is not None:
            self.properties["order"] = StringAttr(order)

    @property
    def order_name(self) -> str | None:
        """The stated order (a key of ``REDUCE_ORDERS``), or None: the default."""
        return None if self.order is None else self.order.data

    def verify_(self) -> None:
        if self.order is not None and self.order.data not in REDUCE_ORDERS:
            raise VerifyException(f"graph.reduce_sum: unknown order \"{self.order.data}\", "
                                  f"expected one of {', '.join(REDUCE_ORDERS)}")
        super().verify_()


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    """Max along ``axis`` (NaN propagates; identity -inf or the type minimum).

    ``%m = graph.reduce_max %x axis = 2 : ... -> !graph.tensor<[14, seq, 1], f32>``
    """

    name = "graph.reduce_max"
    KIND: ClassVar[str] = "reduce_max"


# --------------------------------------------------------------------------
# Movement
# --------------------------------------------------------------------------


@irdl_op_definition
class ReshapeOp(PurePrimitiveOp):
    """Same elements, new shape (element counts equal as polynomials).

    ``%y = graph.reshape %x : !graph.tensor<[seq, 896], f32> ->
    !graph.tensor<[seq, 14, 64], f32>``
    """

    name = "graph.reshape"
    operand = operand_def(TensorType)
    result = result_def(TensorType)

    def __init__(self, operand: SSAValue, shape: Sequence[ExprLike]) -> None:
        spec = shapes.reshape(("operand", tensor_spec(operand)), shape)
        super().__init__(operands=[operand], result_types=[TensorType.from_spec(spec)])

    def infer(self) -> TensorSpec:
        spec = shapes.reshape(self.labeled_operands()[0], self.result.type.dims)
        return spec


@irdl_op_definition
class PermuteOp(PurePrimitiveOp):
    """Axis permutation: result dim i is operand dim ``perm[i]``.

    ``%t = graph.permute %w perm = [1, 0] : !graph.tensor<[128, 896], f32> ->
    !graph.tensor<[896, 128], f32>``
    """

    name = "graph.permute"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    perm = prop_def(ArrayAttr[IntAttr])
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("perm", "ints"),)

    def __init__(self, operand: SSAValue, perm: Sequence[int]) -> None:
        spec = shapes.permute(("operand", tensor_spec(operand)), perm)
        super().__init__(operands=[operand], result_types=[TensorType.from_spec(spec)],
                         properties=_props(perm=ArrayAttr([IntAttr(p) for p in perm])))

    @property
    def permutation(self) -> tuple[int, ...]:
        return tuple(a.data for a in self.perm.data)

    def infer(self) -> TensorSpec:
        return shapes.permute(self.labeled_operands()[0], self.permutation)


@irdl_op_definition
class BroadcastOp(PurePrimitiveOp):
    """Stretch size-1 dims to the result shape (same rank).

    ``%b = graph.broadcast %x : !graph.tensor<[seq, 1], f32> ->
    !graph.tensor<[seq, 896], f32>``
    """

    name = "graph.broadcast"
    operand = operand_def(TensorType)
    result = result_def(TensorType)

    def __init__(self, operand: SSAValue, shape: Sequence[ExprLike]) -> None:
        spec = shapes.broadcast(("operand", tensor_spec(operand)), shape)
        super().__init__(operands=[operand], result_types=[TensorType.from_spec(spec)])

    def infer(self) -> TensorSpec:
        return shapes.broadcast(self.labeled_operands()[0], self.result.type.dims)


@irdl_op_definition
class SliceOp(PurePrimitiveOp):
    """Unit-step slice ``[start, stop)`` along ``axis``; bounds may be symbolic.

    ``%l = graph.slice %x axis = 0, start = seq - 1, stop = seq :
    !graph.tensor<[seq, 896], f32> -> !graph.tensor<[1, 896], f32>``
    """

    name = "graph.slice"
    operand = operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntAttr)
    start = prop_def(DimAttr)
    stop = prop_def(DimAttr)
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("axis", "int"), ("start", "dim"), ("stop", "dim"))

    def __init__(self, operand: SSAValue, axis: int, start: ExprLike, stop: ExprLike) -> None:
        spec = shapes.slice_(("operand", tensor_spec(operand)), axis, start, stop)
        rank = len(spec.shape)
        super().__init__(
            operands=[operand], result_types=[TensorType.from_spec(spec)],
            properties=_props(axis=IntAttr(axis % rank), start=DimAttr(Expr.lift(start)),
                              stop=DimAttr(Expr.lift(stop))))

    def infer(self) -> TensorSpec:
        return shapes.slice_(self.labeled_operands()[0], self.axis.data, self.start.data,
                             self.stop.data)


@irdl_op_definition
class ConcatOp(PurePrimitiveOp):
    """Join along ``axis``; zero-length operands are allowed (``past = 0``).

    ``%k = graph.concat %old, %new axis = 1 : (!graph.tensor<[2, past, 64], f32>,
    !graph.tensor<[2, seq, 64], f32>) -> !graph.tensor<[2, past + seq, 64], f32>``
    """

    name = "graph.concat"
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    axis = prop_def(IntAttr)
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("axis", "int"),)
    ROLES: ClassVar[tuple[str, ...]] = ()

    def __init__(self, inputs: Sequence[SSAValue], axis: int) -> None:
        labeled = [(f"operand #{i}", tensor_spec(v)) for i, v in enumerate(inputs)]
        spec = shapes.concat(labeled, axis)
        super().__init__(operands=[list(inputs)], result_types=[TensorType.from_spec(spec)],
                         properties=_props(axis=IntAttr(axis % len(spec.shape))))

    def infer(self) -> TensorSpec:
        return shapes.concat(self.labeled_operands(), self.axis.data)


@irdl_op_definition
class UpdateSliceOp(PurePrimitiveOp):
    """``dest`` with the block at ``offsets`` replaced by ``update`` (XLA's
    dynamic-update-slice): the result has ``dest``'s type; offsets may be
    symbolic, and ``0 <= offset`` and ``offset + update dim <= dest dim`` must
    hold on every axis (checked here where decidable, at run time otherwise).
    Functional like every primitive; the KV cache of a step is one
    (``models.qwen2``'s ``kv = "state"``), which the lowering performs in place
    in the program's state buffer when nothing reads the old value after it.

    ``%k1 = graph.update_slice %k0, %new offsets = [0, 0, past, 0] :
    (!graph.tensor<[24, 2, capacity, 64], f32>, !graph.tensor<[1, 2, seq, 64], f32>)
    -> !graph.tensor<[24, 2, capacity, 64], f32>``
    """

    name = "graph.update_slice"
    dest = operand_def(TensorType)
    update = operand_def(TensorType)
    result = result_def(TensorType)
    offsets = prop_def(ArrayAttr[DimAttr])
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("offsets", "dims"),)
    ROLES: ClassVar[tuple[str, ...]] = ("dest", "update")

    def __init__(self, dest: SSAValue, update: SSAValue, offsets: Sequence[ExprLike]) -> None:
        exprs = [Expr.lift(o) for o in offsets]
        spec = shapes.update_slice(("dest", tensor_spec(dest)), ("update", tensor_spec(update)),
                                   exprs)
        super().__init__(operands=[dest, update], result_types=[TensorType.from_spec(spec)],
                         properties=_props(offsets=ArrayAttr([DimAttr(e) for e in exprs])))

    @property
    def offset_exprs(self) -> tuple[Expr, ...]:
        return tuple(d.data for d in self.offsets.data)

    def infer(self) -> TensorSpec:
        dest, update = self.labeled_operands()
        return shapes.update_slice(dest, update, self.offset_exprs)


# --------------------------------------------------------------------------
# Contraction and indexing
# --------------------------------------------------------------------------


MATMUL_ORDERS: dict[str, str] = {
    "blocks32": "spec §5 kernel A's order: four 8-lane FMA chains over each block of 32 "
                "k, leftover groups of 8 into the first, the tree (c0+c1)+(c2+c3), "
                "v[i]+v[i+4], (s0+s1)+(s2+s3), then the last k mod 8 terms multiplied "
                "and added in order",
}
"""The named reduction orders a ``graph.matmul`` may state (``order = "..."``).
Without one, the sum over ``k`` is the compiler's default order (16 FMA
chains and their halving tree, ``lowering/builder.py``'s ``MATMUL_LANES``)."""


@irdl_op_definition
class MatmulOp(PurePrimitiveOp):
    """``[..., M, K] x [..., K, N] -> [..., M, N]``, equal rank >= 2, float.

    ``%y = graph.matmul %x, %wt : (!graph.tensor<[seq, 896], f32>,
    !graph.tensor<[896, 128], f32>) -> !graph.tensor<[seq, 128], f32>``

    ``order = "blocks32"`` (optional) fixes the order of the sum over ``k``
    to one of ``MATMUL_ORDERS``: ``graph.matmul %x, %wt order = "blocks32" : ...``.
    """

    name = "graph.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    order = opt_prop_def(StringAttr)
    ROLES: ClassVar[tuple[str, ...]] = ("lhs", "rhs")
    PROPS: ClassVar[tuple[tuple[str, str], ...]] = (("order", "str?"),)

    def __init__(self, lhs: SSAValue, rhs: SSAValue, order: str | None = None) -> None:
        spec = shapes.matmul(("lhs", tensor_spec(lhs)), ("rhs", tensor_spec(rhs)))
        props = {} if order is None else {"order": StringAttr(order)}
        super().__init__(operands=[lhs, rhs], result_types=[TensorType.from_spec(spec)],
                         properties=props)

    @property
    def order_name(self) -> str | None:
        """The stated reduction order (a key of ``MATMUL_ORDERS``), or None: the default."""
        return None if self.order is None else self.order.data

    def infer(self) -> TensorSpec:
        return shapes.matmul(*self.labeled_operands())

    def verify_(self) -> None:
        if self.order is not None and self.order.data not in MATMUL_ORDERS:
            raise VerifyException(f"graph.matmul: unknown order \"{self.order.data}\", "
                                  f"expected one of {', '.join(MATMUL_ORDERS)}")
        super().verify_()


@irdl_op_definition
class MatmulI8Op(PurePrimitiveOp):
    """Spec §5 kernel B's integer core: int8 activations in blocks of 32 columns,
    each block of each row with its f32 scale, against int8 weights.

    ``%t = graph.matmul_i8 %xq, %xs, %wt : (!graph.tensor<[seq, 896], i8>,
    !graph.tensor<[seq, 28], f32>, !graph.tensor<[896, 128], i8>) ->
    !graph.tensor<[seq, 128], f32>``

    ``lhs`` (``xq``) i8 ``[M, K]``; ``lhs_scale`` (``xs``) f32 ``[M, ceil(K / 32)]``,
    ``xs[m, b]`` the scale of row ``m``'s columns ``32b .. 32b + 31`` (the last
    block holds the ``K mod 32`` leftover columns, if any); ``rhs`` (``w``) i8
    ``[K, N]``, a projection's ``[N, K]`` weight through ``permute [1, 0]`` as for
    ``graph.matmul``. ``K`` is a constant. Element ``[m, n]`` is ``total``, the sum
    over ``k`` in kernel B's order, the only one of this op:

    * per whole block ``b`` (``o = 32b``) and lane ``l < 8``, the exact integer
      ``p = sum_{j<4} (w[o+4l+j, n] + 128) * xq[m, o+4l+j]`` (``w + 128`` is
      ``w XOR 0x80`` read as u8: one ``vpdpbusd`` from zero; ``|p| <= 129,540``,
      so ``f32(p)`` is exact);
    * accumulators ``a0..a3`` of 8 f32 lanes from +0.0; the whole blocks four at a
      time, block ``b`` into ``a_(b mod 4)``, the whole blocks after the last group
      of four into ``a0``: ``a[l] = fma(f32(p), xs[m, b], a[l])``;
    * ``v = (a0 + a1) + (a2 + a3)`` lane-wise, ``s_i = v[i] + v[i + 4]``,
      ``total = (s0 + s1) + (s2 + s3)``;
    * the last ``K mod 32`` columns, block ``B``: ``total = total +
      f32(sum (w + 128) * xq) * xs[m, B]`` (multiply, then add).

    So ``total`` is ``sum_k (w[k, n] + 128) * xq[m, k] * xs[m, block(k)]`` up to f32
    rounding: kernel B subtracts ``128 * sum_b f32(sum xq_b) * xs_b`` (its offset,
    graph primitives) afterwards. Any instruction sequence computing the same
    integers ``p`` gives the same bits (AVX2's ``vpmaddubsw`` + ``vpmaddwd``,
    AVX-VNNI, AVX512-VNNI).
    """

    name = "graph.matmul_i8"
    lhs = operand_def(TensorType)
    lhs_scale = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    ROLES: ClassVar[tuple[str, ...]] = ("lhs", "lhs_scale", "rhs")
    BLOCK: ClassVar[int] = shapes.I8_BLOCK

    def __init__(self, lhs: SSAValue, lhs_scale: SSAValue, rhs: SSAValue) -> None:
        spec = shapes.matmul_i8(("lhs", tensor_spec(lhs)), ("lhs_scale", tensor_spec(lhs_scale)),
                                ("rhs", tensor_spec(rhs)))
        super().__init__(operands=[lhs, lhs_scale, rhs],
                         result_types=[TensorType.from_spec(spec)])

    def infer(self) -> TensorSpec:
        return shapes.matmul_i8(*self.labeled_operands())


@irdl_op_definition
class GatherOp(PurePrimitiveOp):
    """Rows of ``table`` picked by integer ``ids``; result ``ids.shape + table.shape[1:]``.

    ``%h = graph.gather %embed, %ids : (!graph.tensor<[151936, 896], f32>,
    !graph.tensor<[seq], i64>) -> !graph.tensor<[seq, 896], f32>``
    """

    name = "graph.gather"
    table = operand_def(TensorType)
    ids = operand_def(TensorType)
    result = result_def(TensorType)
    ROLES: ClassVar[tuple[str, ...]] = ("table", "ids")

    def __init__(self, table: SSAValue, ids: SSAValue) -> None:
        spec = shapes.gather(("table", tensor_spec(table)), ("ids", tensor_spec(ids)))
        super().__init__(operands=[table, ids], result_types=[TensorType.from_spec(spec)])

    def infer(self) -> TensorSpec:
        return shapes.gather(*self.labeled_operands())



"""The Graph dialect: Qwen2 as a graph of tensor primitives (spec §2).

Values are tensors of type ``!graph.tensor<[past + seq, 2, 64], f32>``: a
shape whose entries are integers or integer polynomials over named symbols,
and one of the dtypes ``f32 i64 i32 i8 bool bf16``. A graph is a
``graph.func`` whose ``graph.input`` ops bind the symbols, whose
``graph.weight`` ops name run-time constants, and whose ``graph.return``
names the outputs:

    graph.func @axpy {
      %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
      %w = graph.weight "w" : !graph.tensor<[896], f32>
      %wb = graph.reshape %w : !graph.tensor<[896], f32> -> !graph.tensor<[1, 896], f32>
      %b = graph.broadcast %wb : !graph.tensor<[1, 896], f32> -> !graph.tensor<[seq, 896], f32>
      %y = graph.mul %x, %b : !graph.tensor<[seq, 896], f32>
      graph.return "y" = %y : !graph.tensor<[seq, 896], f32>
    }

Every primitive infers its result type with ``nanocompile.shapes`` and its
verifier rejects a mismatch with a message naming the values involved. There
is no implicit broadcasting.

Primitive syntax (one custom form shared by all primitives):
``graph.<op> operands [positional] [key = value, ...] [attr-dict] : types``
where ``types`` is ``T`` when every operand has the result's type, ``T -> R``
when every operand has type ``T``, else ``(T0, T1, ...) -> R``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr
from xdsl.ir import Attribute, Block, Data, Dialect, Region, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParametrizedAttribute,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from nanocompile import shapes
from nanocompile.dialects.syntax import (
    parse_dim_expr,
    parse_scalar,
    values_from_list,
    values_text,
)
from nanocompile.dtypes import DTYPES, numpy_dtype
from nanocompile.shapes import Labeled, ShapeError, TensorSpec
from nanocompile.symbolic import Expr, ExprLike

# --------------------------------------------------------------------------
# Attributes and types
# --------------------------------------------------------------------------


@irdl_attr_definition
class DimAttr(Data[Expr]):
    """One shape entry: ``#graph.dim<past + seq>``."""

    name = "graph.dim"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> Expr:
        with parser.in_angle_brackets():
            return parse_dim_expr(parser)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(str(self.data))


@irdl_attr_definition
class ElementsAttr(Data[tuple[str, bytes]]):
    """The flat values of a constant: ``#graph.elements<f32: [0.125, -inf]>``.

    Stored as the dtype and the little-endian bytes, so every f32 (inf, -0.0,
    subnormals) is exact; floats print as the shortest decimal that reads back
    to the same f32.
    """

    name = "graph.elements"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> tuple[str, bytes]:
        with parser.in_angle_brackets():
            dtype = parser.parse_identifier()
            if dtype not in DTYPES or dtype == "bf16":
                parser.raise_error(f"expected a constant dtype, got '{dtype}'")
            parser.parse_punctuation(":")
            values = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: parse_scalar(parser)
            )
            return dtype, values_from_list(dtype, values)

    def print_parameter(self, printer: Printer) -> None:
        dtype, raw = self.data
        with printer.in_angle_brackets():
            printer.print_string(f"{dtype}: {values_text(dtype, raw)}")

    @staticmethod
    def from_array(array: np.ndarray, dtype: str) -> ElementsAttr:
        flat = np.ascontiguousarray(array, dtype=numpy_dtype(dtype)).reshape(-1)
        return ElementsAttr((dtype, flat.tobytes()))

    def to_array(self) -> np.ndarray:
        dtype, raw = self.data
        return np.frombuffer(raw, dtype=numpy_dtype(dtype)).copy()


@irdl_attr_definition
class TensorType(ParametrizedAttribute, TypeAttribute):
    """``!graph.tensor<[seq, 896], f32>``: a symbolic shape and a dtype."""

    name = "graph.tensor"
    shape: ArrayAttr[DimAttr]
    dtype: StringAttr

    @staticmethod
    def get(dtype: str, shape: Sequence[ExprLike]) -> TensorType:
        dims = ArrayAttr([DimAttr(Expr.lift(d)) for d in shape])
        return TensorType(dims, StringAttr(dtype))

    @staticmethod
    def from_spec(spec: TensorSpec) -> TensorType:
        return TensorType.get(spec.dtype, spec.shape)

    @property
    def dims(self) -> tuple[Expr, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self.dtype.data, self.dims)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            dims = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: DimAttr(parse_dim_expr(parser))
            )
            parser.parse_punctuation(",")
            pos = parser.pos
            dtype = parser.parse_identifier()
            if dtype not in DTYPES:
                parser.raise_error(
                    f"unknown dtype '{dtype}', expected one of {', '.join(DTYPES)}", pos, parser.pos
                )
        return [ArrayAttr(dims), StringAttr(dtype)]

    def print_parameters(self, printer: Printer) -> None:
        dims = ", ".join(str(d) for d in self.dims)
        printer.print_string(f"<[{dims}], {self.dtype.data}>")

    def verify(self) -> None:
        if self.dtype.data not in DTYPES:
            raise VerifyException(f"unknown dtype '{self.dtype.data}'")


def tensor_spec(value: SSAValue) -> TensorSpec:
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"expected a !graph.tensor value, got {value.type}")
    return value.type.spec


def _label(role: str, value: SSAValue) -> str:
    return f"{role} %{value.name_hint}" if value.name_hint else role


# --------------------------------------------------------------------------
# The shared custom syntax of the primitives
# --------------------------------------------------------------------------

# Property kinds: "int", "ints", "dim" are printed as `key = value`;
# "name" (a string) and "expr" (a shape expression) are printed positionally.
_POSITIONAL = ("name", "expr")


def _print_prop(printer: Printer, kind: str, attr: Attribute) -> None:
    if kind == "name":
        assert isinstance(attr, StringAttr)
        printer.print_string_literal(attr.data)
    elif kind == "int":
        assert isinstance(attr, IntAttr)
        printer.print_string(str(attr.data))
    elif kind == "ints":
        assert isinstance(attr, ArrayAttr)
        printer.print_string("[" + ", ".join(str(a.data) for a in attr.data) + "]")
    else:  # "dim" and "expr"
        assert isinstance(attr, DimAttr)
        printer.print_string(str(attr.data))


def _parse_prop(parser: Parser, kind: str) -> Attribute:
    if kind == "name":
        return StringAttr(parser.parse_str_literal())
    if kind == "int":
        return IntAttr(parser.parse_integer(allow_boolean=False))
    if kind == "ints":
        values = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, lambda: parser.parse_integer(allow_boolean=False)
        )
        return ArrayAttr([IntAttr(v) for v in values])
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
        """The result type implied by the operands and properties."""
        raise NotImplementedError

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
        for i, (name, kind) in enumerate(keyword):
            if i:
                parser.parse_punctuation(",")
            parser.parse_keyword(name)
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
        types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
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
        arr = np.asarray(array, dtype=numpy_dtype(dtype))
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


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    """Sum along ``axis``, kept with size 1, accumulated in the input dtype.

    ``%s = graph.reduce_sum %x axis = 1 : !graph.tensor<[seq, 896], f32> ->
    !graph.tensor<[seq, 1], f32>``
    """

    name = "graph.reduce_sum"
    KIND: ClassVar[str] = "reduce_sum"


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


# --------------------------------------------------------------------------
# Contraction and indexing
# --------------------------------------------------------------------------


@irdl_op_definition
class MatmulOp(PurePrimitiveOp):
    """``[..., M, K] x [..., K, N] -> [..., M, N]``, equal rank >= 2, float.

    ``%y = graph.matmul %x, %wt : (!graph.tensor<[seq, 896], f32>,
    !graph.tensor<[896, 128], f32>) -> !graph.tensor<[seq, 128], f32>``
    """

    name = "graph.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    ROLES: ClassVar[tuple[str, ...]] = ("lhs", "rhs")

    def __init__(self, lhs: SSAValue, rhs: SSAValue) -> None:
        spec = shapes.matmul(("lhs", tensor_spec(lhs)), ("rhs", tensor_spec(rhs)))
        super().__init__(operands=[lhs, rhs], result_types=[TensorType.from_spec(spec)])

    def infer(self) -> TensorSpec:
        return shapes.matmul(*self.labeled_operands())


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


# --------------------------------------------------------------------------
# The graph container
# --------------------------------------------------------------------------


FUSED_KINDS = ("elementwise", "row", "matmul")


@irdl_op_definition
class FusedYieldOp(IRDLOperation):
    """The value a ``graph.fused`` region computes: ``graph.yield %y : T``."""

    name = "graph.yield"
    value = operand_def(TensorType)
    traits = traits_def(IsTerminator())
    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue) -> None:
        super().__init__(operands=[value])


@irdl_op_definition
class FusedOp(IRDLOperation):
    """One future kernel: a region of primitives computing one stored value.

    The region's arguments are the values it reads from memory (computed by
    other kernels, or inputs, weights, constants); everything else in it is
    computed in registers. ``kind`` is ``elementwise``, ``row`` (row
    reductions, e.g. rms_norm, softmax) or ``matmul`` (one or more matmuls
    sharing a k loop, with an elementwise epilogue).

        %y = graph.fused "matmul" (%x, %w, %b) : (T0, T1, T2) -> T {
        ^bb0(%a: T0, %wt: T1, %bias: T2):
          ...
          graph.yield %r : T
        }
    """

    name = "graph.fused"
    kind = prop_def(StringAttr)
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(Pure())

    def __init__(self, kind: str, inputs: Sequence[SSAValue], body: Block) -> None:
        last = body.last_op
        assert isinstance(last, FusedYieldOp)
        super().__init__(operands=[list(inputs)], result_types=[last.value.type],
                         properties={"kind": StringAttr(kind)}, regions=[Region(body)])

    @property
    def block(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        if self.kind.data not in FUSED_KINDS:
            raise VerifyException(f"graph.fused: unknown kind '{self.kind.data}', expected "
                                  f"one of {', '.join(FUSED_KINDS)}")
        args = self.block.args
        if [a.type for a in args] != [v.type for v in self.inputs]:
            raise VerifyException("graph.fused: region argument types differ from its inputs")
        last = self.block.last_op
        if not isinstance(last, FusedYieldOp) or last.value.type != self.result.type:
            raise VerifyException("graph.fused: region must end with graph.yield of the "
                                  "result type")
        for op in self.block.ops:
            if isinstance(op, InputOp | WeightOp | FusedOp):
                raise VerifyException(f"graph.fused: {op.name} is not allowed in a region")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.kind.data)
        printer.print_string(" (")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(") : (")
        printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> FusedOp:
        kind = parser.parse_str_literal()
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN,
                                                     parser.parse_unresolved_operand)
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        parser.parse_type()
        if len(types) != len(operands):
            parser.raise_error(f"expected {len(operands)} input types, got {len(types)}")
        inputs = [parser.resolve_operand(u, t) for u, t in zip(operands, types, strict=True)]
        region = parser.parse_region()
        return cls(kind, inputs, region.detach_block(0))


@irdl_op_definition
class GraphFuncOp(IRDLOperation):
    """A graph: named inputs (which bind the shape symbols), named weights, and
    named outputs returned by its ``graph.return``.

    ``graph.func @qwen2 { %ids = graph.input "token_ids" : ... graph.return ... }``
    """

    name = "graph.func"
    sym_name = prop_def(StringAttr)
    body = region_def("single_block")

    def __init__(self, name: str, body: Block | Region) -> None:
        region = body if isinstance(body, Region) else Region(body)
        super().__init__(properties={"sym_name": StringAttr(name)}, regions=[region])

    @property
    def block(self) -> Block:
        return self.body.block

    def inputs(self) -> list[InputOp]:
        return [op for op in self.block.ops if isinstance(op, InputOp)]

    def weights(self) -> list[WeightOp]:
        return [op for op in self.block.ops if isinstance(op, WeightOp)]

    def return_op(self) -> ReturnOp:
        last = self.block.last_op
        if not isinstance(last, ReturnOp):
            raise VerifyException(f"graph.func @{self.sym_name.data} must end with graph.return")
        return last

    def bound_symbols(self) -> set[str]:
        """Symbols bound by the inputs: an input dim that is exactly one symbol."""
        return {s for op in self.inputs() for d in op.result.type.dims
                if (s := d.single_symbol) is not None}

    def verify_(self) -> None:
        self.return_op()
        for kind, ops in (("input", self.inputs()), ("weight", self.weights())):
            names = [op.properties["name"].data for op in ops]  # type: ignore[union-attr]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise VerifyException(
                    f"graph.func @{self.sym_name.data}: {kind} names {dupes} are not unique"
                )
        bound = self.bound_symbols()
        for op in self.block.ops:
            _check_bound(op, bound)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> GraphFuncOp:
        name = parser.parse_symbol_name().data
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region()
        op = cls(name, region)
        if attrs is not None:
            op.attributes |= attrs.data
        return op


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """The named outputs of a graph.

    ``graph.return "logits" = %l, "keys" = %k : !graph.tensor<...>, !graph.tensor<...>``
    """

    name = "graph.return"
    outputs = var_operand_def(TensorType)
    output_names = prop_def(ArrayAttr[StringAttr], prop_name="names")
    traits = traits_def(IsTerminator(), HasParent(GraphFuncOp))

    def __init__(self, outputs: Sequence[tuple[str, SSAValue]]) -> None:
        super().__init__(
            operands=[[v for _, v in outputs]],
            properties={"names": ArrayAttr([StringAttr(n) for n, _ in outputs])},
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.data for s in self.output_names.data)

    def verify_(self) -> None:
        if len(self.names) != len(self.outputs):
            raise VerifyException(
                f"graph.return: {len(self.names)} names for {len(self.outputs)} outputs"
            )
        dupes = sorted({n for n in self.names if self.names.count(n) > 1})
        if dupes:
            raise VerifyException(f"graph.return: output names {dupes} are not unique")

    def print(self, printer: Printer) -> None:
        if not self.outputs:
            return
        printer.print_string(" ")
        pairs = list(zip(self.names, self.outputs, strict=True))
        printer.print_list(pairs, lambda p: (printer.print_string_literal(p[0]),
                                             printer.print_string(" = "),
                                             printer.print_operand(p[1])))
        printer.print_string(" : ")
        printer.print_list([v.type for v in self.outputs], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> ReturnOp:
        def pair() -> tuple[str, object]:
            name = parser.parse_str_literal()
            parser.parse_punctuation("=")
            return name, parser.parse_unresolved_operand()

        pairs: list[tuple[str, object]] = []
        if (first := parser.parse_optional_str_literal()) is not None:
            parser.parse_punctuation("=")
            pairs.append((first, parser.parse_unresolved_operand()))
            while parser.parse_optional_punctuation(",") is not None:
                pairs.append(pair())
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            if len(types) != len(pairs):
                parser.raise_error(f"expected {len(pairs)} output types, got {len(types)}")
        else:
            types = []
        values = [parser.resolve_operand(u, t)  # type: ignore[arg-type]
                  for (_, u), t in zip(pairs, types, strict=True)]
        return cls(list(zip([n for n, _ in pairs], values, strict=True)))


def _mentioned_symbols(op: IRDLOperation) -> set[str]:
    syms: set[str] = set()
    for r in op.results:
        if isinstance(r.type, TensorType):
            for d in r.type.dims:
                syms |= d.symbols
    for attr in op.properties.values():
        if isinstance(attr, DimAttr):
            syms |= attr.data.symbols
    return syms


def _check_bound(op: IRDLOperation, bound: set[str]) -> None:
    unbound = sorted(_mentioned_symbols(op) - bound)
    if not unbound:
        return
    what = ", ".join(f"'{s}'" for s in unbound)
    value = op.results[0] if op.results else None
    where = f"%{value.name_hint}" if value is not None and value.name_hint else "its result"
    error = VerifyException(
        f"{op.name}: symbol {what} in {where} is not bound by any graph.input "
        f"(bound: {sorted(bound) or 'none'})"
    )
    error.op = op  # type: ignore[attr-defined]  # lets nc-opt locate the culprit
    raise error


Graph = Dialect(
    "graph",
    [
        GraphFuncOp, ReturnOp,
        InputOp, WeightOp, ConstOp, IotaOp, DimOp,
        AddOp, SubOp, MulOp, DivOp, LessEqualOp, WhereOp,
        NegOp, ExpOp, SqrtOp, ReciprocalOp, SinOp, CosOp, CastOp,
        ReduceSumOp, ReduceMaxOp,
        ReshapeOp, PermuteOp, BroadcastOp, SliceOp, ConcatOp,
        MatmulOp, GatherOp,
        FusedOp, FusedYieldOp,
    ],
    [DimAttr, ElementsAttr, TensorType],
)

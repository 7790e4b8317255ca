"""Types and attributes of the Graph dialect: ``DimAttr`` (a shape entry, an
integer polynomial), ``ElementsAttr`` (a constant's values) and
``!graph.tensor<[dims], dtype>``. The dialect itself is ``dialects/graph.py``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Attribute, Data, SSAValue, TypeAttribute
from xdsl.irdl import (
    ParametrizedAttribute,
    irdl_attr_definition,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects.syntax import (
    parse_dim_expr,
    parse_scalar,
    values_from_list,
    values_text,
)
from nanocompile.dtypes import DTYPES, numpy_dtype
from nanocompile.shapes import TensorSpec
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



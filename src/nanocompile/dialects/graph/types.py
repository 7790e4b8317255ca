"""Types of the Graph dialect: ``!graph.tensor<[dims], dtype>``. The shared
attributes (``DimAttr``, ``ElementsAttr``) live in ``dialects/common`` and are
re-exported here; the dialect itself is ``dialects/graph/__init__.py``."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Attribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    ParametrizedAttribute,
    irdl_attr_definition,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects.common.attributes import DimAttr, ElementsAttr
from nanocompile.dialects.common.syntax import (
    parse_shape_dim,
    shape_dim_error,
)
from nanocompile.ir.dtypes import DTYPES
from nanocompile.ir.shapes import TensorSpec
from nanocompile.ir.symbolic import Expr, ExprLike

__all__ = ["DimAttr", "ElementsAttr", "TensorType", "tensor_spec", "tensor_type"]

# --------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------


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
                parser.Delimiter.SQUARE, lambda: DimAttr(parse_shape_dim(parser))
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
        for d in self.dims:
            if (problem := shape_dim_error(d)) is not None:
                raise VerifyException(problem)


def tensor_type(value: SSAValue) -> TensorType:
    """The ``!graph.tensor`` type of ``value`` (xDSL types an operand's type as
    any ``Attribute``, whatever its constraint)."""
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"expected a !graph.tensor value, got {value.type}")
    return value.type


def tensor_spec(value: SSAValue) -> TensorSpec:
    return tensor_type(value).spec


def _label(role: str, value: SSAValue) -> str:
    return f"{role} %{value.name_hint}" if value.name_hint else role



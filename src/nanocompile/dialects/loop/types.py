"""Types and attributes of the Loop dialect: ``!loop.ptr``, ``!loop.buf``,
``!loop.view``, ``#loop.layout``, ``#loop.fp`` and the dtype <-> scalar type
maps. The dialect itself is ``dialects/loop/__init__.py``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from xdsl.dialects.builtin import (
    ArrayAttr,
    StringAttr,
)
from xdsl.ir import Attribute, TypeAttribute
from xdsl.irdl import (
    ParametrizedAttribute,
    irdl_attr_definition,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects.common.attributes import DimAttr
from nanocompile.dialects.common.syntax import parse_dim_expr
from nanocompile.ir.dtypes import DTYPES
from nanocompile.ir.symbolic import Expr, ExprLike

# --------------------------------------------------------------------------
# Types and attributes
# --------------------------------------------------------------------------


def _dims_attr(dims: Sequence[ExprLike]) -> ArrayAttr[DimAttr]:
    return ArrayAttr([DimAttr(Expr.lift(d)) for d in dims])


def _dims_text(dims: Sequence[Expr]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _parse_dims(parser: AttrParser) -> list[Expr]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                             lambda: parse_dim_expr(parser))


def _parse_dtype(parser: AttrParser) -> str:
    pos = parser.pos
    dtype = parser.parse_identifier()
    if dtype not in DTYPES:
        parser.raise_error(f"unknown dtype '{dtype}'", pos, parser.pos)
    return dtype


@irdl_attr_definition
class PtrType(ParametrizedAttribute, TypeAttribute):
    """A kernel argument: a base pointer to elements of one dtype, ``!loop.ptr<f32>``."""

    name = "loop.ptr"
    dtype: StringAttr

    @staticmethod
    def get(dtype: str) -> PtrType:
        return PtrType(StringAttr(dtype))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            return [StringAttr(_parse_dtype(parser))]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.dtype.data}>")


class _ShapedType(ParametrizedAttribute, TypeAttribute):
    shape: ArrayAttr[DimAttr]
    dtype: StringAttr

    @classmethod
    def get(cls, dtype: str, shape: Sequence[ExprLike]) -> Self:
        return cls(_dims_attr(shape), StringAttr(dtype))

    @property
    def dims(self) -> tuple[Expr, ...]:
        return tuple(d.data for d in self.shape.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            dims = _parse_dims(parser)
            parser.parse_punctuation(",")
            dtype = _parse_dtype(parser)
        return [_dims_attr(dims), StringAttr(dtype)]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{_dims_text(self.dims)}, {self.dtype.data}>")


@irdl_attr_definition
class BufType(_ShapedType):
    """A contiguous buffer of the program, ``!loop.buf<[seq, 896], f32>``."""

    name = "loop.buf"


@irdl_attr_definition
class ViewType(_ShapedType):
    """A strided view of a buffer, ``!loop.view<[14, seq, 64], f32>``."""

    name = "loop.view"


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """Offset and strides, in elements: ``#loop.layout<0, [896, 1]>``."""

    name = "loop.layout"
    offset: DimAttr
    strides: ArrayAttr[DimAttr]

    @staticmethod
    def get(offset: ExprLike, strides: Sequence[ExprLike]) -> LayoutAttr:
        return LayoutAttr(DimAttr(Expr.lift(offset)), _dims_attr(strides))

    @property
    def offset_expr(self) -> Expr:
        return self.offset.data

    @property
    def stride_exprs(self) -> tuple[Expr, ...]:
        return tuple(d.data for d in self.strides.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            offset = parse_dim_expr(parser)
            parser.parse_punctuation(",")
            strides = _parse_dims(parser)
        return [DimAttr(offset), _dims_attr(strides)]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.offset_expr}, {_dims_text(self.stride_exprs)}>")


@irdl_attr_definition
class FootprintAttr(ParametrizedAttribute):
    """What a kernel argument touches: a shape and strides, ``#loop.fp<[seq, 896], [896, 1]>``.

    Distinct elements = product of the dims whose stride is not 0.
    """

    name = "loop.fp"
    shape: ArrayAttr[DimAttr]
    strides: ArrayAttr[DimAttr]

    @staticmethod
    def get(shape: Sequence[ExprLike], strides: Sequence[ExprLike]) -> FootprintAttr:
        return FootprintAttr(_dims_attr(shape), _dims_attr(strides))

    @property
    def dims(self) -> tuple[Expr, ...]:
        return tuple(d.data for d in self.shape.data)

    @property
    def stride_exprs(self) -> tuple[Expr, ...]:
        return tuple(d.data for d in self.strides.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> list[Attribute]:
        with parser.in_angle_brackets():
            shape = _parse_dims(parser)
            parser.parse_punctuation(",")
            strides = _parse_dims(parser)
        return [_dims_attr(shape), _dims_attr(strides)]

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{_dims_text(self.dims)}, {_dims_text(self.stride_exprs)}>")



# --------------------------------------------------------------------------
# dtype <-> scalar type
# --------------------------------------------------------------------------


def scalar_type(dtype: str) -> Attribute:
    """The scalar SSA type of one element of ``dtype`` (bool is i1)."""
    from xdsl.dialects.builtin import bf16, f32, i1, i8, i32, i64

    return {"f32": f32, "i64": i64, "i32": i32, "i8": i8, "bool": i1, "bf16": bf16}[dtype]


def dtype_of_scalar(t: Attribute) -> str:
    from xdsl.dialects.builtin import bf16, f32, i1, i8, i32, i64

    for name, ty in (("f32", f32), ("i64", i64), ("i32", i32), ("i8", i8), ("bool", i1),
                     ("bf16", bf16)):
        if t == ty:
            return name
    raise VerifyException(f"{t} is not an element type of a buffer")

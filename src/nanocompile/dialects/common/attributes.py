"""Attributes shared by the Graph and Loop dialects: ``DimAttr`` (a shape
entry, an integer polynomial over size symbols) and ``ElementsAttr`` (a
constant's values, exact bytes).

Both dialects stand on these; neither imports the other. Their textual names
keep the ``graph.`` prefix they were born with (``#graph.dim<...>``,
``#graph.elements<...>``), so every printed module reads as before; the Graph
dialect registers them, and a context that parses Loop IR loads both dialects
(``get_all_dialects``).
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Data
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects.common.syntax import (
    as_elements,
    int64_coefficients_error,
    parse_dim_expr,
    parse_scalar,
    values_from_list,
    values_text,
)
from nanocompile.ir.dtypes import DTYPES, numpy_dtype
from nanocompile.ir.symbolic import Expr


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

    def verify(self) -> None:
        if (problem := int64_coefficients_error(self.data)) is not None:
            raise VerifyException(problem)  # the C computes shapes in int64


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
            start = parser.pos
            values = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, lambda: parse_scalar(parser)
            )
            try:
                return dtype, values_from_list(dtype, values)
            except ValueError as e:  # a value the dtype cannot hold
                parser.raise_error(str(e), start, parser.pos)

    def print_parameter(self, printer: Printer) -> None:
        dtype, raw = self.data
        with printer.in_angle_brackets():
            printer.print_string(f"{dtype}: {values_text(dtype, raw)}")

    @staticmethod
    def from_array(array: np.ndarray, dtype: str) -> ElementsAttr:
        """The values of ``array`` as ``dtype``; a ValueError if one does not fit."""
        flat = np.ascontiguousarray(as_elements(array, dtype)).reshape(-1)
        return ElementsAttr((dtype, flat.tobytes()))

    def to_array(self) -> np.ndarray:
        dtype, raw = self.data
        return np.frombuffer(raw, dtype=numpy_dtype(dtype)).copy()

"""Textual syntax shared by nanocompile's dialects.

Shape expressions (``past + seq``, ``14*seq``, ``seq - 1``) parsed with xDSL's
lexer, and scalar literals that print floats exactly (the shortest decimal
that reads back to the same f32; ``inf``, ``-inf`` and ``nan`` as keywords).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.parser import AttrParser

from nanocompile.ir.dtypes import numpy_dtype
from nanocompile.ir.symbolic import Expr, ExprSyntaxError


def parse_dim_expr(parser: AttrParser) -> Expr:
    """``expr := term (('+' | '-') term)*``, ``term := factor ('*' factor)*``."""
    e = _parse_dim_term(parser)
    while True:
        if parser.parse_optional_punctuation("+") is not None:
            e = e + _parse_dim_term(parser)
        elif parser.parse_optional_punctuation("-") is not None:
            e = e - _parse_dim_term(parser)
        else:
            return e


def _parse_dim_term(parser: AttrParser) -> Expr:
    e = _parse_dim_factor(parser)
    while parser.parse_optional_punctuation("*") is not None:
        e = e * _parse_dim_factor(parser)
    return e


def _parse_dim_factor(parser: AttrParser) -> Expr:
    if parser.parse_optional_punctuation("-") is not None:
        return -_parse_dim_factor(parser)
    if parser.parse_optional_punctuation("(") is not None:
        e = parse_dim_expr(parser)
        parser.parse_punctuation(")")
        return e
    k = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
    if k is not None:
        return Expr.const(k)
    pos = parser.pos
    name = parser.parse_optional_identifier()
    if name is None:
        parser.raise_error("expected a shape expression (integer, symbol or '(')")
    try:
        return Expr.sym(name)
    except ExprSyntaxError as e:
        parser.raise_error(str(e), pos, parser.pos)


def format_scalar(value: object, dtype: str) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    if dtype != "f32":
        return str(int(value))  # type: ignore[call-overload]
    f = float(value)  # type: ignore[arg-type]
    if np.isnan(f):
        return "nan"
    if np.isinf(f):
        return "inf" if f > 0 else "-inf"
    text = repr(f)
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + ("e" + exponent if exponent else "")


def parse_scalar(parser: AttrParser) -> float | int | bool:
    if (b := parser.parse_optional_boolean()) is not None:
        return b
    negative = parser.parse_optional_punctuation("-") is not None
    if parser.parse_optional_keyword("inf") is not None:
        return -np.inf if negative else np.inf
    if parser.parse_optional_keyword("nan") is not None:
        return np.nan
    value = parser.parse_optional_number()
    if value is None:
        parser.raise_error("expected a number, 'inf', 'nan', 'true' or 'false'")
    return -value if negative else value


def values_text(dtype: str, raw: bytes) -> str:
    arr = np.frombuffer(raw, dtype=numpy_dtype(dtype))
    return "[" + ", ".join(format_scalar(v, dtype) for v in arr) + "]"


def values_from_list(dtype: str, values: Sequence[float | int | bool]) -> bytes:
    if dtype == "bf16":
        raise ValueError("constants cannot be bf16 (a storage type)")
    return np.asarray(values, dtype=numpy_dtype(dtype)).tobytes()

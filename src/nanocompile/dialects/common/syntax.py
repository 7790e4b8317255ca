"""Textual syntax shared by nanocompile's dialects.

Shape expressions (``past + seq``, ``14*seq``, ``seq - 1``) parsed with xDSL's
lexer, and scalar literals that print floats exactly (the shortest decimal
that reads back to the same f32; ``inf``, ``-inf`` and ``nan`` as keywords).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.parser import AttrParser

from nanocompile.ir.dtypes import INT_DTYPES, numpy_dtype
from nanocompile.ir.symbolic import Expr, ExprSyntaxError

INT64_BOUND = 2**63  # a shape coefficient, and a constant's i64 value, stays below it


def int64_coefficients_error(expr: Expr) -> str | None:
    """Why ``expr`` cannot be a shape entry in the generated C (int64 arithmetic),
    or None: every coefficient must be below 2**63 in magnitude."""
    for _, c in expr.terms:
        if not -INT64_BOUND < c < INT64_BOUND:
            return f"expected shape coefficients below 2**63 in magnitude, got {c}"
    return None


def shape_dim_error(dim: Expr) -> str | None:
    """Why ``dim`` cannot be a tensor's dimension, or None: it must be able to
    be non-negative (``seq - 1`` can; ``-1`` cannot)."""
    if dim.provably_negative():
        return f"expected dims that can be non-negative, got {dim}"
    return None


def parse_shape_dim(parser: AttrParser) -> Expr:
    """One dimension of a tensor type, checked where it is written."""
    start = parser.pos
    dim = parse_dim_expr(parser)
    if (problem := shape_dim_error(dim)) is not None:
        parser.raise_error(problem, start, parser.pos)
    return dim


def parse_dim_expr(parser: AttrParser) -> Expr:
    """``expr := term (('+' | '-') term)*``, ``term := factor ('*' factor)*``."""
    start = parser.pos
    e = _parse_dim_term(parser)
    while True:
        if parser.parse_optional_punctuation("+") is not None:
            e = e + _parse_dim_term(parser)
        elif parser.parse_optional_punctuation("-") is not None:
            e = e - _parse_dim_term(parser)
        else:
            break
    if (problem := int64_coefficients_error(e)) is not None:
        parser.raise_error(problem, start, parser.pos)
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


def format_scalar(value: float | np.integer[Any] | np.floating[Any] | np.bool_,
                  dtype: str) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    if dtype != "f32":
        return str(int(value))
    f = float(value)
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
    return as_elements(values, dtype).tobytes()


def as_elements(values: object, dtype: str) -> np.ndarray:
    """``values`` (an array, a list, a scalar) as an array of ``dtype``, shape kept.

    A value the dtype cannot hold is a ValueError naming it, where NumPy would
    wrap it (an int64 array cast to i8), truncate it (1.5 to i32), raise its
    own OverflowError (a Python int) or round it to inf (1e39 to f32): integer
    dtypes take whole numbers in their range, f32 takes what is finite in f32
    (and inf and nan as given); bool takes what NumPy makes of it.
    """
    target = numpy_dtype(dtype)
    given = np.asarray(values)
    if given.dtype.kind not in "biufO":
        raise ValueError(f"expected numbers for a {dtype} constant, got {given.dtype} values")
    if dtype in INT_DTYPES:
        _check_integers(given.reshape(-1), dtype, np.iinfo(target))
    elif dtype == "f32":
        return _as_f32(given, target)
    return given.astype(target)


def _check_integers(flat: np.ndarray, dtype: str, info: np.iinfo[Any]) -> None:
    what = f"{dtype} values"
    if flat.dtype.kind == "O":  # Python ints beyond int64 (or anything else)
        ok = np.array([isinstance(v, int) and info.min <= v <= info.max for v in flat.tolist()],
                      dtype=bool)
    elif flat.dtype.kind == "f":
        what = f"whole {dtype} values"
        with np.errstate(invalid="ignore"):  # nan and inf are not whole anyway
            ok = (np.isfinite(flat) & (np.floor(flat) == flat) & (flat >= info.min)
                  & (flat < info.max + 1.0))  # 2**k exactly: no rounding at the top
    elif flat.dtype.kind in "iu":
        ok = (flat >= info.min) & (flat <= info.max)
    else:
        return  # bool
    if not ok.all():
        bad = flat[np.flatnonzero(~ok)[0]]
        raise ValueError(f"expected {what} in [{info.min}, {info.max}], got {bad}")


def _as_f32(given: np.ndarray, target: np.dtype[Any]) -> np.ndarray:
    limit = f"{np.finfo(target).max:.8g}"  # 3.4028235e+38
    if given.dtype.kind == "O":
        try:
            given = given.astype(np.float64)
        except (OverflowError, TypeError, ValueError):
            raise ValueError(f"expected f32 values within ±{limit}, got "
                             f"{given.reshape(-1).tolist()}") from None
    with np.errstate(over="ignore"):
        out = given.astype(target)
    overflowed = np.isfinite(given) & ~np.isfinite(out)
    if overflowed.any():
        raise ValueError(f"expected f32 values within ±{limit} (inf and nan as such), "
                         f"got {given[overflowed].flat[0]}")
    return out

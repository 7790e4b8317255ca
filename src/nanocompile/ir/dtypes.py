"""Element types of the Graph IR and their NumPy counterparts.

``bf16`` is a storage type only: its one operation is the exact cast to
``f32`` (the 16 stored bits become the high half of an f32). In NumPy a bf16
tensor is held as its raw ``uint16`` bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

DTYPES: tuple[str, ...] = ("f32", "i64", "i32", "i8", "bool", "bf16")
FLOAT_DTYPES = frozenset({"f32"})
INT_DTYPES = frozenset({"i64", "i32", "i8"})
NUMERIC_DTYPES = FLOAT_DTYPES | INT_DTYPES

_NUMPY: dict[str, np.dtype[Any]] = {
    "f32": np.dtype(np.float32),
    "i64": np.dtype(np.int64),
    "i32": np.dtype(np.int32),
    "i8": np.dtype(np.int8),
    "bool": np.dtype(np.bool_),
    "bf16": np.dtype(np.uint16),
}

ITEMSIZE = {name: dt.itemsize for name, dt in _NUMPY.items()}


def numpy_dtype(dtype: str) -> np.dtype[Any]:
    """The NumPy dtype that holds values of ``dtype`` (``uint16`` bits for bf16)."""
    try:
        return _NUMPY[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype '{dtype}', expected one of {', '.join(DTYPES)}") from None


def from_numpy(dt: np.dtype[Any]) -> str:
    """The Graph IR dtype of a NumPy dtype (``uint16`` is read as bf16 bits)."""
    for name, candidate in _NUMPY.items():
        if candidate == dt:
            return name
    raise ValueError(f"NumPy dtype {dt} has no Graph IR dtype")


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """Exact bf16 -> f32 widening: the bits become the high half of a u32."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)

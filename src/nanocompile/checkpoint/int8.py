"""spec §5's int8 weight format: per output row, symmetric, no zero point.

For a matrix ``W`` f32 ``[N, K]`` (row ``n`` is output ``n``'s weights over the
``K`` inputs), per row, every step in f32:

    scale = max|row| / 127            (1.0 for an all-zero row)
    q     = row / scale
    q     = sign(q) * floor(|q| + 0.5), clipped to [-127, 127]   (-128 never used)

Stored: the int8 values ``[N, K]`` and the f32 scales ``[N]``. A kernel reads
``f32(q) * scale`` back (the weight's value to within half a step).

NumPy only (checkpoints know no IR). :func:`quantize_rows` works a block of
rows at a time, in place, without float64 copies: the full model's 494M
parameters take a few seconds.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

QMAX = 127
ROWS_ELEMENTS = 1 << 20  # f32 elements per block of rows (4 MB of work space)


class Int8FormatError(ValueError):
    """A tensor the int8 format cannot hold (not a matrix, not finite)."""


def quantize_rows(w: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``(q, scale)``: ``w`` f32 ``[N, K]`` in spec §5's int8 format, ``q`` int8
    ``[N, K]`` and ``scale`` f32 ``[N]`` (see the module docstring). A row with a
    NaN or an infinity is an ``Int8FormatError``."""
    w = np.asarray(w)
    if w.ndim != 2:
        raise Int8FormatError(f"expected a matrix [N, K] to quantize, got shape {list(w.shape)}")
    if w.dtype != np.float32:
        raise Int8FormatError(f"expected f32 values to quantize, got {w.dtype}")
    n, k = w.shape
    q = np.empty((n, k), np.int8)
    scale = np.empty(n, np.float32)
    rows = max(1, ROWS_ELEMENTS // max(k, 1))
    work = np.empty((min(rows, n), k), np.float32)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        scale[start:stop] = _quantize_block(w[start:stop], work[:stop - start], q[start:stop],
                                            start)
    return q, scale


def _quantize_block(w: np.ndarray, t: np.ndarray, q: np.ndarray, first: int) -> np.ndarray:
    """Quantize the f32 rows ``w`` into ``q`` (``t``: work space of their shape); returns
    their scales. ``|w| / scale`` is ``|w / scale|`` (a division's rounding is
    symmetric), and the sign of ``w / scale`` is the sign of ``w``."""
    np.abs(w, out=t)
    peak = t.max(axis=1) if t.shape[1] else np.zeros(len(t), np.float32)
    bad = ~np.isfinite(peak)
    if bad.any():
        raise Int8FormatError(f"row {first + int(np.argmax(bad))} has a NaN or an infinity: "
                              "it has no int8 format")
    scale = peak / np.float32(QMAX)  # f32 division, rounded once
    scale[peak == 0] = 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(t, scale[:, None], out=t)  # |q| = |w / scale| in f32
        if not scale.all():  # max|row| < 127 * 2**-150 underflows the scale to 0: 0 / 0 is 0
            t[np.isnan(t)] = 0
        np.add(t, np.float32(0.5), out=t)
        np.floor(t, out=t)  # floor(|q| + 0.5) in f32
        np.minimum(t, np.float32(QMAX), out=t)  # the clip (only a subnormal scale needs it)
        np.copysign(t, w, out=t)  # sign(q) * ...; -0 and 0 are both 0 as int8
        np.copyto(q, t, casting="unsafe")  # whole numbers in [-127, 127]: exact
    return scale

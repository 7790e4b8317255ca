"""An f32 fused multiply-add and the kernels' matmul order, in NumPy, independent of
nanocompile: the reference of the tests that claim a matmul bitwise.

Since issue 16 every matmul sums ``k`` as a *lanes* loop (``loop.for ... lanes
16``, ``lowering/builder.py``'s ``MATMUL_LANES``): 16 partial sums, partial
``l`` taking the terms ``k ≡ l (mod 16)`` in ``k`` order, each step one
``fma(a_k, b_k, p_l)`` rounded once to f32, every partial starting at +0.0,
then the halving tree ``t[j] = p[j] + p[j + 8]`` (``j < 8``), then ``+ 4``,
``+ 2``, ``+ 1``, each add rounded to f32. :func:`lanes_matmul` computes
exactly that; :func:`fma_f32` is its FMA. An f32 ``reduce_sum`` is the same
lanes loop with an add for the FMA (:func:`lanes_sum`).

Python 3.11 has no ``math.fma`` and NumPy has no f32 fma, so :func:`fma_f32`
builds one from f64. The product of two f32 values is exact in f64 (24 + 24
significant bits, exponents far inside f64's range), but ``f32(f64(p + c))``
rounds twice and can be wrong when the f64 sum lands exactly on the midpoint
of two f32 values. Rounding the f64 sum *to odd* instead (when the f64 add was
inexact, force the last bit to 1) keeps the information that the exact sum
was off the midpoint, and rounding a round-to-odd value with at least
``24 + 2`` bits to 24 bits gives the correctly rounded result (53 >= 26).
The add's exact error comes from TwoSum. ``test_fma_reference.py`` checks it
against exact rational arithmetic.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

MATMUL_LANES = 16  # written here, not imported: the tests check the kernels against it


def _two_sum(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``s = fl(x + y)`` and ``e`` with ``s + e == x + y`` exactly (Knuth's TwoSum;
    exact for finite f64 without overflow, subnormals included)."""
    s = x + y
    yy = s - x
    e = (x - (s - yy)) + (y - yy)
    return s, e


def fma_f32(a: ArrayLike, b: ArrayLike, c: ArrayLike) -> np.ndarray:
    """``a * b + c`` rounded once to f32 (round to nearest, ties to even), elementwise
    with NumPy broadcasting, as IEEE 754 ``fusedMultiplyAdd``: NaN when an operand
    is NaN, for ``inf * 0`` and for ``inf - inf``; an exact zero sum of two
    zeros keeps their common sign, else +0; an overflow is ±inf."""
    a64 = np.asarray(a, np.float32).astype(np.float64)
    b64 = np.asarray(b, np.float32).astype(np.float64)
    c64 = np.asarray(c, np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        p = a64 * b64  # exact (or inf / nan, as the IEEE product)
        s, e = _two_sum(p, c64)  # s: the IEEE sum, signed zeros and specials included
        inexact = np.isfinite(s) & (e != 0)
        even = (s.view(np.uint64) & np.uint64(1)) == 0
        odd = np.where(inexact & even, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
        return odd.astype(np.float32)


def lanes_matmul(a: ArrayLike, b: ArrayLike, lanes: int = MATMUL_LANES) -> np.ndarray:
    """``a @ b`` (f32, ``[..., m, k] @ [..., k, n]``, batch dims broadcast) in the
    kernels' order: ``lanes`` FMA chains over ``k`` and their halving tree (see the
    module docstring). ``k = 0`` gives +0.0."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if lanes < 1 or lanes & (lanes - 1):
        raise ValueError(f"expected a power of two for lanes, got {lanes}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"expected a [..., m, k] @ [..., k, n], got {a.shape} @ {b.shape}")
    out = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1])
    partial = np.zeros((lanes, *out), np.float32)
    for k in range(a.shape[-1]):
        lane = k % lanes
        partial[lane] = fma_f32(a[..., :, k:k + 1], b[..., k:k + 1, :], partial[lane])
    return _halving_tree(partial)


def lanes_sum(x: ArrayLike, axis: int = -1, lanes: int = MATMUL_LANES) -> np.ndarray:
    """The f32 sum over ``axis`` (kept, size 1) in the kernels' order: ``lanes``
    partials from +0.0, ``p[k mod lanes] = p + x_k`` for k ascending, each add
    rounded to f32, then the halving tree. An empty axis gives +0.0."""
    rows = np.moveaxis(np.asarray(x, np.float32), axis, -1)
    if lanes < 1 or lanes & (lanes - 1):
        raise ValueError(f"expected a power of two for lanes, got {lanes}")
    partial = np.zeros((lanes, *rows.shape[:-1]), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(rows.shape[-1]):
            partial[k % lanes] = partial[k % lanes] + rows[..., k]
        total = _halving_tree(partial)
    return np.moveaxis(total[..., None], -1, axis)


def _halving_tree(partial: np.ndarray) -> np.ndarray:
    """``t[j] = p[j] + p[j + L/2]`` down to one value, over the first axis (f32)."""
    half = partial.shape[0] // 2
    while half >= 1:
        partial = (partial[:half] + partial[half:2 * half]).astype(np.float32)
        half //= 2
    return partial[0]

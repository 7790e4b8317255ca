"""spec §5's int8 weight format, kernel A and kernel B in NumPy, written from the
spec alone: the reference of the tests that claim the int8 kernels bitwise.

Independent of nanocompile (only the f32 FMA of ``_fma_reference`` is shared,
itself checked against exact rationals). Everything is vectorized over token
rows and output rows; the order of the f32 operations is spec §5's, step by step.
"""

from __future__ import annotations

import numpy as np
from _fma_reference import fma_f32
from numpy.typing import ArrayLike

BLOCK = 32  # columns per block of kernel A (four f32x8 accumulators)
GROUP = 8  # lanes per accumulator


def quantize_rows(w: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Per output row, symmetric: ``scale = max|row| / 127`` in f32 (1.0 for an
    all-zero row), ``q = sign(w / scale) * floor(|w / scale| + 0.5)`` in f32,
    clipped to [-127, 127]. Returns (int8 ``[N, K]``, f32 scales ``[N]``)."""
    w = np.asarray(w, np.float32)
    peak = np.max(np.abs(w), axis=1) if w.shape[1] else np.zeros(w.shape[0], np.float32)
    scale = (peak / np.float32(127)).astype(np.float32)
    scale = np.where(peak == 0, np.float32(1.0), scale).astype(np.float32)
    q = (w / scale[:, None]).astype(np.float32)
    r = (np.sign(q) * np.floor(np.abs(q) + np.float32(0.5))).astype(np.float32)
    return np.clip(r, -127, 127).astype(np.int8), scale


def kernel_a_dot(x: ArrayLike, q: ArrayLike) -> np.ndarray:
    """Kernel A's sum before the scale: ``x [M, K]`` f32 against ``q [N, K]``
    (int8, or any values exact in f32), giving ``[M, N]`` f32."""
    x = np.asarray(x, np.float32)
    w = np.asarray(q).astype(np.float32)  # f32(q): exact
    m, k = x.shape
    n = w.shape[0]
    if w.shape[1] != k:
        raise ValueError(f"expected x [M, K] and q [N, K], got {x.shape} and {w.shape}")
    c = np.zeros((4, GROUP, m, n), np.float32)  # c[a][l]: accumulator a, lane l
    blocks = k // BLOCK
    for b in range(blocks):
        for a in range(4):
            for lane in range(GROUP):
                col = b * BLOCK + GROUP * a + lane
                c[a, lane] = fma_f32(w[None, :, col], x[:, col, None], c[a, lane])
    for g in range(blocks * BLOCK, k - k % GROUP, GROUP):  # leftover groups: into c0
        for lane in range(GROUP):
            col = g + lane
            c[0, lane] = fma_f32(w[None, :, col], x[:, col, None], c[0, lane])
    with np.errstate(invalid="ignore", over="ignore"):
        v = (c[0] + c[1]) + (c[2] + c[3])  # lane-wise, each add rounded to f32
        s = [v[i] + v[i + 4] for i in range(4)]
        dot = (s[0] + s[1]) + (s[2] + s[3])
        for col in range(k - k % GROUP, k):  # the tail: multiply, then add, in order
            dot = dot + w[None, :, col] * x[:, col, None]
    return dot.astype(np.float32)


def kernel_a(x: ArrayLike, q: ArrayLike, scale: ArrayLike) -> np.ndarray:
    """Kernel A (W8A32): ``y[m, n] = kernel_a_dot(x, q)[m, n] * scale[n]`` (one f32 multiply)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return (kernel_a_dot(x, q) * np.asarray(scale, np.float32)[None, :]).astype(np.float32)


# --------------------------------------------------------------------------
# kernel B (W8A8: activations quantized per block of 32, integer dot products)
#
# Choices where spec §5 leaves room (kept in sync with the report of issue 18):
# * the tail (the last K mod 32 columns, when K is not a multiple of 32) is a
#   block of its own: its scale is over the tail's columns only, and its term
#   f32(sum xq) * xs enters ``off`` like any block's, last, in block order
#   ("off = sum_b" runs over the blocks b that define xs_b; without it the tail's
#   +128 would stay in the result);
# * ``off`` starts at +0.0; each term is an f32 multiply, then an f32 add;
# * activations must be finite (a NaN or an infinity has no quantization; a
#   ValueError), and a block's scale must not underflow to 0 (max|x_b| >= 127 *
#   2**-149 or exactly 0): outside the spec, not modelled.

A_MAX = 127  # |xq| <= 127; -128 never used
ACCUMULATORS = 4  # whole blocks go four at a time into four f32x8 accumulators
PER_LANE = 4  # columns per lane: one vpdpbusd dword, BLOCK = GROUP * PER_LANE


def roundf(v: ArrayLike) -> np.ndarray:
    """C's ``roundf`` of f32 values, halves away from zero: ``sign(v) *
    floor(|v| + 0.5)`` in f64, where ``|v| + 0.5`` is exact for every f32 below
    2**52 (above 2**23 an f32 is a whole number already). f64 values out."""
    v = np.asarray(v, np.float32).astype(np.float64)
    return np.copysign(np.floor(np.abs(v) + 0.5), v)


def quantize_activations(x: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Kernel B's activations: per token row and block ``b`` of 32 columns (the last
    block the ``K mod 32`` leftover ones), ``xs_b = max|x_b| / 127`` in f32 (1.0
    for an all-zero block), ``xq = clamp(roundf(x / xs_b), -127, 127)`` (f32
    division). Returns (int8 ``[M, K]``, f32 ``[M, ceil(K / 32)]``)."""
    x = np.asarray(x, np.float32)
    if x.ndim != 2:
        raise ValueError(f"expected activations [M, K], got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("kernel B quantizes finite activations only")
    m, k = x.shape
    blocks = -(-k // BLOCK)
    xq = np.zeros((m, k), np.int8)
    xs = np.zeros((m, blocks), np.float32)
    for b in range(blocks):
        cols = x[:, b * BLOCK:(b + 1) * BLOCK]
        peak = np.max(np.abs(cols), axis=1)
        scale = (peak / np.float32(A_MAX)).astype(np.float32)
        scale[peak == 0] = np.float32(1.0)
        q = (cols / scale[:, None]).astype(np.float32)
        xq[:, b * BLOCK:(b + 1) * BLOCK] = np.clip(roundf(q), -A_MAX, A_MAX).astype(np.int8)
        xs[:, b] = scale
    return xq, xs


def kernel_b_total(xq: ArrayLike, xs: ArrayLike, q: ArrayLike) -> np.ndarray:
    """Kernel B's ``total`` for quantized activations ``xq`` int8 ``[M, K]`` with
    block scales ``xs`` f32 ``[M, ceil(K / 32)]`` against weights ``q`` int8 ``[N, K]``:
    ``[M, N]`` f32. Per whole block ``b`` (columns ``o = 32b ..``), lane ``l < 8``:
    ``p_l = sum_{j<4} (w[o+4l+j] + 128) * xq[o+4l+j]`` (exact integers); block ``b``
    of the groups of four into accumulator ``b mod 4``, the whole blocks after the
    last group of four into accumulator 0: ``acc[l] = fma(f32(p_l), xs_b, acc[l])``;
    the accumulators reduce as in kernel A; then the tail: ``total +
    f32(sum (w + 128) * xq) * xs_tail`` (an f32 multiply, then an f32 add)."""
    xi = np.asarray(xq).astype(np.int64)
    u = np.asarray(q).astype(np.int64) + 128  # w + 128: the unsigned operand
    xs = np.asarray(xs, np.float32)
    m, k = xi.shape
    n = u.shape[0]
    if u.shape[1] != k or xs.shape != (m, -(-k // BLOCK)):
        raise ValueError(f"expected xq [M, K], xs [M, ceil(K / 32)] and q [N, K], got "
                         f"{xi.shape}, {xs.shape} and {u.shape}")
    whole = k // BLOCK
    grouped = whole - whole % ACCUMULATORS
    acc = np.zeros((ACCUMULATORS, GROUP, m, n), np.float32)  # acc[a][l]
    for b in range(whole):
        a = b % ACCUMULATORS if b < grouped else 0
        for lane in range(GROUP):
            p = np.zeros((m, n), np.int64)
            for j in range(PER_LANE):
                col = b * BLOCK + PER_LANE * lane + j
                p += xi[:, col, None] * u[None, :, col]
            acc[a, lane] = fma_f32(p.astype(np.float32), xs[:, b, None], acc[a, lane])
    with np.errstate(invalid="ignore", over="ignore"):
        v = (acc[0] + acc[1]) + (acc[2] + acc[3])
        s = [v[i] + v[i + 4] for i in range(4)]
        total = (s[0] + s[1]) + (s[2] + s[3])
        if k % BLOCK:
            p = xi[:, whole * BLOCK:] @ u[:, whole * BLOCK:].T  # exact integers
            product = (p.astype(np.float32) * xs[:, whole, None]).astype(np.float32)
            total = total + product
    return total.astype(np.float32)


def kernel_b_offset(xq: ArrayLike, xs: ArrayLike) -> np.ndarray:
    """Kernel B's ``offset = 128 * off``, ``off = sum_b f32(sum xq_b) * xs_b`` in f32
    from +0.0 in block order (the tail block last), each term multiplied, then
    added; the 128 multiplies once at the end. f32 ``[M]``."""
    xi = np.asarray(xq).astype(np.int64)
    xs = np.asarray(xs, np.float32)
    m = xi.shape[0]
    off = np.zeros(m, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for b in range(xs.shape[1]):
            block_sum = xi[:, b * BLOCK:(b + 1) * BLOCK].sum(axis=1).astype(np.float32)
            off = (off + (block_sum * xs[:, b]).astype(np.float32)).astype(np.float32)
        return (np.float32(128) * off).astype(np.float32)


def kernel_b(x: ArrayLike, q: ArrayLike, scale: ArrayLike) -> np.ndarray:
    """Kernel B (W8A8): ``x`` f32 ``[M, K]`` quantized per block
    (:func:`quantize_activations`), then ``y[m, n] = (total[m, n] - offset[m]) *
    scale[n]`` (an f32 subtract, then an f32 multiply)."""
    xq, xs = quantize_activations(x)
    total = kernel_b_total(xq, xs, q)
    offset = kernel_b_offset(xq, xs)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = (total - offset[:, None]).astype(np.float32)
        return (diff * np.asarray(scale, np.float32)[None, :]).astype(np.float32)

"""spec §5's int8 weight format and kernel A in NumPy, written from the spec alone:
the reference of the tests that claim the int8 kernels bitwise.

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

"""Numerical helpers shared by the primitive tests (targets/test_primitives_c.py)
and the fusion tests (passes/test_fusion_primitives.py): seeded inputs with every
f32 special, bitwise comparison, and the error bounds the tests state."""

from __future__ import annotations

import numpy as np

SEED = 20240611
F32_U = 2.0**-24  # unit roundoff of f32 (half an ulp of 1.0)
Arrays = dict[str, np.ndarray]
ULP_BOUND = {"exp": 3, "sin": 2, "cos": 2}  # libm vs NumPy, ulps


def rng_for(test: str, index: int) -> np.random.Generator:
    """A generator fixed by the test's name and the binding's index."""
    return np.random.default_rng([SEED, *test.encode(), index])


def uint_view(x: np.ndarray) -> np.ndarray:
    """Float arrays as their bits; everything else unchanged."""
    if x.dtype == np.float32:
        return x.view(np.uint32)
    return x


def assert_bitwise(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    g_bits, w_bits = uint_view(got), uint_view(want)
    if not np.array_equal(g_bits, w_bits):
        bad = np.argwhere(g_bits != w_bits)
        first = tuple(int(i) for i in bad[0])
        raise AssertionError(
            f"{what}: {len(bad)} of {got.size} elements differ; first at {first}: "
            f"got {got[first]!r} ({g_bits[first]!r}), want "
            f"{want[first]!r} ({w_bits[first]!r})")


def random_f32(rng: np.random.Generator, shape: tuple[int, ...], *,
               specials: bool = True) -> np.ndarray:
    """Normal values at several magnitudes, plus (optionally) ±0, ±inf, subnormals
    and quiet/signaling NaNs with random payloads and signs."""
    x = rng.standard_normal(shape).astype(np.float32)
    x *= (np.float32(10.0) ** rng.integers(-3, 4, shape)).astype(np.float32)
    if not specials or x.size == 0:
        return x
    pick = rng.random(shape)
    payload = rng.integers(1, 1 << 22, shape, dtype=np.uint32)
    quiet = rng.random(shape) < 0.7
    sign = rng.integers(0, 2, shape, dtype=np.uint32) << np.uint32(31)
    nan_bits = sign | np.uint32(0x7F800000) | payload | np.where(
        quiet, np.uint32(1 << 22), np.uint32(0))
    specials_table = np.array([0.0, -0.0, np.inf, -np.inf, 1e-40, -3e-39, 1.0, -1.0],
                              np.float32)
    x = np.where(pick < 0.08, nan_bits.view(np.float32), x)
    which = rng.integers(0, len(specials_table), shape)
    return np.where((pick >= 0.08) & (pick < 0.2), specials_table[which], x)


def matmul_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Allowed |compiled - NumPy| per entry: 2·k·u·Σ_k |a_ik||b_kj|.

    The compiled kernel sums k in 16 FMA chains and their halving tree
    (``_fma_reference.lanes_matmul``): a term sees at most ``min(k, ceil(k/16)
    + 4)`` roundings, so it is within γ_k·Σ|a||b| ≈ k·u·Σ|a||b| of the exact
    result. BLAS (blocked, possibly FMA) satisfies the same bound; the factor
    2 covers both."""
    k = a.shape[-1]
    mag = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    return 2.0 * k * F32_U * mag

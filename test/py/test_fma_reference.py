"""The references of ``_fma_reference.py`` against exact rational arithmetic.

``fma_f32`` is checked against ``Fraction(a) * Fraction(b) + Fraction(c)``
rounded to f32 by :func:`round_f32`, written here from the definition of
round-to-nearest-even on the f32 grid (integer arithmetic on Fractions, no f64
anywhere), with IEEE 754's rules for zeros, infinities and NaN written out
separately (:func:`ieee_fma`). ``lanes_matmul`` is checked against the
exact sums (within the error the lanes order allows) and, bitwise, against a
plain scalar loop of the same order whose every FMA is :func:`ieee_fma`;
``lanes_sum`` against a scalar loop of its order.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from _fma_reference import MATMUL_LANES, fma_f32, lanes_matmul, lanes_sum
from _numerics import F32_U, assert_bitwise, rng_for

F32_MAX_EXP = 128  # f32 values are below 2**128
F32_MANTISSA = 24  # significant bits, the implicit one included
F32_MIN_QUANTUM = Fraction(1, 2**149)  # the spacing of subnormals


def round_f32(q: Fraction) -> float:
    """The f32 nearest to ``q`` (ties to an even significand), as a Python float
    (exact: an f32 is an f64); ±inf past the overflow threshold. ``q != 0``."""
    sign = -1.0 if q < 0 else 1.0
    mag = abs(q)
    exp = math.floor(math.log2(mag.numerator)) - math.floor(math.log2(mag.denominator))
    while Fraction(2) ** exp > mag:  # the log2 estimate is off by at most one
        exp -= 1
    while Fraction(2) ** (exp + 1) <= mag:
        exp += 1
    quantum = max(Fraction(2) ** (exp - (F32_MANTISSA - 1)), F32_MIN_QUANTUM)
    steps = round(mag / quantum)  # Fraction.__round__: half to even
    value = steps * quantum
    if value >= Fraction(2) ** F32_MAX_EXP:
        return sign * math.inf
    return sign * float(value)  # steps <= 2**24 quanta of a power of two: exact


def ieee_fma(a: np.float32, b: np.float32, c: np.float32) -> np.float32:
    """IEEE 754 ``fusedMultiplyAdd(a, b, c)`` in f32, from the standard's rules:
    NaN for a NaN operand, ``inf * 0`` or ``inf - inf``; ±inf when a term is
    infinite; an exact zero is -0 only as the sum of a -0 product and -0, else
    +0; otherwise the exact value rounded once (:func:`round_f32`)."""
    fa, fb, fc = float(a), float(b), float(c)
    if math.isnan(fa) or math.isnan(fb) or math.isnan(fc):
        return np.float32(np.nan)
    product_inf = math.isinf(fa) or math.isinf(fb)
    if product_inf and (fa == 0 or fb == 0):
        return np.float32(np.nan)
    product_negative = math.copysign(1.0, fa) * math.copysign(1.0, fb) < 0
    if product_inf:
        if math.isinf(fc) and (fc < 0) != product_negative:
            return np.float32(np.nan)
        return np.float32(-np.inf if product_negative else np.inf)
    if math.isinf(fc):
        return np.float32(fc)
    exact = Fraction(fa) * Fraction(fb) + Fraction(fc)
    if exact == 0:
        both_negative_zeros = (fa == 0 or fb == 0) and product_negative and fc == 0 \
            and math.copysign(1.0, fc) < 0
        return np.float32(-0.0 if both_negative_zeros else 0.0)
    return np.float32(round_f32(exact))


def assert_fma_matches(a: np.ndarray, b: np.ndarray, c: np.ndarray, what: str) -> None:
    """``fma_f32`` on the arrays == ``ieee_fma`` per element, bitwise (NaN: any NaN)."""
    got = fma_f32(a, b, c)
    want = np.array([ieee_fma(x, y, z) for x, y, z in zip(a, b, c, strict=True)], np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions"
    assert_bitwise(np.where(nan, 0, got).astype(np.float32), np.where(nan, 0, want)
                   .astype(np.float32), what)


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


# --------------------------------------------------------------------------
# the exact rounding the checks rest on


def test_round_f32_agrees_with_numpy_where_one_rounding_is_enough() -> None:
    """On values of at most 53 bits (so ``float(q)`` is exact and NumPy's f64 -> f32
    cast rounds once), ``round_f32`` is NumPy's cast: normal, subnormal,
    overflowing, and ties of both parities."""
    rng = rng_for("round-f32", 0)
    bits = rng.integers(0, 1 << 53, 4000, dtype=np.uint64)
    scale = rng.integers(-200, 130, 4000)
    values = [Fraction(int(m)) * Fraction(2) ** int(s) for m, s in zip(bits, scale, strict=True)]
    one = Fraction(1)
    ulp = Fraction(1, 2**23)
    values += [one + ulp / 2, one + 3 * ulp / 2, -(one + ulp / 2),  # ties: to 1, to 1 + 2 ulp
               Fraction(2) ** 128 - Fraction(2) ** 103,  # the overflow threshold (a tie)
               Fraction(1, 2**150), Fraction(3, 2**151), Fraction(1, 2**151)]
    for q in values:
        if q == 0:
            continue
        with np.errstate(over="ignore"):
            want = np.float32(float(q))
        got = np.float32(round_f32(q))
        assert got.view(np.uint32) == want.view(np.uint32), (q, got, want)
    assert round_f32(one + ulp / 2) == 1.0
    assert round_f32(one + 3 * ulp / 2) == 1.0 + 2 * float(ulp)
    assert round_f32(Fraction(1, 2**150)) == 0.0  # the tie below the smallest subnormal
    below = Fraction(2) ** 128 - Fraction(2) ** 103 - Fraction(1, 2**200)  # 331 bits
    assert round_f32(below) == float(np.finfo(np.float32).max)


# --------------------------------------------------------------------------
# fma_f32


def test_fma_on_random_triples() -> None:
    """Random finite triples at every magnitude (random exponents, the product
    and the addend often of similar size so the sum cancels), equal to the exact
    value rounded once."""
    rng = rng_for("fma-random", 0)
    n = 6000
    mant = rng.uniform(1, 2, (3, n)) * rng.choice([-1, 1], (3, n))
    exps = rng.integers(-60, 60, (3, n))
    a, b, c = (np.ldexp(mant[i], exps[i]).astype(np.float32) for i in range(3))
    near = slice(0, n // 2)  # |c| ≈ |a·b|: heavy cancellation half the time
    c[near] = (np.sign(c[near]) * np.abs(a[near] * b[near]) * rng.uniform(0.9, 1.1, n // 2)
               ).astype(np.float32)
    assert_fma_matches(a, b, c, "random triples")


def test_fma_when_c_cancels_the_product() -> None:
    """``c = -fl(a·b) + j ulps``: the result is the product's rounding error, exact
    in f32, which mul-then-add loses entirely (it gives ``j`` ulps, or 0)."""
    rng = rng_for("fma-cancel", 0)
    a = rng.standard_normal(2000).astype(np.float32)
    b = rng.standard_normal(2000).astype(np.float32)
    rounded = (a * b).astype(np.float32)
    c = -rounded
    for j in range(1, 4):
        c[j::4] = np.nextafter(c[j::4], np.float32(np.inf) * np.sign(c[j::4]))
    assert_fma_matches(a, b, c, "cancellation")
    residual = fma_f32(a, b, -rounded)
    exact = [Fraction(float(x)) * Fraction(float(y)) - Fraction(float(r))
             for x, y, r in zip(a, b, rounded, strict=True)]
    assert [Fraction(float(v)) for v in residual] == exact  # the error itself, exactly
    assert (residual != 0).sum() > 1000  # most products are inexact in f32


def test_fma_where_double_rounding_is_wrong() -> None:
    """``a = b = 1 + 2**-12``: ``a·b = 1 + 2**-11 + 2**-24``, the midpoint between
    ``1 + 2**-11`` (even) and the next f32; ``c = 2**-80`` puts the exact sum just
    above it, so the correct result rounds up. In f64 the sum rounds back onto
    the midpoint (2**-80 is under half an f64 ulp), and the cast to f32 then
    ties to even, down: ``f32(f64(a·b + c))`` is one ulp wrong. Also the same
    scaled by powers of two and negated, and a random search for more."""
    x, tiny = 1 + 2**-12, 2.0**-80  # both exact in f32
    correct = np.float32(1 + 2**-11 + 2**-23)
    naive_one = np.float32(np.float64(x) * np.float64(x) + np.float64(tiny))
    assert naive_one == np.float32(1 + 2**-11) != correct
    assert ieee_fma(np.float32(x), np.float32(x), np.float32(tiny)) == correct
    assert fma_f32(x, x, tiny) == correct
    scales = [2.0**s for s in range(-21, 22, 3)]  # tiny·s² stays a normal f32
    a = f32(*[x * s for s in scales], *[-x * s for s in scales])
    b = f32(*[x * s for s in scales], *[x * s for s in scales])
    cc = f32(*[tiny * s * s for s in scales], *[-tiny * s * s for s in scales])
    assert_fma_matches(a, b, cc, "double-rounding midpoints")
    naive = (a.astype(np.float64) * b.astype(np.float64) + cc.astype(np.float64)
             ).astype(np.float32)
    assert (naive != fma_f32(a, b, cc)).all()  # every one of them double-rounds wrong

    # 13-bit times 12-bit significands: the product has at most 25 bits, so at or
    # above 2 it is often an f32 midpoint; a tiny c moves it off by under half an f64 ulp
    rng = rng_for("fma-double-round", 0)
    a = (rng.integers(1 << 12, 1 << 13, 4000) * 2.0**-12).astype(np.float32)
    b = (rng.integers(1 << 11, 1 << 12, 4000) * 2.0**-11).astype(np.float32)
    c = (rng.choice([-1, 1], 4000) * np.ldexp(1.0, rng.integers(-90, -60, 4000))
         ).astype(np.float32)
    assert_fma_matches(a, b, c, "random near-midpoint triples")
    naive = (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)
             ).astype(np.float32)
    print(f"double rounding wrong on {int((naive != fma_f32(a, b, c)).sum())} of 4000")
    assert (naive != fma_f32(a, b, c)).sum() > 100


def test_fma_with_subnormals() -> None:
    """Products and addends around and below 2**-126 (subnormal results, results
    that round to the smallest subnormal or to a signed zero)."""
    rng = rng_for("fma-subnormal", 0)
    n = 4000
    a = np.ldexp(rng.uniform(-2, 2, n), rng.integers(-80, -60, n)).astype(np.float32)
    b = np.ldexp(rng.uniform(-2, 2, n), rng.integers(-80, -60, n)).astype(np.float32)
    c = np.where(rng.random(n) < 0.5,
                 (rng.integers(-50, 50, n) * 2.0**-149),
                 np.ldexp(rng.uniform(-2, 2, n), rng.integers(-150, -120, n))
                 ).astype(np.float32)
    c[::7] = -(a[::7] * b[::7]).astype(np.float32)  # cancellation in the subnormals
    assert_fma_matches(a, b, c, "subnormals")
    got = fma_f32(a, b, c)
    assert ((got != 0) & (np.abs(got) < 2**-126)).sum() > 500  # subnormal results
    assert (np.signbit(got) & (got == 0)).sum() > 0  # a tiny negative rounded to -0


def test_fma_specials() -> None:
    """Every triple of ±0, ±1, 1.5, ±inf, NaN, the smallest subnormal and ±max
    (IEEE's NaN, infinity, overflow and signed-zero rules)."""
    table = [0.0, -0.0, 1.0, -1.0, 1.5, np.inf, -np.inf, np.nan, 2.0**-149,
             -(2.0**-149), float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max)]
    a, b, c = (np.array(v, np.float32) for v in zip(*itertools.product(table, repeat=3),
                                                    strict=True))
    assert_fma_matches(a, b, c, "specials")
    got = fma_f32(f32(-0.0, 0.0, -1.0, 1.0, 3e38), f32(1.0, -1.0, 0.0, 1.0, 3e38),
                  f32(-0.0, -0.0, 0.0, -1.0, -np.inf))
    assert list(np.signbit(got)) == [True, True, False, False, True]
    assert list(got) == [0.0, 0.0, 0.0, 0.0, -np.inf]


def test_fma_broadcasts() -> None:
    """A column times a row plus a matrix: the shapes broadcast like NumPy's."""
    a, b = f32(1, 2, 3).reshape(3, 1), f32(4, 5).reshape(1, 2)
    got = fma_f32(a, b, np.ones((3, 2), np.float32))
    assert got.dtype == np.float32
    assert got.tolist() == [[5, 6], [9, 11], [13, 16]]


# --------------------------------------------------------------------------
# lanes_matmul


def scalar_lanes_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The kernels' order written out one element at a time, every FMA
    ``ieee_fma`` (exact arithmetic, not ``fma_f32``), the tree's adds f32."""
    m, k_dim = a.shape
    n = b.shape[1]
    out = np.zeros((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            p = [np.float32(0.0)] * 16
            for k in range(k_dim):
                p[k % 16] = ieee_fma(a[i, k], b[k, j], p[k % 16])
            for half in (8, 4, 2, 1):
                p = [np.float32(p[t] + p[t + half]) for t in range(half)]
            out[i, j] = p[0]
    return out


@pytest.mark.parametrize("k", [0, 1, 5, 16, 17, 40])
def test_lanes_matmul_is_the_scalar_loop(k: int) -> None:
    """Bitwise the one-element-at-a-time loop, at k below, at and above 16 (some
    partials never updated: +0.0 into the tree)."""
    rng = rng_for("lanes-scalar", k)
    a = (rng.standard_normal((3, k)) * 4).astype(np.float32)
    b = (rng.standard_normal((k, 4)) * 4).astype(np.float32)
    assert_bitwise(lanes_matmul(a, b), scalar_lanes_matmul(a, b), f"k = {k}")
    if k == 0:
        assert (lanes_matmul(a, b).view(np.uint32) == 0).all()  # +0.0


def test_lanes_matmul_near_the_exact_sum() -> None:
    """Each term passes through at most ``ceil(k / 16)`` FMA roundings on its chain
    and 4 tree adds, so ``|c - exact| <= γ_(ceil(k/16) + 4) · Σ|a||b|`` (γ_n =
    n·u / (1 - n·u)); the exact sum is a Fraction. Also: the order is not the
    sequential one (a sequential FMA chain gives other bits on this data)."""
    rng = rng_for("lanes-exact", 0)
    m, k, n = 2, 300, 3
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    got = lanes_matmul(a, b)
    chain = math.ceil(k / MATMUL_LANES) + 4
    gamma = chain * F32_U / (1 - chain * F32_U)
    worst = 0.0
    for i in range(m):
        for j in range(n):
            exact = sum((Fraction(float(a[i, t])) * Fraction(float(b[t, j])) for t in range(k)),
                        Fraction(0))
            mag = sum(abs(float(a[i, t]) * float(b[t, j])) for t in range(k))
            err = abs(Fraction(float(got[i, j])) - exact)
            assert err <= Fraction(gamma * mag), (i, j, float(err), gamma * mag)
            worst = max(worst, float(err) / (F32_U * mag))
    print(f"lanes_matmul k={k}: max |c - exact| = {worst:.3g} u·Σ|a||b| (bound {chain})")
    sequential = np.zeros((m, n), np.float32)
    for t in range(k):
        sequential = fma_f32(a[:, t:t + 1], b[t:t + 1, :], sequential)
    assert not np.array_equal(sequential, got)


def test_lanes_matmul_batches_and_checks_shapes() -> None:
    """Batch dims broadcast (each batch its own product), and a mismatched k or a
    lane count that is not a power of two is refused."""
    rng = rng_for("lanes-batch", 0)
    a = rng.standard_normal((2, 3, 20)).astype(np.float32)
    b = rng.standard_normal((20, 4)).astype(np.float32)
    got = lanes_matmul(a, b)
    assert got.shape == (2, 3, 4)
    for t in range(2):
        assert_bitwise(got[t], lanes_matmul(a[t], b), f"batch {t}")
    with pytest.raises(ValueError, match="expected a"):
        lanes_matmul(a, b[:5])
    with pytest.raises(ValueError, match="power of two"):
        lanes_matmul(a, b, lanes=12)


# --------------------------------------------------------------------------
# lanes_sum


@pytest.mark.parametrize("n", [0, 1, 5, 16, 17, 40])
def test_lanes_sum_is_the_scalar_loop(n: int) -> None:
    """Bitwise a one-row-at-a-time loop of 16 f32 partials and the halving tree,
    over either axis (kept, size 1); an empty axis gives +0.0."""
    rng = rng_for("lanes-sum", n)
    x = (rng.standard_normal((3, n)) * 10.0 ** rng.integers(-3, 4, (3, n))).astype(np.float32)
    want = np.zeros((3, 1), np.float32)
    for i in range(3):
        p = [np.float32(0.0)] * 16
        for k in range(n):
            p[k % 16] = np.float32(p[k % 16] + x[i, k])
        for half in (8, 4, 2, 1):
            p = [np.float32(p[t] + p[t + half]) for t in range(half)]
        want[i, 0] = p[0]
    assert_bitwise(lanes_sum(x), want, f"n = {n}")
    assert_bitwise(lanes_sum(x.T, axis=0), want.T, f"n = {n}, axis 0")
    if n == 0:
        assert (lanes_sum(x).view(np.uint32) == 0).all()
    if n >= 17:
        assert not np.array_equal(lanes_sum(x), lanes_sum(x, lanes=1))  # not sequential

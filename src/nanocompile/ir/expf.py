"""The model's ``exp``: one defined f32 algorithm, the same bits in NumPy and C.

``graph.exp`` (softmax's terms, SiLU's ``exp(-|x|)``) meant libm's ``expf``
until the softmax of a 4,096-token context spent most of its time in 1.38 M
scalar libm calls per decode step (a vector form of libm's bits does not
exist). It is now this algorithm, written once as f32 operations, each
rounded to nearest (no FMA, no reordering):

1. clamp: ``c = x < HI ? x : HI``, then ``c = c > LO ? c : LO`` (``LO = -104``:
   below it the result rounds to 0; ``HI = 89``: above 88.72 it overflows);
2. ``n = floor(c * LOG2E + 0.5)`` (an integer in [-150, 128]);
3. Cody-Waite reduction: ``r = (c - n * C1) - n * C2`` (``C1 + C2`` is ln 2;
   ``n * C1`` is exact, |r| <= 0.35);
4. Cephes' ``expf`` polynomial by Horner, ``p = P[0]``, ``p = p * r + P[i]``,
   then ``y = (p * (r * r) + r) + 1``;
5. ``2^n`` in two exact steps, ``n1 = n >> 1`` (floor), ``n2 = n - n1``:
   ``(y * 2^n1) * 2^n2`` (each factor a normal float built from its exponent
   bits; the first product is exact, the second rounds once, into a subnormal
   or to +inf where the true value lies there);
6. a NaN input is returned as it is (its bits).

``+inf`` gives ``+inf`` (clamped to 89), ``-inf`` gives ``+0``. The accuracy
against the exact ``exp`` is measured in ``test/py/ir/test_expf.py`` (a
strided sweep of every f32 in [-104, 89]); the C forms (scalar
``nc_expf``, SSE ``nc_expf4``, AVX2 ``nc_expf8``, AVX-512 ``nc_expf16``,
``targets/c.py`` and ``targets/c_vector.py``) are tested bitwise against
:func:`expf`. ``sin`` and ``cos`` (the RoPE tables, once per position) stay
libm's.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32

LO = F32(-104.0)
HI = F32(89.0)
LOG2E = F32(1.44269504088896341)
HALF = F32(0.5)
ONE = F32(1.0)
C1 = F32(0.693359375)
C2 = F32(-2.12194440e-4)
P = (F32(1.9875691500e-4), F32(1.3981999507e-3), F32(8.3334519073e-3),
     F32(4.1665795894e-2), F32(1.6666665459e-1), F32(5.0000001201e-1))
BIAS = 127
MANTISSA_BITS = 23


def c_literal(value: np.float32) -> str:
    """``value`` as an exact C float literal (hexadecimal, ``f`` suffix)."""
    mantissa, exponent = float(value).hex().split("p")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}p{exponent}f"


def expf(x: np.ndarray) -> np.ndarray:
    """The model's ``exp`` of every element of ``x`` (f32 in, f32 out): the
    algorithm of the module docstring, in NumPy's f32 operations."""
    x = np.asarray(x, F32)
    with np.errstate(all="ignore"):
        c = np.where(x < HI, x, HI)
        c = np.where(c > LO, c, LO)
        n = np.floor(c * LOG2E + HALF)
        r = (c - n * C1) - n * C2
        p = np.full_like(r, P[0])
        for coefficient in P[1:]:
            p = p * r + coefficient
        y = (p * (r * r) + r) + ONE
        ni = n.astype(np.int32)
        n1 = ni >> 1
        n2 = ni - n1
        s1 = ((n1 + BIAS) << MANTISSA_BITS).astype(np.int32).view(F32)
        s2 = ((n2 + BIAS) << MANTISSA_BITS).astype(np.int32).view(F32)
        out = (y * s1) * s2
    return np.where(np.isnan(x), x, out).astype(F32)

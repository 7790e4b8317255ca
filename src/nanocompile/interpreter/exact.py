"""Exact f32 arithmetic in NumPy: the reduction orders of the compiled kernels and
the C library's ``sinf``/``cosf``, for the interpreter.

NumPy has no f32 fused multiply-add, sums in its own pairwise order and has its
own ``exp``. The functions here compute what the generated C computes, bit for
bit, vectorized over everything but the reduction axis:

* :func:`fma_f32`: ``a * b + c`` rounded once to f32;
* :func:`lanes_matmul`, :func:`lanes_sum`: the compiler's default order of a
  matmul's and an f32 ``reduce_sum``'s sum over ``k`` (``loop.ForOp``'s lanes
  loop with ``MATMUL_LANES`` lanes);
* :func:`blocks32_matmul`: spec §5 kernel A's order (``graph.matmul``'s
  ``order = "blocks32"``);
* :func:`blocks_i8_matmul`: spec §5 kernel B's integer core (``graph.matmul_i8``);
* :func:`sequential_sum`: ``graph.reduce_sum``'s ``order = "sequential"``;
* :func:`round_half_away`: ``graph.round`` (C's ``roundf``);
* :data:`LIBM`: ``exp``, ``sin``, ``cos`` through the C library's f32 functions.

**The FMA.** The product of two f32 values is exact in f64 (24 + 24 significant
bits, exponents far inside f64's range), so ``fma(a, b, c)`` is the f32
rounding of the f64 sum ``s = p + c``, except that ``s`` is itself rounded.
Rounding twice (to f64, then to f32) goes wrong only where ``s`` lands exactly
on the midpoint of two f32 values or in f32's subnormal range (where the f32
grid is coarser than the midpoint test below sees); the fast path rounds ``s``
to f32 and recomputes only those elements. There the f64 sum is rounded *to
odd* (an inexact sum whose last bit is even moves to its odd neighbour, the
add's exact error coming from TwoSum): a round-to-odd value of at least 24 + 2
bits rounds to 24 bits correctly (53 >= 26), so those elements are exact too.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

MATMUL_LANES = 16
"""The default order's lane count: ``lowering/builder.py``'s ``MATMUL_LANES``
(the layers contract keeps the interpreter from importing the lowering; a test
checks the two are equal)."""

BLOCK, GROUP = 32, 8
"""Kernel A: blocks of 32 columns, four accumulators of 8 lanes (spec §5)."""

_BUDGET = 1 << 15  # accumulator elements of one chunk of output columns (~1 MB of work space)

_LOW29 = np.uint64((1 << 29) - 1)  # the f64 fraction bits an f32 rounding drops
_HALF29 = np.uint64(1 << 28)  # ... and their pattern at an f32 midpoint
_ABS32 = np.uint32((1 << 31) - 1)
_NORMAL32 = np.uint32(1 << 23)  # f32 bits of 2**-126, f32's smallest normal


# --------------------------------------------------------------------------
# the FMA


class _Chains:
    """``chains`` f32 accumulators of shape ``shape`` (from +0.0), each an FMA chain,
    stepped together: ``acc[j] = fma(lhs[j], rhs[j], acc[j])``."""

    def __init__(self, chains: int, shape: tuple[int, ...]) -> None:
        full = (chains, *shape)
        self.acc = np.zeros(full, np.float32)
        self._next = np.empty(full, np.float32)
        self._product = np.empty(full, np.float64)
        self._sum = np.empty(full, np.float64)
        self._bits = np.empty(full, np.uint64)
        self._bits32 = np.empty(full, np.uint32)
        self._suspect = np.empty(full, np.bool_)
        self._tiny = np.empty(full, np.bool_)

    def step(self, lhs: np.ndarray, rhs: np.ndarray, n: int) -> None:
        """Chains ``j < n`` take one term each: ``lhs`` (f64) and ``rhs`` (f32)
        broadcast to ``[n, *shape]``; their product is exact in f64."""
        acc, r, p, s = self.acc[:n], self._next[:n], self._product[:n], self._sum[:n]
        np.multiply(lhs, rhs, out=p)
        np.add(p, acc, out=s)
        np.copyto(r, s, casting="unsafe")  # f32(s): right but at a midpoint or tiny
        suspect, tiny = self._suspect[:n], self._tiny[:n]
        np.equal(np.bitwise_and(s.view(np.uint64), _LOW29, out=self._bits[:n]), _HALF29,
                 out=suspect)
        np.less_equal(np.bitwise_and(r.view(np.uint32), _ABS32, out=self._bits32[:n]),
                      _NORMAL32, out=tiny)
        np.logical_or(suspect, tiny, out=suspect)
        if suspect.any():
            _fix(p.reshape(-1), acc.reshape(-1), r.reshape(-1), s.reshape(-1),
                 np.flatnonzero(suspect))
        if n == self.acc.shape[0]:
            self.acc, self._next = r, acc
        else:
            acc[...] = r


def _fix(p: np.ndarray, c: np.ndarray, r: np.ndarray, s: np.ndarray, at: np.ndarray) -> None:
    """``r[at] = f32(p[at] + c[at])`` exactly, where ``s = p + c`` in f64 (flat
    arrays); an exact zero ``s`` is right already."""
    at = at[s[at] != 0]
    r[at] = _round_to_odd(p[at], c[at].astype(np.float64))


def _round_to_odd(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``p + c`` (f64) rounded to odd, then to f32: the correctly rounded f32 sum."""
    s = p + c
    yy = s - p
    e = (p - (s - yy)) + (c - yy)  # TwoSum: s + e == p + c exactly (finite s)
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    move = np.isfinite(s) & (e != 0) & even
    odd = np.where(move, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return odd.astype(np.float32)


def fma_f32(a: ArrayLike, b: ArrayLike, c: ArrayLike) -> np.ndarray:
    """``a * b + c`` rounded once to f32 (IEEE ``fusedMultiplyAdd``, round to nearest
    even), elementwise with NumPy broadcasting: NaN for a NaN operand, ``inf * 0``
    and ``inf - inf``; a zero sum of two zeros keeps their common sign, else +0."""
    a32, b32, c32 = (np.asarray(v, np.float32) for v in (a, b, c))
    shape = np.broadcast_shapes(a32.shape, b32.shape, c32.shape)
    chain = _Chains(1, shape)
    chain.acc[0] = c32
    with np.errstate(invalid="ignore", over="ignore"):
        chain.step(a32.astype(np.float64), b32, 1)
    return chain.acc[0]


# --------------------------------------------------------------------------
# the orders of a matmul's sum over k


def _column_chunks(a: ArrayLike, b: ArrayLike, chains: int,
                   body: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """``body(a64, bk)`` over chunks of output columns, concatenated: ``a64`` is ``a``
    in f64, ``bk`` the chunk of ``b`` as a contiguous ``[K, ..., n]`` (``k`` first);
    a chunk keeps its ``chains`` accumulators near ``_BUDGET`` elements."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    if a.ndim < 2 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] \
            or a.shape[-1] != b.shape[-2]:
        raise ValueError(f"expected [..., M, K] x [..., K, N] with equal batch dims, "
                         f"got {a.shape} x {b.shape}")
    a64 = a.astype(np.float64)
    n = b.shape[-1]
    rows = chains * int(np.prod(a.shape[:-1], dtype=np.int64))
    step = max(1, _BUDGET // max(rows, 1))
    parts = []
    with np.errstate(invalid="ignore", over="ignore"):
        for n0 in range(0, n, step):
            chunk = np.ascontiguousarray(np.moveaxis(b[..., n0:n0 + step], -2, 0))
            parts.append(body(a64, chunk))
    if not parts:
        return np.zeros((*a.shape[:-1], 0), np.float32)
    return np.concatenate(parts, axis=-1)


def _step(chains: _Chains, a64: np.ndarray, bk: np.ndarray, k0: int, k1: int) -> None:
    """Chain ``j`` takes the term ``k0 + j`` (``a64`` ``[..., M, K]``, ``bk`` ``[K, ..., N]``)."""
    lhs = np.moveaxis(a64[..., k0:k1], -1, 0)[..., None]  # [n, ..., M, 1]
    chains.step(lhs, bk[k0:k1, ..., None, :], k1 - k0)  # [n, ..., 1, N]


def _halving_tree(partial: np.ndarray) -> np.ndarray:
    """``t[j] = p[j] + p[j + L/2]`` down to one value, over the first axis (f32)."""
    half = partial.shape[0] // 2
    while half >= 1:
        partial = partial[:half] + partial[half:2 * half]
        half //= 2
    return partial[0]


def lanes_matmul(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """``a @ b`` (f32, ``[..., M, K] x [..., K, N]``) in the compiler's default order:
    partial ``l`` is the FMA chain, from +0.0, over the ``k`` with ``k mod 16 == l``
    in ``k`` order; then the halving tree ``t[j] = p[j] + p[j + 8]``, ``+ 4``,
    ``+ 2``, ``+ 1``. ``K = 0`` gives +0.0."""
    lanes = MATMUL_LANES

    def body(a64: np.ndarray, bk: np.ndarray) -> np.ndarray:
        k = a64.shape[-1]
        chains = _Chains(lanes, (*a64.shape[:-1], bk.shape[-1]))
        for k0 in range(0, k, lanes):
            _step(chains, a64, bk, k0, min(k0 + lanes, k))
        return _halving_tree(chains.acc)

    return _column_chunks(a, b, lanes, body)


def blocks32_matmul(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """``a @ b`` (f32, ``[..., M, K] x [..., K, N]``) in spec §5 kernel A's order (the
    sum before the scale): accumulators ``c0..c3`` of 8 lanes from +0.0, over each
    whole block of 32 ``k``, ``c_i[l] = fma(a[o + 8i + l], b[o + 8i + l], c_i[l])``;
    leftover whole groups of 8 into ``c0``; ``v = (c0 + c1) + (c2 + c3)``,
    ``s_i = v[i] + v[i + 4]``, ``dot = (s0 + s1) + (s2 + s3)``; then the last
    ``K mod 8`` terms, each multiplied, then added, in order."""

    def body(a64: np.ndarray, bk: np.ndarray) -> np.ndarray:
        k = a64.shape[-1]
        chains = _Chains(BLOCK, (*a64.shape[:-1], bk.shape[-1]))  # chain 8 * i + l: c_i[l]
        whole, groups = k - k % BLOCK, k - k % GROUP
        for k0 in range(0, whole, BLOCK):
            _step(chains, a64, bk, k0, k0 + BLOCK)
        for k0 in range(whole, groups, GROUP):  # leftover groups of 8: c0's lanes
            _step(chains, a64, bk, k0, k0 + GROUP)
        c = chains.acc.reshape(4, GROUP, *chains.acc.shape[1:])
        v = (c[0] + c[1]) + (c[2] + c[3])
        s = v[:4] + v[4:]
        dot = (s[0] + s[1]) + (s[2] + s[3])
        lhs = a64.astype(np.float32)
        for col in range(groups, k):  # the tail: f32 multiply, then f32 add
            dot = dot + lhs[..., :, col, None] * bk[col, ..., None, :]
        return dot

    return _column_chunks(a, b, BLOCK, body)


I8_ACCUMULATORS = 4
"""Kernel B: whole blocks go four at a time into four accumulators of ``GROUP`` lanes,
each lane the integer dot product of 4 columns (``BLOCK = 4 * GROUP``)."""


def blocks_i8_matmul(xq: ArrayLike, xs: ArrayLike, w: ArrayLike) -> np.ndarray:
    """``graph.matmul_i8``: spec §5 kernel B's ``total`` for ``xq`` i8 ``[M, K]``,
    its block scales ``xs`` f32 ``[M, ceil(K / 32)]`` and ``w`` i8 ``[K, N]``
    (``dialects/graph/primitives.py``'s ``MatmulI8Op``): per whole block ``b``
    and lane ``l`` the integer ``p = sum_{j<4} (w + 128) * xq`` over columns
    ``32b + 4l + j``; ``acc_(b mod 4)[l] = fma(f32(p), xs[b], acc[l])``, the whole
    blocks after the last group of four into ``acc_0``; the tree
    ``(a0 + a1) + (a2 + a3)``, ``v[i] + v[i + 4]``, ``(s0 + s1) + (s2 + s3)``; then
    the last ``K mod 32`` columns: ``total + f32(sum (w + 128) * xq) * xs[last]``.

    The integers are exact in f64 (``|p| <= 2^17``, any order of the sum), and so
    are their products with an f32 scale; the FMA rounds once (``_Chains``)."""
    xq8, w8 = np.asarray(xq), np.asarray(w)
    scale = np.asarray(xs, np.float32)
    if xq8.dtype != np.int8 or w8.dtype != np.int8 or xq8.ndim != 2 or w8.ndim != 2 \
            or scale.ndim != 2:
        raise ValueError(f"expected i8 [M, K], f32 [M, ceil(K / 32)] and i8 [K, N], got "
                         f"{xq8.dtype} {xq8.shape}, {scale.dtype} {scale.shape} and "
                         f"{w8.dtype} {w8.shape}")
    m, k = xq8.shape
    if scale.shape != (m, -(-k // BLOCK)):
        raise ValueError(f"expected block scales of shape {(m, -(-k // BLOCK))} for "
                         f"xq {xq8.shape}, got {scale.shape}")
    whole = k // BLOCK
    grouped = whole - whole % I8_ACCUMULATORS  # blocks taken four at a time
    lanes = xq8[:, :whole * BLOCK].astype(np.float64).reshape(m, whole, GROUP, BLOCK // GROUP)
    lanes = np.ascontiguousarray(lanes.transpose(1, 2, 0, 3))  # [block, lane, M, 4]
    tail = xq8[:, whole * BLOCK:].astype(np.float64)

    def body(_: np.ndarray, wk: np.ndarray) -> np.ndarray:
        n = wk.shape[-1]
        u = wk.astype(np.float64) + 128.0  # w + 128 (w XOR 0x80 as u8): exact
        acc = [_Chains(GROUP, (m, n)) for _ in range(I8_ACCUMULATORS)]
        for b in range(whole):
            block = u[b * BLOCK:(b + 1) * BLOCK].reshape(GROUP, BLOCK // GROUP, n)
            p = np.matmul(lanes[b], block)  # [lane, M, n]: exact integers
            chains = acc[b % I8_ACCUMULATORS if b < grouped else 0]
            chains.step(p, scale[None, :, b:b + 1], GROUP)
        a0, a1, a2, a3 = (c.acc for c in acc)
        v = (a0 + a1) + (a2 + a3)
        s = v[:4] + v[4:]
        total = (s[0] + s[1]) + (s[2] + s[3])
        if tail.shape[1]:  # the tail: one integer sum, multiplied, then added
            p_tail = (tail @ u[whole * BLOCK:]).astype(np.float32)
            total = total + p_tail * scale[:, whole:whole + 1]
        return total

    return _column_chunks(xq8, w8, BLOCK, body)


def sequential_sum(x: ArrayLike, axis: int) -> np.ndarray:
    """The sum over ``axis`` (kept, size 1) in index order from +0.0, each add
    rounded to the dtype (``graph.reduce_sum``'s ``order = "sequential"``); an
    integer sum wraps, as in any order. An empty axis gives 0."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return np.sum(x, axis=axis, keepdims=True, dtype=x.dtype)
    rows = np.moveaxis(x, axis, 0)
    total = np.zeros(rows.shape[1:], x.dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        for row in rows:
            total = total + row
    return np.expand_dims(total, axis)


def round_half_away(x: ArrayLike) -> np.ndarray:
    """C's ``roundf``: the nearest integer, halves away from zero, exactly
    (``graph.round``): ``t = trunc(x)``, then ``t + copysign(1, x)`` where
    ``|x - t| >= 0.5`` (the fraction ``x - t`` is exact), else ``t`` (so ``-0.4``
    gives ``-0.0``); NaN and the infinities stay."""
    x = np.asarray(x)
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):
        away = np.abs(x - t) >= 0.5  # inf - inf is NaN: not away
    return np.where(away, t + np.copysign(x.dtype.type(1), x), t).astype(x.dtype)


def lanes_sum(x: ArrayLike, axis: int) -> np.ndarray:
    """The f32 sum over ``axis`` (kept, size 1) in the compiler's default order:
    16 partials from +0.0, ``p[k mod 16] += x_k`` for ``k`` ascending (each add
    rounded to f32), then the halving tree. An empty axis gives +0.0."""
    rows = np.moveaxis(np.asarray(x, np.float32), axis, 0)
    lanes = MATMUL_LANES
    acc = np.zeros((lanes, *rows.shape[1:]), np.float32)
    k = rows.shape[0]
    with np.errstate(invalid="ignore", over="ignore"):
        for k0 in range(0, k, lanes):
            n = min(lanes, k - k0)
            acc[:n] = acc[:n] + rows[k0:k0 + n]
        total = _halving_tree(acc)
    return np.expand_dims(total, axis)


# --------------------------------------------------------------------------
# the C library's f32 functions


def _libm() -> ctypes.CDLL:
    name = ctypes.util.find_library("m")
    if name is None:
        raise OSError("the C math library (libm) was not found: the exact interpreter "
                      "needs its sinf and cosf")
    return ctypes.CDLL(name)


class _LibmFunction:
    """A C library ``float f(float)`` applied to every element (f32 in, f32 out)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._fn: Callable[[float], float] | None = None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self._fn is None:
            fn = getattr(_libm(), self.name)
            fn.argtypes, fn.restype = [ctypes.c_float], ctypes.c_float
            self._fn = fn
        bits = np.ascontiguousarray(x, np.float32).view(np.uint32).ravel()
        # one call per distinct bit pattern (not value: sin(-0.0) is -0.0)
        patterns, inverse = np.unique(bits, return_inverse=True)
        fn = self._fn
        out = np.fromiter((fn(v) for v in patterns.view(np.float32).tolist()), np.float32,
                          len(patterns))
        return out[inverse].reshape(np.shape(x))


LIBM: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    name: _LibmFunction(f"{name}f") for name in ("sin", "cos")
}
"""``sin``, ``cos`` as the generated C computes them (libm's ``sinf``, ``cosf``,
one call per distinct value); ``exp`` is the model's own (``ir/expf.py``)."""

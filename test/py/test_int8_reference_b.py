"""The tests' reference of spec §5 kernel B (``_int8_reference``: quantize_activations,
kernel_b_total, kernel_b_offset, kernel_b), checked against values worked out by
hand, so that the tests that claim kernel B bitwise rest on the spec, not on
the code they test.

Claims:

* ``roundf`` halves away from zero, exactly: 0.49999997 gives 0 (where
  ``floor(|q| + 0.5)`` in f32 gives 1), 0.5 gives 1, -2.5 gives -3;
* the activation scale is per block of 32 columns (the tail its own block,
  over its own columns): ``max|x| / 127``, 1.0 for an all-zero block;
* ``total``: lane ``l`` of a block holds columns ``4l .. 4l + 3``; blocks go
  four at a time into accumulators ``b mod 4``, the whole blocks after the
  last group of four into accumulator 0; the reduction tree is kernel A's;
  the tail is multiplied, then added (not fused), each shown by a case where
  the wrong choice gives other bits (2**24 absorbs a 1);
* ``offset = 128 * off``, ``off`` summed in block order, the tail included;
* ``kernel_b`` is ``(total - offset) * scale``: exactly ``sum w * x * scale``
  when every value is exact; K = 32, 128, 160, 33, 1 among the cases;
* against float64: the error of kernel B is the quantization's (within the
  bound half a step of each operand gives), and against the product of the
  dequantized operands only the f32 roundings remain.
"""

from __future__ import annotations

import numpy as np
import pytest
from _int8_reference import (
    kernel_b,
    kernel_b_offset,
    kernel_b_total,
    quantize_activations,
    quantize_rows,
    roundf,
)

F32 = np.float32
TWO24 = 2.0**24
BLOCK_COLUMNS = 32  # spec §5: activation blocks of 32 columns


def _bits_equal(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32), np.asarray(want, F32).view(np.uint32))


# --------------------------------------------------------------------------
# the activations


def test_roundf_halves_away_and_the_049999997_case() -> None:
    just_below = F32(0.49999997)
    assert just_below == F32(0.5) - F32(2.0**-25)  # the f32 just below 0.5
    assert np.floor(just_below + F32(0.5)) == 1  # floor(|q| + 0.5) in f32 goes wrong
    values = [0.49999997, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -0.49999997, 126.5, -126.5,
              3.4999998, 0.0, -0.0, 1.0, 8388607.5, 2.0**30]
    want = [0, 1, -1, 2, -2, 3, -3, -0, 127, -127, 3, 0, -0, 1, 8388608, 2.0**30]
    np.testing.assert_array_equal(roundf(np.array(values, F32)), want)
    assert np.signbit(roundf(np.array([-0.3], F32)))[0]  # roundf(-0.3) is -0.0


def test_quantize_rounds_half_away_with_scale_one() -> None:
    """max|x| = 127 gives xs = 1.0 exactly: xq is roundf(x) itself."""
    x = np.zeros((1, 32), F32)
    row = [127.0, 0.49999997, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, -0.49999997, 126.5, -126.5,
           3.4999998, 0.0, -0.0, 1.0, -127.0]
    x[0, :len(row)] = row
    xq, xs = quantize_activations(x)
    want = np.zeros(32, np.int8)
    want[:len(row)] = [127, 0, 1, -1, 2, -2, 3, -3, 0, 127, -127, 3, 0, 0, 1, -127]
    assert (xq.dtype, xq.shape, xs.dtype, xs.shape) == (np.int8, (1, 32), np.float32, (1, 1))
    np.testing.assert_array_equal(xq[0], want)
    _bits_equal(xs, [[1.0]])


def test_an_all_zero_block_has_scale_one() -> None:
    """Block 0 all zero (signed zeros too): scale 1.0, xq 0. Block 1: max 15.875 =
    127 / 8, so xs = 0.125 exactly and x / xs is exact."""
    x = np.zeros((2, 64), F32)
    x[0, 3] = x[1, 7] = -0.0
    x[:, 32:36] = [-15.875, 0.0625, -0.1875, 0.125]  # / 0.125: -127, 0.5, -1.5, 1
    xq, xs = quantize_activations(x)
    _bits_equal(xs, [[1.0, 0.125], [1.0, 0.125]])
    want = np.zeros(64, np.int8)
    want[32:36] = [-127, 1, -2, 1]
    np.testing.assert_array_equal(xq, [want, want])


def test_the_tail_is_a_block_over_its_own_columns() -> None:
    """K = 33: block 0 (columns 0..31, all 2.0), and the tail (column 32, -3.0)
    with its own scale 3 / 127; K = 1: the tail alone."""
    x = np.full((1, 33), 2.0, F32)
    x[0, 32] = -3.0
    xq, xs = quantize_activations(x)
    _bits_equal(xs, [[F32(2.0) / F32(127.0), F32(3.0) / F32(127.0)]])
    np.testing.assert_array_equal(xq, [[127] * 32 + [-127]])
    xq, xs = quantize_activations(np.array([[0.0], [5.0], [-0.25]], F32))
    _bits_equal(xs, [[1.0], [F32(5.0) / F32(127.0)], [F32(0.25) / F32(127.0)]])
    np.testing.assert_array_equal(xq, [[0], [127], [-127]])


def test_non_finite_activations_are_refused() -> None:
    with pytest.raises(ValueError, match="finite activations only"):
        quantize_activations(np.array([[1.0, np.nan]], F32))


# --------------------------------------------------------------------------
# the total: lanes, accumulators, tree, tail


def _one_row(k: int, ones: dict[int, int], xs: list[float]) -> tuple[np.ndarray, ...]:
    """``xq`` [1, k] with ``xq[col] = value`` for ``ones``, and weights -127 there
    (``w + 128 = 1``, so each such column adds ``value`` to its lane's integer)."""
    xq = np.zeros((1, k), np.int8)
    q = np.zeros((1, k), np.int8)
    for col, value in ones.items():
        xq[0, col], q[0, col] = value, -127
    return xq, np.array([xs], F32), q


def test_lane_l_is_columns_4l_to_4l_plus_3() -> None:
    """K = 64 (two whole blocks, fewer than four: both into accumulator 0). Block 0
    (xs 2**24) puts 2**24 in lane 0; block 1 (xs 1) columns 36 and 37, both lane 1
    (4l + j), put 2 there: s0 = 2**24 and s1 = 2, total 2**24 + 2. Kernel A's
    layout (lane = column mod 8) would put them in lanes 4 and 5, where s0 =
    2**24 + 1 rounds to 2**24, s1 = 1, and the total 2**24 + 1 rounds to 2**24."""
    total = kernel_b_total(*_one_row(64, {0: 1, 36: 1, 37: 1}, [TWO24, 1.0]))
    _bits_equal(total, [[TWO24 + 2]])


def test_blocks_after_the_last_group_of_four_go_into_accumulator_0() -> None:
    """K = 192: blocks 0..3 into accumulators 0..3, blocks 4 and 5 into 0. Lane 0
    gets 1 from blocks 0, 1 and 4 (xs 1) and 2**24 from block 5 (xs 2**24): a0 =
    2**24 + 2, a1 = 1, v = (a0 + a1) + (a2 + a3) = 2**24 + 3, a tie: 2**24 + 4. Block
    5 into accumulator 5 mod 4 = 1 instead: a1 = fma(1, 2**24, 1) = 2**24, a0 = 2,
    v = 2**24 + 2."""
    xq, xs, q = _one_row(192, {0: 1, 32: 1, 128: 1, 160: 1}, [1, 1, 1, 1, 1, TWO24])
    _bits_equal(kernel_b_total(xq, xs, q), [[TWO24 + 4]])


def test_four_blocks_and_the_tree() -> None:
    """K = 128: one group, a0 = 2**24 (block 0, xs 2**24), a1 = a2 = a3 = 1:
    (a0 + a1) + (a2 + a3) = 2**24 + 2 (a0 + a1 = 2**24 + 1 rounds to 2**24);
    summed one after another the 1s would all be lost (2**24)."""
    xq, xs, q = _one_row(128, {0: 1, 32: 1, 64: 1, 96: 1}, [TWO24, 1, 1, 1])
    _bits_equal(kernel_b_total(xq, xs, q), [[TWO24 + 2]])


def test_five_blocks() -> None:
    """K = 160: block 4 (xs 2**24) after the group into a0, on top of block 0's 1
    (fma: 2**24 + 1 rounds to 2**24); a1 = a2 = a3 = 1: (2**24 + 1) + 2 gives
    2**24 + 2. Dropping block 4 would give 4."""
    xq, xs, q = _one_row(160, {0: 1, 32: 1, 64: 1, 96: 1, 128: 1}, [1, 1, 1, 1, TWO24])
    _bits_equal(kernel_b_total(xq, xs, q), [[TWO24 + 2]])


def test_the_tail_is_multiplied_then_added() -> None:
    """K = 33: block 0 gives -3 (xq -1, w + 128 = 3), the tail 3 * (1 + 2**-23):
    rounded, the product is 3 + 1.5 ulp, a tie, so 3 + 2**-21, and the total
    2**-21. A fused multiply-add would give 3 * 2**-23."""
    xq = np.zeros((1, 33), np.int8)
    q = np.zeros((1, 33), np.int8)
    xq[0, 0], q[0, 0] = -1, -125
    xq[0, 32], q[0, 32] = 1, -125
    xs = np.array([[1.0, 1.0 + 2.0**-23]], F32)
    _bits_equal(kernel_b_total(xq, xs, q), [[2.0**-21]])


def test_k_is_one() -> None:
    """Only a tail: 0 + f32(5 * (-126 + 128)) * 0.5 = 5."""
    total = kernel_b_total(np.array([[5]], np.int8), np.array([[0.5]], F32),
                           np.array([[-126]], np.int8))
    _bits_equal(total, [[5.0]])


def test_k_32_integers_with_plus_128() -> None:
    """K = 32 with scale 1: the total is the integer sum of (w + 128) * xq over the
    block (every value exact), for each of 3 rows and 5 output rows."""
    rng = np.random.default_rng(32)
    xq = rng.integers(-127, 128, (3, 32)).astype(np.int8)
    q = rng.integers(-127, 128, (5, 32)).astype(np.int8)
    want = [[sum((int(w) + 128) * int(x) for w, x in zip(qr, xr, strict=True)) for qr in q]
            for xr in xq]
    _bits_equal(kernel_b_total(xq, np.ones((3, 1), F32), q), want)


# --------------------------------------------------------------------------
# the offset and the whole kernel


def test_offset_in_block_order() -> None:
    """K = 96: block sums 1, 1, 1 with scales 2**24, 1, 1: off = (2**24 + 1) + 1,
    each 1 lost to the tie, 2**24; offset 128 * 2**24 = 2**31. Any other order
    (the 1s first) gives 2**24 + 2."""
    xq = np.zeros((1, 96), np.int8)
    xq[0, [5, 40, 90]] = 1
    _bits_equal(kernel_b_offset(xq, np.array([[TWO24, 1, 1]], F32)), [2.0**31])


def test_offset_includes_the_tail() -> None:
    """K = 40: block 0 sums to 3 (xs 0.5), the tail (columns 32..39) to -2 (xs
    0.25): off = 1.5 - 0.5 = 1, offset 128 (without the tail: 192)."""
    xq = np.zeros((2, 40), np.int8)
    xq[:, [0, 1, 2]] = 1
    xq[:, [33, 39]] = -1
    _bits_equal(kernel_b_offset(xq, np.array([[0.5, 0.25]] * 2, F32)), [128.0, 128.0])


@pytest.mark.parametrize("k", [32, 33, 40, 128, 160, 1])
def test_kernel_b_is_the_dot_product_when_everything_is_exact(k: int) -> None:
    """Integer activations with 127 in every block: xs = 1, xq = x; then the +128
    and the offset cancel exactly and y = (sum w * x) * scale, scale a power of two."""
    rng = np.random.default_rng(k)
    x = rng.integers(-126, 127, (2, k)).astype(F32)
    x[:, ::BLOCK_COLUMNS] = 127.0
    x[1, ::BLOCK_COLUMNS] = -127.0
    q = rng.integers(-127, 128, (3, k)).astype(np.int8)
    scale = np.array([0.5, 2.0, 0.25], F32)
    want = [[sum(int(w) * int(v) for w, v in zip(qr, xr, strict=True)) * float(s)
             for qr, s in zip(q, scale, strict=True)] for xr in x]
    _bits_equal(kernel_b(x, q, scale), want)


@pytest.mark.parametrize(("m", "k", "n"), [(3, 896, 64), (2, 4864, 16), (4, 77, 9)])
def test_kernel_b_against_float64(m: int, k: int, n: int) -> None:
    """Random weights (quantized as spec §5 says) and activations. Against the
    float64 product of the dequantized operands only f32 roundings remain (a few
    units of 2**-24 per block relative to the sum of |terms|, the +128 included);
    against the float64 product of the original operands the error is within the
    bound half a quantization step of each operand gives."""
    rng = np.random.default_rng(m * k + n)
    w = (rng.standard_normal((n, k)) * 0.05).astype(F32)
    x = rng.standard_normal((m, k)).astype(F32)
    x[0, :32] = 0.0  # an all-zero block
    q, scale = quantize_rows(w)
    y = kernel_b(x, q, scale).astype(np.float64)

    xq, xs = quantize_activations(x)
    cols = np.arange(k) // BLOCK_COLUMNS
    x_hat = xq.astype(np.float64) * xs.astype(np.float64)[:, cols]
    w_hat = q.astype(np.float64) * scale.astype(np.float64)[:, None]
    rounding = (abs(q.astype(np.float64)) + 128) * scale.astype(np.float64)[:, None]
    magnitude = np.abs(x_hat) @ rounding.T
    blocks = -(-k // BLOCK_COLUMNS)
    assert (np.abs(y - x_hat @ w_hat.T) <= (blocks + 16) * 2.0**-24 * magnitude).all()

    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    step_x = xs.astype(np.float64)[:, cols] * (0.5 + 1e-5)
    step_w = scale.astype(np.float64) * (0.5 + 1e-5)  # per output row
    bound = step_x @ np.abs(w64).T + np.abs(x_hat).sum(axis=1)[:, None] * step_w[None, :]
    error = np.abs(y - x64 @ w64.T)
    assert (error <= bound + (blocks + 16) * 2.0**-24 * magnitude).all()
    assert (error <= 0.01 * (np.abs(x64) @ np.abs(w64).T)).all()  # small, as int8 goes

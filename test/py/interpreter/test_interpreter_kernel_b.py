"""The interpreter's semantics of spec §5 kernel B's primitives (``interpreter/exact.py``,
``run_graph``): ``graph.round``, ``graph.reduce_sum`` with ``order = "sequential"``
and ``graph.matmul_i8``.

Claims:

* ``round_half_away`` is C's ``roundf``, bit for bit the C library's own (called
  through ctypes) on random magnitudes, every half, the f32 just below each
  half (0.49999997 among them), signed zeros, subnormals, infinities (NaN
  stays NaN), and the tests' reference ``roundf`` on the finite ones;
* ``sequential_sum`` adds in index order from +0.0 (a case where any other
  order gives other bits), integers wrap;
* ``blocks_i8_matmul`` is bit for bit the tests' reference
  ``_int8_reference.kernel_b_total`` (written from the spec alone): K with and
  without tails (1, 7, 31, 32, 33, 64, 96, 128, 131, 160, 192, 224, 0), N = 0, the
  model's shapes at 1 and 7 rows (64 rows in a slow test), block scales over
  many magnitudes, all-zero and saturated (±127) activations;
* ``run_graph`` gives those semantics in both modes (they are exact);
* bad arguments are a ValueError naming the shapes.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np
import pytest
from _int8_reference import kernel_b_total
from _int8_reference import roundf as ref_roundf
from _numerics import assert_bitwise, rng_for

from nanocompile.dialects import graph as g
from nanocompile.frontend import GraphBuilder
from nanocompile.interpreter import run_graph
from nanocompile.interpreter.exact import blocks_i8_matmul, round_half_away, sequential_sum

F32 = np.float32


def _libm_roundf(x: np.ndarray) -> np.ndarray:
    name = ctypes.util.find_library("m")
    if name is None:
        pytest.skip("no C math library (libm) to compare roundf with")
    fn = ctypes.CDLL(name).roundf
    fn.argtypes, fn.restype = [ctypes.c_float], ctypes.c_float
    return np.array([fn(v) for v in x.tolist()], F32)


def _round_cases() -> np.ndarray:
    rng = rng_for("round", 0)
    halves = (np.arange(-300, 300) + F32(0.5)).astype(F32)
    below = np.nextafter(halves, F32(0)).astype(F32)  # 0.49999997, 1.4999999, ...
    above = np.nextafter(halves, halves * F32(2)).astype(F32)
    wide = (rng.standard_normal(20_000) * F32(10.0) ** rng.integers(-8, 9, 20_000)).astype(F32)
    edges = np.array([0.0, -0.0, 0.49999997, -0.49999997, 2.0**23 - 0.5, -(2.0**23) + 0.5,
                      2.0**23, 2.0**24 + 2, 1e-40, -1e-40, 3.4e38, -3.4e38, np.inf, -np.inf],
                     F32)
    return np.concatenate([halves, below, above, wide, edges])


def test_round_is_c_roundf() -> None:
    x = _round_cases()
    got = round_half_away(x)
    assert got.dtype == np.float32
    assert_bitwise(got, _libm_roundf(x), "round_half_away vs libm roundf")
    np.testing.assert_array_equal(got.astype(np.float64), ref_roundf(x))
    nan = round_half_away(np.array([np.nan, -np.nan], F32))
    assert np.isnan(nan).all()


def test_sequential_sum_in_index_order() -> None:
    """2**24, then three 1s: each 1 is lost to the tie (2**24 + 1 rounds to 2**24);
    the 1s first would give 2**24 + 4 (pairwise: 2**24 + 2)."""
    x = np.array([[2.0**24, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 2.0**24]], F32)
    assert_bitwise(sequential_sum(x, 1), np.array([[2.0**24], [2.0**24 + 4]], F32), "rows")
    assert_bitwise(sequential_sum(x.T, 0), np.array([[2.0**24, 2.0**24 + 4]], F32), "axis 0")
    ints = np.array([[100, 100]], np.int8)
    np.testing.assert_array_equal(sequential_sum(ints, 1), [[-56]])  # wraps
    assert_bitwise(sequential_sum(np.zeros((3, 0), F32), 1), np.zeros((3, 1), F32), "empty")


def _kernel_b_case(rng: np.random.Generator, m: int, k: int, n: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xq = rng.integers(-127, 128, (m, k)).astype(np.int8)
    xq[rng.random((m, k)) < 0.1] = 0
    if m > 1 and k:
        xq[1, : min(k, 32)] = 0  # an all-zero block
    if m > 2:
        xq[2] = np.where(rng.random(k) < 0.5, 127, -127)  # saturated
    blocks = -(-k // 32)
    mantissa = rng.uniform(1, 2, (m, blocks))
    xs = (mantissa * 2.0 ** rng.integers(-20, 6, (m, blocks))).astype(F32)
    q = rng.integers(-127, 128, (n, k)).astype(np.int8)
    return xq, xs, q


@pytest.mark.parametrize(("m", "k", "n"), [
    (1, 1, 3), (3, 7, 5), (2, 31, 4), (1, 32, 2), (5, 33, 8), (4, 64, 17), (3, 96, 6),
    (7, 128, 9), (64, 131, 5), (3, 160, 11), (2, 192, 7), (4, 224, 3), (2, 0, 4), (3, 40, 0)])
def test_matmul_i8_small_shapes_and_tails(m: int, k: int, n: int) -> None:
    xq, xs, q = _kernel_b_case(rng_for("matmul_i8", m * 1000 + k * 10 + n), m, k, n)
    assert_bitwise(blocks_i8_matmul(xq, xs, q.T), kernel_b_total(xq, xs, q),
                   f"matmul_i8 {m}x{k}x{n}")


MODEL_SHAPES = {"q/o": (896, 896), "k/v": (128, 896), "gate/up": (4864, 896),
                "down": (896, 4864)}


@pytest.mark.parametrize("rows", [1, 7])
@pytest.mark.parametrize("shape", list(MODEL_SHAPES))
def test_matmul_i8_model_shapes(shape: str, rows: int) -> None:
    n, k = MODEL_SHAPES[shape]
    xq, xs, q = _kernel_b_case(rng_for("matmul_i8-model", rows * 7 + n), rows, k, n)
    assert_bitwise(blocks_i8_matmul(xq, xs, q.T), kernel_b_total(xq, xs, q),
                   f"matmul_i8 {shape}, {rows} rows")


@pytest.mark.slow  # 64 rows of the largest shapes
@pytest.mark.parametrize("shape", ["gate/up", "down"])
def test_matmul_i8_64_rows(shape: str) -> None:
    n, k = MODEL_SHAPES[shape]
    xq, xs, q = _kernel_b_case(rng_for("matmul_i8-64", n), 64, k, n)
    assert_bitwise(blocks_i8_matmul(xq, xs, q.T), kernel_b_total(xq, xs, q),
                   f"matmul_i8 {shape}, 64 rows")


def test_matmul_i8_checks_its_arguments() -> None:
    xq, xs, q = np.zeros((2, 40), np.int8), np.zeros((2, 2), F32), np.zeros((40, 3), np.int8)
    with pytest.raises(ValueError, match=r"expected block scales of shape \(2, 2\) for xq "
                                         r"\(2, 40\), got \(2, 1\)"):
        blocks_i8_matmul(xq, xs[:, :1], q)
    with pytest.raises(ValueError, match=r"expected i8 \[M, K\], f32 \[M, ceil\(K / 32\)\] "
                                         r"and i8 \[K, N\], got float32"):
        blocks_i8_matmul(xq.astype(F32), xs, q)


def _kernel_b_graph(k: int, n: int) -> g.GraphFuncOp:
    gb = GraphBuilder("kb")
    xq = gb.input("xq", "i8", ["m", k])
    xs = gb.input("xs", "f32", ["m", -(-k // 32)])
    w = gb.input("w", "i8", [n, k])
    wt = g.PermuteOp(w.value, [1, 0])
    total = g.MatmulI8Op(xq.value, xs.value, gb.add(wt).value)
    gb.output("total", gb.add(total))
    gb.output("round", gb.add(g.RoundOp(xs.value)))
    gb.output("off", gb.add(g.ReduceSumOp(xs.value, 1, order="sequential")))
    return gb.finish()


@pytest.mark.parametrize("exact", [False, True])
def test_run_graph_means_the_same_in_both_modes(exact: bool) -> None:
    k, n = 77, 6
    xq, xs, q = _kernel_b_case(rng_for("kb-graph", 0), 5, k, n)
    xs[0, 0] = 2.0**24
    xs[0, 1:] = 1.0
    out = run_graph(_kernel_b_graph(k, n), {"xq": xq, "xs": xs, "w": q}, {}, exact=exact)
    assert_bitwise(out["total"], kernel_b_total(xq, xs, q), "total")
    assert_bitwise(out["round"], _libm_roundf(xs.ravel()).reshape(xs.shape), "round")
    want_off = np.zeros(5, F32)
    for b in range(xs.shape[1]):  # one f32 add after another
        want_off = (want_off + xs[:, b]).astype(F32)
    assert_bitwise(out["off"], want_off[:, None], "sequential sum")
    assert out["off"][0, 0] == 2.0**24  # the 1s after 2**24 are lost: the order is seen

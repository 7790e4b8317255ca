"""The interpreter's exact arithmetic (``interpreter/exact.py``) and its exact
mode (``run_graph(..., exact=True)``).

Claims:

* ``fma_f32`` is one IEEE fused multiply-add in f32, bit for bit the tests'
  reference (``_fma_reference.fma_f32``, itself checked against exact
  rationals): random magnitudes, cancellation, f32 midpoints the f64 sum
  lands on (where rounding twice goes wrong), subnormal results, zeros and
  the special values;
* ``blocks32_matmul`` (``graph.matmul`` with ``order = "blocks32"``, in
  either mode) is spec §5 kernel A's sum, bit for bit the tests' reference
  (``_int8_reference.kernel_a_dot``): K with and without tails (not a
  multiple of 32 or of 8), the model's shapes, 1, 7 and 64 rows, batched;
* ``lanes_matmul`` and ``lanes_sum`` are the compiler's default order, bit
  for bit ``_fma_reference``'s;
* the exact mode gives the compiled C's bits (unscheduled, and with the
  host's default schedules): single primitives (exp, sin, cos over many
  magnitudes, f32 sums, batched matmuls) and the whole tiny Qwen2 model with
  f32 and bf16 weights: every position's logits of the prompt, each cached
  decode step's, and the KV cache (int8: ``models/test_int8_model.py``);
* the default mode is unchanged (NumPy's matmul and exp).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _fma_reference import fma_f32 as ref_fma
from _fma_reference import lanes_matmul as ref_lanes_matmul
from _fma_reference import lanes_sum as ref_lanes_sum
from _int8_reference import kernel_a_dot
from _numerics import assert_bitwise, random_f32, rng_for
from _prompts import PROMPTS, prompt_ids
from xdsl.dialects.builtin import ModuleOp

from nanocompile.backend.runtime import CompiledBackend
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program
from nanocompile.dialects import graph as g
from nanocompile.frontend import GraphBuilder
from nanocompile.inference.engine import Engine, SnapshotWeights
from nanocompile.interpreter import InterpreterBackend, run_graph
from nanocompile.interpreter.exact import (
    MATMUL_LANES,
    blocks32_matmul,
    fma_f32,
    lanes_matmul,
    lanes_sum,
)
from nanocompile.lowering.builder import MATMUL_LANES as LOWERING_LANES
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2


def test_lanes_constant_is_the_lowerings() -> None:
    assert MATMUL_LANES == LOWERING_LANES


# --------------------------------------------------------------------------
# the FMA


def _fma_same(a: np.ndarray, b: np.ndarray, c: np.ndarray, what: str) -> None:
    got, want = fma_f32(a, b, c), ref_fma(a, b, c)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions"
    assert_bitwise(np.where(nan, 0, got).astype(np.float32),
                   np.where(nan, 0, want).astype(np.float32), what)


@np.errstate(over="ignore", invalid="ignore")
def test_fma_random_and_cancelling() -> None:
    rng = rng_for("exact-fma", 0)
    n = 200_000
    mant = rng.uniform(1, 2, (3, n)) * rng.choice([-1, 1], (3, n))
    a, b, c = (np.ldexp(mant[i], rng.integers(-70, 70, n)).astype(np.float32) for i in range(3))
    _fma_same(a, b, c, "random magnitudes")
    product = (a * b).astype(np.float32)
    for what, addend in (("c = -fl(a b)", -product),  # the product's rounding error survives
                         ("one ulp off", np.nextafter(-product, np.float32(np.inf))),
                         ("nearly", -product * np.float32(1 + 2**-20))):
        _fma_same(a, b, addend, what)
    _fma_same(random_f32(rng, (50_000,)), random_f32(rng, (50_000,)),
              random_f32(rng, (50_000,)), "specials")


def test_fma_where_rounding_twice_goes_wrong() -> None:
    """The f64 sum lands exactly on an f32 midpoint, the exact sum just below or
    above it: ``c = x`` (random), ``a * b = ±ulp(x) / 2 * (1 - 2**-46)``; rounding
    the f64 sum to f32 would tie to even, the FMA must not."""
    rng = rng_for("exact-fma-mid", 0)
    x = np.ldexp(rng.uniform(1, 2, 20_000), rng.integers(-100, 100, 20_000)).astype(np.float32)
    x *= rng.choice([-1, 1], x.size).astype(np.float32)
    half_ulp = (np.spacing(np.abs(x)) / 2).astype(np.float32)
    a = (half_ulp * np.float32(1 + 2**-23) * rng.choice([-1, 1], x.size)).astype(np.float32)
    b = np.full(x.size, 1 - 2**-23, np.float32)  # a * b = ±half_ulp * (1 - 2**-46)
    s64 = a.astype(np.float64) * b.astype(np.float64) + x.astype(np.float64)
    naive = s64.astype(np.float32)
    got = fma_f32(a, b, x)
    assert (naive != got).sum() > x.size // 4  # the cases exist, and the naive way fails
    _fma_same(a, b, x, "midpoints")


def test_fma_subnormal_results_and_zeros() -> None:
    rng = rng_for("exact-fma-tiny", 0)
    n = 50_000
    a = (rng.standard_normal(n) * 1e-20).astype(np.float32)
    b = (rng.standard_normal(n) * 1e-20).astype(np.float32)
    c = (rng.standard_normal(n) * 1e-39).astype(np.float32)
    _fma_same(a, b, c, "subnormal")
    _fma_same(a, b, -(a * b).astype(np.float32), "tiny cancellation")
    zeros = np.array([0.0, -0.0], np.float32)
    za, zb, zc = np.meshgrid(zeros, zeros, zeros)
    _fma_same(za.ravel(), zb.ravel(), zc.ravel(), "signed zeros")
    _fma_same(np.float32(3.0), np.array([1, 2, 3], np.float32), np.float32(-6.0), "broadcast")


# --------------------------------------------------------------------------
# kernel A's order


def _kernel_a_case(rng: np.random.Generator, m: int, k: int, n: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    x = random_f32(rng, (m, k), specials=False)
    x[rng.random((m, k)) < 0.02] = 0.0
    q = rng.integers(-127, 128, (n, k)).astype(np.int8)
    q[:, :1] = 127
    q[rng.random((n, k)) < 0.05] = 0
    return x, q


@pytest.mark.parametrize(("m", "k", "n"), [
    (1, 1, 3), (3, 7, 5), (2, 8, 4), (7, 31, 9), (1, 32, 2), (5, 33, 8), (4, 40, 17),
    (7, 56, 6), (3, 77, 11), (64, 100, 16), (64, 131, 5), (2, 0, 4), (3, 5, 0)])
def test_blocks32_small_shapes_and_tails(m: int, k: int, n: int) -> None:
    x, q = _kernel_a_case(rng_for("blocks32", m * 1000 + k * 10 + n), m, k, n)
    assert_bitwise(blocks32_matmul(x, q.T.astype(np.float32)), kernel_a_dot(x, q),
                   f"blocks32 {m}x{k}x{n}")


MODEL_SHAPES = {"q/o": (896, 896), "k/v": (128, 896), "gate/up": (4864, 896),
                "down": (896, 4864)}


# the non-slow suite's 3-minute budget; the full suite runs it: 7 rows of the two
# largest shapes (7 rows of the others and 1 row of these stay quick)
@pytest.mark.parametrize(("shape", "rows"), [
    pytest.param(shape, rows, marks=pytest.mark.slow) if rows == 7 and shape in ("gate/up", "down")
    else (shape, rows) for rows in (1, 7) for shape in MODEL_SHAPES])
def test_blocks32_model_shapes(shape: str, rows: int) -> None:
    n, k = MODEL_SHAPES[shape]
    x, q = _kernel_a_case(rng_for("blocks32-model", rows * 7 + n), rows, k, n)
    assert_bitwise(blocks32_matmul(x, q.T.astype(np.float32)), kernel_a_dot(x, q),
                   f"blocks32 {shape}, {rows} rows")


@pytest.mark.slow  # the LM head's 136M weights, and 64 rows of the largest shapes
@pytest.mark.parametrize(("shape", "rows"), [("lm_head", 1), ("gate/up", 64), ("down", 64)])
def test_blocks32_large_shapes(shape: str, rows: int) -> None:
    n, k = (151936, 896) if shape == "lm_head" else MODEL_SHAPES[shape]
    x, q = _kernel_a_case(rng_for("blocks32-large", rows), rows, k, n)
    assert_bitwise(blocks32_matmul(x, q.T.astype(np.float32)), kernel_a_dot(x, q),
                   f"blocks32 {shape}, {rows} rows")


def test_blocks32_f32_rhs_and_batches() -> None:
    """The order does not need int8 values, and batch dims are independent."""
    rng = rng_for("blocks32-batched", 0)
    a = random_f32(rng, (3, 5, 45), specials=False)
    b = random_f32(rng, (3, 45, 7), specials=False)
    got = blocks32_matmul(a, b)
    for i in range(3):
        assert_bitwise(got[i], kernel_a_dot(a[i], b[i].T), f"batch {i}")


# --------------------------------------------------------------------------
# the default order


@pytest.mark.parametrize(("batch", "m", "k", "n"), [
    ((), 1, 1, 3), ((), 3, 15, 5), ((), 2, 16, 4), ((), 7, 17, 9), ((), 64, 100, 33),
    ((2,), 5, 64, 3), ((2, 3), 4, 37, 6), ((), 3, 0, 2), ((4,), 1, 9, 0)])
def test_lanes_matmul(batch: tuple[int, ...], m: int, k: int, n: int) -> None:
    rng = rng_for("lanes-matmul", m * 1000 + k * 10 + n)
    a = random_f32(rng, (*batch, m, k), specials=False)
    b = random_f32(rng, (*batch, k, n), specials=False)
    assert_bitwise(lanes_matmul(a, b), ref_lanes_matmul(a, b), f"lanes {batch} {m}x{k}x{n}")


@pytest.mark.parametrize(("shape", "axis"), [((5, 896), 1), ((3, 7, 40), 2), ((17, 4), 0),
                                             ((2, 0, 3), 1), ((6, 15, 2), 1), ((33,), 0)])
def test_lanes_sum(shape: tuple[int, ...], axis: int) -> None:
    x = random_f32(rng_for("lanes-sum", sum(shape)), shape, specials=False)
    got = lanes_sum(x, axis)
    assert got.shape == tuple(1 if i == axis else s for i, s in enumerate(shape))
    assert_bitwise(got, ref_lanes_sum(x, axis), f"lanes sum {shape} axis {axis}")


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match=r"expected \[\.\.\., M, K\] x \[\.\.\., K, N\]"):
        lanes_matmul(np.zeros((2, 3), np.float32), np.zeros((4, 2), np.float32))
    with pytest.raises(ValueError, match="equal batch dims"):
        blocks32_matmul(np.zeros((2, 1, 3), np.float32), np.zeros((3, 3, 2), np.float32))


# --------------------------------------------------------------------------
# the modes of run_graph


def _matmul_graph(order: str | None) -> g.GraphFuncOp:
    gb = GraphBuilder("mm")
    a = gb.input("a", "f32", [2, "m", 40])
    b = gb.input("b", "f32", [2, 40, 6])
    gb.output("y", gb.add(g.MatmulOp(a.value, b.value, order=order)))
    return gb.finish()


def test_modes() -> None:
    rng = rng_for("modes", 0)
    a = random_f32(rng, (2, 3, 40), specials=False)
    b = random_f32(rng, (2, 40, 6), specials=False)
    inputs = {"a": a, "b": b}
    plain, ordered = _matmul_graph(None), _matmul_graph("blocks32")
    assert_bitwise(run_graph(plain, inputs, {})["y"], np.matmul(a, b), "default: np.matmul")
    assert_bitwise(run_graph(plain, inputs, {}, exact=True)["y"], ref_lanes_matmul(a, b),
                   "exact: the lanes order")
    want = np.stack([kernel_a_dot(a[i], b[i].T) for i in range(2)])
    for exact in (False, True):
        assert_bitwise(run_graph(ordered, inputs, {}, exact=exact)["y"], want,
                       f"blocks32, exact={exact}")


def _primitives_graph() -> ModuleOp:
    gb = GraphBuilder("prims")
    x = gb.input("x", "f32", ["n", 37])
    w = gb.input("w", "f32", [3, 37, 21])
    gb.output("exp", x.exp())
    gb.output("sin", x.sin())
    gb.output("cos", x.cos())
    gb.output("sum", x.sum(1))
    gb.output("sum0", x.sum(0))
    xb = x.slice(0, 0, 15).reshape(3, 5, 37)
    gb.output("mm", xb @ w)
    return gb.finish_module()


def test_exact_primitives_equal_the_c() -> None:
    """exp, sin, cos over many magnitudes (the range reductions' branches), sums
    along both axes, a batched matmul with K = 37: the compiled C's bits, scalar
    and vectorized (the host's default schedules)."""
    rng = rng_for("exact-prims", 0)
    n = 4000
    x = (rng.standard_normal((n, 37)) * np.float32(10.0) ** rng.integers(-6, 3, (n, 37)))
    x = x.astype(np.float32)
    x[0, :8] = [0.0, -0.0, 88.7, -103.9, 1e-40, 3.14159265, 1e5, -2e4]
    inputs = {"x": x, "w": random_f32(rng, (3, 37, 21), specials=False)}
    module = _primitives_graph()
    got = run_graph(module, inputs, {}, exact=True)
    for schedule in (False, True):
        want = compile_program(module, {}, schedule=schedule).run(inputs)
        for name in want:
            assert_bitwise(got[name], want[name], f"exact {name} vs C (schedule={schedule})")


# --------------------------------------------------------------------------
# the whole model


class Pair:
    """One graph on the compiled C (unscheduled, and the host's schedules) and on
    the exact interpreter."""

    def __init__(self, snapshot: Path, weights: str) -> None:
        snap = Snapshot.open(snapshot)
        self.dir, self.cfg = snapshot, snap.config
        self.graph = build_qwen2(snap.config, Qwen2GraphOptions(weights=weights))
        self.weights = SnapshotWeights(snap, weights)
        self.interp = Engine(snap.config, InterpreterBackend(self.graph, self.weights,
                                                             exact=True))
        self.compiled = {
            "unscheduled": Engine(snap.config, CompiledBackend(
                compile_program(self.graph, self.weights))),
            "scheduled": Engine(snap.config, CompiledBackend(
                compile_program(self.graph, self.weights, schedule=True)))}

    def check(self, key: str, steps: tuple[int, ...] = (11, 42)) -> None:
        ids = prompt_ids(self.dir, key)
        chunks = [ids, *[[s] for s in steps]]
        size = len(ids) + len(steps)
        interp_cache = self.interp.new_cache(size)
        want = [self.interp.forward(chunk, interp_cache) for chunk in chunks]
        for kind, engine in self.compiled.items():
            cache = engine.new_cache(size)
            for i, chunk in enumerate(chunks):
                got = engine.forward(chunk, cache)
                assert got.shape == (len(chunk), self.cfg.vocab_size)  # every position
                assert_bitwise(want[i], got, f"{key}, {kind}, step {i}")
            n = cache.length
            assert n == interp_cache.length == size
            assert_bitwise(interp_cache.keys[:, :, :n], cache.keys[:, :, :n], f"{kind} keys")
            assert_bitwise(interp_cache.values[:, :, :n], cache.values[:, :, :n],
                           f"{kind} values")


@pytest.fixture(scope="module")
def tiny_f32(tiny_snapshot: Path) -> Pair:
    return Pair(tiny_snapshot, "f32")


@pytest.mark.parametrize("key", [
    pytest.param(k, marks=pytest.mark.slow) if k == "chat" else k for k in PROMPTS])
def test_tiny_f32_model_bitwise(tiny_f32: Pair, key: str) -> None:
    tiny_f32.check(key)


def test_tiny_bf16_model_bitwise(tiny_snapshot: Path) -> None:
    Pair(tiny_snapshot, "bf16").check("fibonacci")

"""Every compute primitive's compiled C kernel against the reference interpreter,
under both compile pipelines.

Each case graph below holds many outputs and is compiled twice (one gcc
invocation per pipeline, shared by a module-scoped fixture): ``fuse=False``,
the phase-2 program of one kernel per primitive, and ``fuse=True``, the
phase-3 program (graph passes ``cse, fold-constants, dce, fuse``, then one
kernel per ``graph.fused`` region). Each is run at several bindings of its
symbolic dims, always including 0 and 1; the same shared library serves every
binding. Inputs come from ``numpy.random.Generator`` with fixed seeds.

Every claim against the interpreter below is made for both programs. On top
of those, at every case and binding (``Case.run_all``):

* the optimized graph in the interpreter equals the original graph in the
  interpreter, bitwise (a ``graph.fused`` region means its ops, run in order
  by the same NumPy kernels; cse/dce only remove duplicate or dead ops and
  a folded constant is computed by the interpreter's own kernel);
* the fused program equals the unfused one, bitwise, NaN payloads and -0.0
  included: fusion moves scalar operations between kernels but never changes
  which operation produces a value, on which operands, in which order: an
  f32 sum stays one lanes loop (16 partial sums and their halving tree), a
  matmul's sum over k one lanes loop of 16 FMA chains, a max and an integer
  sum one sequential loop. Where two NaNs meet in a commutative
  add/mul, the payload is *not* fixed by the scalar code (x86 returns the
  first source operand's NaN, and gcc orders a commutative op's operands
  per instruction; ``test_fusion_primitives`` has a fused kernel choosing
  differently from the unfused ones). So the elementwise case's f32 add and
  mul outputs are compared between the programs only where they are not
  both NaN (``Case.nan_choice``); ``test_commutative_two_nans`` checks
  there what does hold, in each program: a lone NaN operand propagates
  exactly (quieted), and two NaN operands give one of their NaNs, quieted,
  whichever gcc's operand order picks. The one real exception
  found was a bug, now fixed (gcc folded a negation into a neighbouring
  operation of the same fused kernel, dropping a NaN's sign; the C target now
  flips the sign bit): ``test_fused_negation_keeps_nan_sign``.

What is claimed, and why (spec §3):

* **Bitwise** (``np.array_equal`` on the unsigned views of float results, so
  -0.0 and NaN payloads count): add sub mul div neg sqrt reciprocal
  less_equal where cast concat gather iota dim, the copy kernels, integer
  reductions, and reduce_max on data without ±0 ties or NaNs. These are
  either no arithmetic at all or one correctly rounded IEEE operation per
  element, done with the same operands in the same order as NumPy
  (``-O3 -ffp-contract=off``, no fast-math). Integer ops wrap like NumPy.
  matmul is bitwise against ``_fma_reference.lanes_matmul``, the order the
  kernels state written independently in NumPy (16 partial sums ``k mod
  16``, one correctly rounded FMA per term, the halving tree), at every
  schedule and arch (``test_scheduled_matmul_is_the_lanes_order``), and
  reduce_sum on f32 against ``lanes_sum`` (the same with adds).
  Two documented exceptions, both where IEEE 754 leaves the choice open:
  a commutative op (add, mul) whose *two* operands are NaN returns a NaN
  carrying one of the two payloads (gcc may swap the operands of a
  commutative instruction; NumPy's scalar and SIMD loops also pick
  differently), and reduce_max's ±0 ties and NaN payloads depend on the
  comparison order of NumPy's SIMD reduction. For those, the compiled result
  is checked bitwise against an explicit sequential definition instead.
* **Tolerance**: exp sin cos (glibc's libm against NumPy's own SIMD
  implementations: a bound in ulps, measured), reduce_sum on f32 and matmul
  against NumPy (the lanes order against NumPy's pairwise summation / BLAS:
  a bound proportional to the sum of the absolute terms, see ``sum_bound``
  and ``matmul_bound``); both are also bitwise against ``lanes_sum`` /
  ``lanes_matmul``.

The runtime boundary (bad arguments, out-of-range gather ids, unfitting
symbolic slices) is tested under both pipelines, and the determinism of the
emitted C for each pipeline against itself. Structural claims (copy kernels,
a transposed weight read in place) say which pipeline they are about. Known
bugs are ``xfail(strict=True)`` tests with the reproduction in their reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from _arches import arch_params
from _fma_reference import lanes_matmul, lanes_sum
from _numerics import (
    F32_U,
    ULP_BOUND,
    Arrays,
    assert_bitwise,
    matmul_bound,
    random_f32,
    rng_for,
)
from xdsl.dialects.builtin import ModuleOp

from nanocompile.backend.runtime import CompiledProgram, KernelError
from nanocompile.compiler import (
    CompileOptions,
    Pipeline,
    compile_loop,
    compile_program,
    emit_c,
    lower_to_loop,
    optimize_graph,
)
from nanocompile.dialects import graph as g
from nanocompile.dialects import loop, sched
from nanocompile.dialects.graph.signature import ArgumentError
from nanocompile.frontend import GraphBuilder, concat, gather, where
from nanocompile.interpreter import InterpreterError, run_graph
from nanocompile.ir.dtypes import numpy_dtype
from nanocompile.targets.arch import Arch

INT_DTYPES = ("i64", "i32", "i8")
NUMERIC_DTYPES = ("f32", *INT_DTYPES)
ALL_DTYPES = (*NUMERIC_DTYPES, "bool")



# --------------------------------------------------------------------------
# fixtures and helpers
# --------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(shared_kernel_cache: Path) -> Iterator[Path]:
    """The tests' shared gcc and program cache (conftest.py) for this module: the
    tests never write the user's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NANOCOMPILE_CACHE_DIR", str(shared_kernel_cache))
        yield shared_kernel_cache


PIPELINES = ("unfused", "fused")  # compile_program(fuse=False) and (fuse=True)

# Outputs exempted from bitwise fused == unfused in the sign of NaN results: none
# since the C target negates by a sign-bit flip (gcc used to fold ``(-a) * (-a)``
# into ``a * a`` in a fused kernel; ``test_fused_negation_keeps_nan_sign``).
FUSED_NAN_SIGN: frozenset[str] = frozenset()


@dataclass
class Case:
    """A graph, its weights, its optimized graph, and one compiled program per
    pipeline (``programs["unfused"]``, ``programs["fused"]``)."""

    module: ModuleOp
    optimized: ModuleOp
    weights: Arrays
    programs: dict[str, CompiledProgram]
    # outputs of a commutative f32 op whose two NaN operands' payload is gcc's
    # choice per kernel: fused and unfused need not agree where both are NaN
    nan_choice: frozenset[str] = frozenset()

    def run_all(self, inputs: Mapping[str, np.ndarray]) -> tuple[Arrays, dict[str, Arrays]]:
        """(interpreter outputs, {pipeline: compiled outputs}) for the same inputs.

        On the way it checks the claims every case shares: the optimized
        graph interprets to the same bits as the original, every compiled
        output has the interpreter's dtype and shape, and the fused program's
        outputs equal the unfused program's bit for bit (``FUSED_NAN_SIGN``
        excepted, in the sign of NaNs only; ``nan_choice`` excepted where both
        programs give a NaN)."""
        want = run_graph(self.module, inputs, self.weights)
        optimized = run_graph(self.optimized, inputs, self.weights)
        assert set(optimized) == set(want)
        for name in want:
            assert_bitwise(optimized[name], want[name], f"{name}: optimized graph (interpreter)")
        runs = {pipeline: program.run(inputs) for pipeline, program in self.programs.items()}
        for pipeline, got in runs.items():
            assert set(got) == set(want), pipeline
            for name in want:
                assert got[name].dtype == want[name].dtype, f"{name} ({pipeline})"
                assert got[name].shape == want[name].shape, f"{name} ({pipeline})"
        for name in want:
            check = assert_bitwise_but_nan_sign if name in FUSED_NAN_SIGN else assert_bitwise
            fused, unfused = runs["fused"][name], runs["unfused"][name]
            if name in self.nan_choice:
                both = np.isnan(fused) & np.isnan(unfused)
                fused, unfused = (np.where(both, np.float32(0), v).astype(np.float32)
                                  for v in (fused, unfused))
            check(fused, unfused, f"{name}: fused vs unfused")
        return want, runs


def build_case(gb: GraphBuilder, weights: Arrays | None = None,
               nan_choice: frozenset[str] = frozenset()) -> Case:
    """Compile the graph of ``gb`` once per pipeline (two gcc invocations)."""
    module = gb.finish_module()
    weights = weights or {}
    programs = {"unfused": compile_program(module, weights, fuse=False),
                "fused": compile_program(module, weights, fuse=True)}
    return Case(module, optimize_graph(module), weights, programs, nan_choice)


def launched_kernels(program: CompiledProgram) -> list[str]:
    """The kernel name of each launch of ``program``, in order."""
    return [launch.kernel_name for launch in program.program.launches()]


def assert_bitwise_but_nan_sign(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """``assert_bitwise``, except that a NaN may differ from its counterpart NaN
    in the sign bit (and in nothing else: payload and quiet bit must agree)."""
    assert got.dtype == want.dtype == np.float32, what
    both_nan = np.isnan(got) & np.isnan(want)
    sign_free = np.uint32(0x7FFFFFFF)
    assert_bitwise(np.where(both_nan, got.view(np.uint32) & sign_free, got.view(np.uint32)),
                   np.where(both_nan, want.view(np.uint32) & sign_free, want.view(np.uint32)),
                   f"{what} (NaN signs ignored)")


def random_int(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Full-range integers with the extremes and small values planted (overflow cases)."""
    info = np.iinfo(numpy_dtype(dtype))
    x = rng.integers(info.min, info.max, shape, dtype=numpy_dtype(dtype), endpoint=True)
    edges = np.array([info.min, info.max, info.min + 1, info.max - 1, -1, 0, 1, 2],
                     dtype=numpy_dtype(dtype))
    pick = rng.random(shape) < 0.3
    return np.where(pick, edges[rng.integers(0, len(edges), shape)], x)


def random_of(dtype: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "f32":
        return random_f32(rng, shape)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return random_int(rng, shape, dtype)


def to_ordered(x: np.ndarray) -> np.ndarray:
    """f32 bits as integers ordered like the floats (-0.0 and 0.0 both map to 0)."""
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(to_ordered(a) - to_ordered(b))


# --------------------------------------------------------------------------
# 1. elementwise: add sub mul div less_equal where neg exp sqrt reciprocal sin cos
# --------------------------------------------------------------------------

EW_BINDINGS = [(0, 0), (0, 5), (3, 0), (1, 1), (1, 7), (6, 1), (4, 9), (33, 17)]
BINARY = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
          "mul": lambda x, y: x * y}
COMMUTATIVE = ("add", "mul")


@pytest.fixture(scope="module")
def elementwise(kernel_cache: Path) -> Case:
    """One program: every elementwise primitive on every dtype it accepts, on
    inputs shaped ``[a, b]`` (plus a 0-d f32 and ``[n, 5]`` rows)."""
    gb = GraphBuilder("elementwise")
    cond = gb.input("cond", "bool", ["a", "b"])
    for dt in NUMERIC_DTYPES:
        x = gb.input(f"x_{dt}", dt, ["a", "b"])
        y = gb.input(f"y_{dt}", dt, ["a", "b"])
        for name, fn in BINARY.items():
            gb.output(f"{name}_{dt}", fn(x, y))
        gb.output(f"le_{dt}", x <= y)
        gb.output(f"where_{dt}", where(cond, x, y))
        gb.output(f"where_le_{dt}", where(x <= y, y, x))
        gb.output(f"neg_{dt}", -x)
        if dt == "f32":
            gb.output("div_f32", x / y)
            for name in ("exp", "sqrt", "reciprocal", "sin", "cos"):
                gb.output(f"{name}_f32", getattr(x, name)())
    s = gb.input("s", "f32", [])
    gb.output("neg_0d", -s)
    gb.output("mul_0d", s * s)
    rows = gb.input("rows", "f32", ["n", 5])
    gb.output("rows_div", rows / (rows * rows))
    return build_case(gb, nan_choice=frozenset(f"{op}_f32" for op in COMMUTATIVE))


def elementwise_inputs(rng: np.random.Generator, a: int, b: int, n: int) -> Arrays:
    inputs: Arrays = {"cond": rng.random((a, b)) < 0.5}
    for dt in NUMERIC_DTYPES:
        inputs[f"x_{dt}"] = random_of(dt, rng, (a, b))
        inputs[f"y_{dt}"] = random_of(dt, rng, (a, b))
    inputs["s"] = random_f32(rng, ())
    inputs["rows"] = random_f32(rng, (n, 5), specials=False)
    return inputs


EXACT_ELEMENTWISE = ("where", "where_le", "le", "neg", "sub")


@pytest.mark.parametrize(("index", "ab"), list(enumerate(EW_BINDINGS)))
def test_elementwise_bitwise(elementwise: Case, index: int, ab: tuple[int, int]) -> None:
    """add sub mul div less_equal where neg sqrt reciprocal, every numeric dtype,
    at every binding, both pipelines: bit for bit, NaN payloads and -0.0
    included. Integer results wrap like NumPy (the random data plants
    min/max/±1 to overflow)."""
    a, b = ab
    inputs = elementwise_inputs(rng_for("elementwise", index), a, b, n=b)
    want, runs = elementwise.run_all(inputs)
    for pipeline, got in runs.items():
        at = f"at a={a}, b={b} ({pipeline})"
        for dt in NUMERIC_DTYPES:
            for op in (*EXACT_ELEMENTWISE, *BINARY):
                name = f"{op}_{dt}"
                if dt == "f32" and op in COMMUTATIVE:
                    continue  # two-NaN positions: test_commutative_two_nans
                assert_bitwise(got[name], want[name], f"{name} {at}")
        for name in ("div_f32", "sqrt_f32", "reciprocal_f32", "neg_0d", "mul_0d", "rows_div"):
            assert_bitwise(got[name], want[name], f"{name} {at}")


# planted at the first elements of x_f32 and y_f32 by test_commutative_two_nans
# (bits): two NaNs differing in sign, payload and quiet bit, then a lone
# signaling NaN on each side
PLANTED_NANS = ((0x7FC01234, 0xFF800055), (0xFFA00777, 0x3FC00000),
                (0xC0000000, 0x7F812345))


@pytest.mark.parametrize(("index", "ab"), list(enumerate(EW_BINDINGS)))
def test_commutative_two_nans(elementwise: Case, index: int, ab: tuple[int, int]) -> None:
    """f32 add and mul, both pipelines, at every binding: what IEEE 754 and x86
    fix, not gcc's operand order.

    * At most one operand NaN: bitwise the interpreter's result; where one
      operand is NaN, exactly that NaN, quieted (its sign and payload kept).
    * Both operands NaN: one of the two operands' NaNs, quieted. IEEE 754
      leaves the choice open; x86 returns the first source operand's NaN and
      gcc may swap a commutative instruction's operands, so which of the two,
      and whether the fused and unfused programs pick alike, is not asserted
      (``run_all`` skips them there too: ``nan_choice``; a larger fused
      kernel does pick differently,
      ``test_fusion_primitives.test_two_nan_payload_is_gccs_choice``).

    Besides the random specials, ``PLANTED_NANS`` puts both cases at the
    first elements, so every binding with elements has them."""
    a, b = ab
    inputs = elementwise_inputs(rng_for("elementwise", index), a, b, n=b)
    x, y = inputs["x_f32"], inputs["y_f32"]
    xb, yb = x.view(np.uint32).reshape(-1), y.view(np.uint32).reshape(-1)
    for i, (xi, yi) in enumerate(PLANTED_NANS[:x.size]):
        xb[i], yb[i] = xi, yi
    want, runs = elementwise.run_all(inputs)
    only_x, only_y = np.isnan(x) & ~np.isnan(y), np.isnan(y) & ~np.isnan(x)
    both = np.isnan(x) & np.isnan(y)
    assert both.any() == (x.size > 0), "the planted two-NaN position is missing"
    quiet = np.uint32(1 << 22)
    x_bits, y_bits = x.view(np.uint32), y.view(np.uint32)
    for op in COMMUTATIVE:
        name = f"{op}_f32"
        for pipeline, got in runs.items():
            what = f"{name} ({pipeline}, a={a}, b={b})"
            assert_bitwise(np.where(both, 0, got[name]).astype(np.float32),
                           np.where(both, 0, want[name]).astype(np.float32), what)
            bits = got[name].view(np.uint32)
            assert (bits[only_x] == (x_bits[only_x] | quiet)).all(), \
                f"{what}: a lone NaN in x is not the result, quieted"
            assert (bits[only_y] == (y_bits[only_y] | quiet)).all(), \
                f"{what}: a lone NaN in y is not the result, quieted"
            pair = bits[both]
            ok = (pair == (x_bits[both] | quiet)) | (pair == (y_bits[both] | quiet))
            assert ok.all(), f"{what}: a two-NaN result is neither operand's NaN, quieted"


def test_elementwise_integer_wraparound(elementwise: Case) -> None:
    """Hand-picked overflow cases on i8/i32/i64, both pipelines, checked against
    two's-complement arithmetic done with Python ints (independent of NumPy)."""
    a, b = 2, 4
    inputs = elementwise_inputs(rng_for("wrap", 0), a, b, n=1)
    for dt in INT_DTYPES:
        info = np.iinfo(numpy_dtype(dt))
        lo, hi = int(info.min), int(info.max)
        inputs[f"x_{dt}"] = np.array([[hi, lo, lo, hi], [lo, -1, hi, 0]], numpy_dtype(dt))
        inputs[f"y_{dt}"] = np.array([[1, -1, -1, hi], [lo, lo, -1, lo]], numpy_dtype(dt))
    want, runs = elementwise.run_all(inputs)
    for dt in INT_DTYPES:
        bits = numpy_dtype(dt).itemsize * 8

        def wrap(v: int, bits: int = bits) -> int:
            v &= (1 << bits) - 1
            return v - (1 << bits) if v >= 1 << (bits - 1) else v

        x, y = inputs[f"x_{dt}"], inputs[f"y_{dt}"]
        for op, fn in (*BINARY.items(), ("neg", lambda p, q: -p)):
            expect = np.array([[wrap(fn(int(p), int(q))) for p, q in zip(rx, ry, strict=True)]
                               for rx, ry in zip(x, y, strict=True)], numpy_dtype(dt))
            for pipeline, got in runs.items():
                name = f"{op}_{dt} ({pipeline})"
                assert_bitwise(got[f"{op}_{dt}"], expect, f"{name} (Python ints)")
                assert_bitwise(got[f"{op}_{dt}"], want[f"{op}_{dt}"], name)
    for got in runs.values():
        assert got["neg_i8"][0, 1] == -128
        assert got["add_i32"][0, 0] == -(2**31)


# ulp bounds, compiled (the model's exp, ir/expf.py; glibc sinf/cosf) against NumPy's SIMD f32
# exp/sin/cos. Each is within 1 ulp of the exact value rounded to f32 (checked below
# against float64); NumPy documents its AVX2/AVX-512 expf within ~2.5 ulp and
# sinf/cosf within ~1.5 ulp. Measured on the development machine (x86-64,
# glibc 2.36, numpy 2.4) over 65,536 uniform arguments plus specials: exp
# 2 ulp (relative 1.8e-7), sin 1 ulp, cos 1 ulp (relative 1.2e-7). The bounds
# are the documented ones, rounded up.
TRANSCENDENTAL_RANGE = {"exp": (-87.0, 88.0), "sin": (-200.0, 200.0), "cos": (-200.0, 200.0)}
FLOAT64_REF = {"exp": np.exp, "sin": np.sin, "cos": np.cos}


@pytest.mark.parametrize("op", ["exp", "sin", "cos"])
def test_transcendental_ulps(elementwise: Case, op: str) -> None:
    """exp sin cos within ``ULP_BOUND`` ulps of NumPy (libm vs NumPy's SIMD code;
    not bitwise) and within 1 ulp of the float64 value rounded to f32, over
    65,536 values across the function's useful range plus random specials at
    every binding; NaN exactly where NumPy has NaN. Both pipelines."""
    worst = 0
    worst_rel = 0.0
    for index, (a, b) in enumerate([*EW_BINDINGS, (256, 256)]):
        rng = rng_for(f"transcendental-{op}", index)
        inputs = elementwise_inputs(rng, a, b, n=1)
        if (a, b) == (256, 256):
            lo, hi = TRANSCENDENTAL_RANGE[op]
            x = rng.uniform(lo, hi, (a, b)).astype(np.float32)
            x.ravel()[: a * 8] = rng.uniform(-1e-3, 1e-3, a * 8)  # tiny arguments too
            if op != "exp":  # a few huge arguments (argument reduction)
                x.ravel()[a * 8: a * 9] = rng.uniform(-1e5, 1e5, a)
            inputs["x_f32"] = x.astype(np.float32)
        want, runs = elementwise.run_all(inputs)
        w = want[f"{op}_f32"]
        finite = ~np.isnan(w)
        with np.errstate(over="ignore", invalid="ignore"):  # exp(1e3) = inf, as in f32
            exact = FLOAT64_REF[op](inputs["x_f32"][finite].astype(np.float64)).astype(np.float32)
        for pipeline, got in runs.items():
            c = got[f"{op}_f32"]
            assert np.array_equal(np.isnan(w), np.isnan(c)), \
                f"{op} ({pipeline}): NaN positions differ"
            if not finite.any():
                continue
            d = ulp_distance(c[finite], w[finite])
            worst = max(worst, int(d.max()))
            assert ulp_distance(c[finite], exact).max() <= 1, \
                f"{op} ({pipeline}): libm not within 1 ulp"
            ref = w[finite].astype(np.float64)
            nz = (np.abs(ref) >= np.finfo(np.float32).tiny) & np.isfinite(ref)
            if nz.any():
                rel = np.abs(c[finite][nz].astype(np.float64) - ref[nz]) / np.abs(ref[nz])
                worst_rel = max(worst_rel, float(rel.max()))
    print(f"{op}: max {worst} ulp, max relative error {worst_rel:.3g} vs NumPy")
    assert worst <= ULP_BOUND[op], f"{op}: {worst} ulp > {ULP_BOUND[op]}"
    assert worst_rel <= ULP_BOUND[op] * 2.0**-23


# --------------------------------------------------------------------------
# 2. cast: every dtype pair, bf16 -> f32 on all 65,536 bit patterns
# --------------------------------------------------------------------------

F32_INT_RANGE = {"i8": (-128.0, 127.0), "i32": (-2147483648.0, 2147483520.0),
                 "i64": (-9223372036854775808.0, 9223371487098961920.0)}


@pytest.fixture(scope="module")
def casts(kernel_cache: Path) -> Case:
    """Every cast pair (identity casts built as explicit ``graph.cast`` ops), f32 ->
    int fed only in-range values, and bf16 -> f32 from a weight and an input."""
    gb = GraphBuilder("casts")
    xs = {f"x_{dt}": gb.input(f"x_{dt}", dt, ["n", 5]) for dt in ALL_DTYPES}
    for dst in INT_DTYPES:
        xs[f"x_f32_for_{dst}"] = gb.input(f"x_f32_for_{dst}", "f32", ["n", 5])
    for src in ALL_DTYPES:
        for dst in ALL_DTYPES:
            x = xs[f"x_f32_for_{dst}" if src == "f32" and dst in INT_DTYPES else f"x_{src}"]
            gb.output(f"{src}_to_{dst}", gb.add(g.CastOp(x.value, dst)))
    bits = gb.weight("bf16_all", [65536], "bf16")
    gb.output("bf16_all_to_f32", bits.cast("f32"))
    gb.output("bf16_input_to_f32", gb.input("x_bf16", "bf16", ["n", 5]).cast("f32"))
    all_bits = np.arange(65536, dtype=np.uint16)
    return build_case(gb, {"bf16_all": all_bits})


def in_range_f32(rng: np.random.Generator, shape: tuple[int, ...], dst: str) -> np.ndarray:
    """Values whose truncation fits ``dst``: fractions of both signs, ±0, the
    exact end points, and the largest f32 below the top of the range."""
    lo, hi = F32_INT_RANGE[dst]
    x = rng.uniform(lo, hi, shape).astype(np.float32)
    small = (rng.standard_normal(shape) * 50).astype(np.float32)
    x = np.where(rng.random(shape) < 0.5, np.clip(small, lo, hi), x).astype(np.float32)
    edges = np.array([lo, hi, -0.0, 0.0, 0.5, -0.5, -0.99, 0.99], np.float32)
    if dst == "i8":
        edges = np.append(edges, np.float32([-128.9, 127.99, 100.5]))
    pick = rng.random(shape) < 0.3
    return np.where(pick, edges[rng.integers(0, len(edges), shape)], x).astype(np.float32)


@pytest.mark.parametrize("n", [0, 1, 4, 57])
def test_cast_bitwise(casts: Case, n: int) -> None:
    """NumPy ``astype`` semantics, bit for bit: float -> int truncates, int -> int
    wraps, int -> f32 rounds once to nearest-even (i64 values beyond 2**24 and
    beyond 2**53 are included), to bool is ``!= 0`` (NaN -> True, -0.0 -> False),
    bool -> number is 0/1, bf16 -> f32 puts the 16 bits on top. Both pipelines."""
    rng = rng_for("casts", n)
    inputs: Arrays = {f"x_{dt}": random_of(dt, rng, (n, 5)) for dt in ALL_DTYPES}
    for dst in INT_DTYPES:
        inputs[f"x_f32_for_{dst}"] = in_range_f32(rng, (n, 5), dst)
    inputs["x_bf16"] = rng.integers(0, 65536, (n, 5), dtype=np.uint16)
    want, runs = casts.run_all(inputs)
    for pipeline, got in runs.items():
        for name in want:
            assert_bitwise(got[name], want[name], f"{name} at n={n} ({pipeline})")
        if n:
            src = inputs["x_f32_for_i8"]
            assert np.array_equal(got["f32_to_i8"], np.trunc(src).astype(np.int8)), pipeline
            assert np.array_equal(got["f32_to_bool"], ~(inputs["x_f32"] == 0)), pipeline


def test_cast_bf16_all_bit_patterns(casts: Case) -> None:
    """All 65,536 bf16 patterns (NaNs, infs, subnormals, ±0) widen exactly: the
    result's bits are the input bits shifted left by 16, independently computed.
    Both pipelines."""
    inputs: Arrays = {f"x_{dt}": random_of(dt, rng_for("bf16", 0), (0, 5))
                      for dt in ALL_DTYPES}
    for dst in INT_DTYPES:
        inputs[f"x_f32_for_{dst}"] = np.zeros((0, 5), np.float32)
    inputs["x_bf16"] = np.zeros((0, 5), np.uint16)
    want, runs = casts.run_all(inputs)
    expect = np.arange(65536, dtype=np.uint32) << np.uint32(16)
    for pipeline, got in runs.items():
        assert np.array_equal(got["bf16_all_to_f32"].view(np.uint32), expect), pipeline
        assert_bitwise(got["bf16_all_to_f32"], want["bf16_all_to_f32"],
                       f"bf16 -> f32 ({pipeline})")


# --------------------------------------------------------------------------
# 3. reduce_sum, reduce_max: every axis, every numeric dtype
# --------------------------------------------------------------------------

REDUCE_BINDINGS = [(0, 2, 3), (2, 0, 3), (2, 3, 0), (1, 1, 1), (3, 4, 5), (2, 9, 33),
                   (40, 3, 2)]


@pytest.fixture(scope="module")
def reductions(kernel_cache: Path) -> Case:
    """reduce_sum and reduce_max over every axis of ``[a, b, c]`` for every numeric
    dtype, plus a rank-1 ``[a]`` and axis -1 (normalised)."""
    gb = GraphBuilder("reductions")
    for dt in NUMERIC_DTYPES:
        x = gb.input(f"x_{dt}", dt, ["a", "b", "c"])
        for axis in range(3):
            gb.output(f"sum{axis}_{dt}", x.sum(axis))
            gb.output(f"max{axis}_{dt}", x.max(axis))
    v = gb.input("v", "f32", ["a"])
    gb.output("max_rank1", v.max(-1))
    gb.output("sum_rank1", v.sum(0))
    return build_case(gb)


def reduce_inputs(rng: np.random.Generator, shape: tuple[int, int, int],
                  f32: Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]) -> Arrays:
    inputs: Arrays = {f"x_{dt}": random_int(rng, shape, dt) for dt in INT_DTYPES}
    inputs["x_f32"] = f32(rng, shape)
    inputs["v"] = f32(rng, shape[:1])
    return inputs


def finite_no_zero_ties(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Normals and ±inf, no zeros and no NaNs: max has a unique answer bitwise."""
    x = random_f32(rng, shape, specials=False)
    x = np.where(x == 0, np.float32(1.5), x)
    pick = rng.random(shape)
    return np.where(pick < 0.03, np.float32(np.inf),
                    np.where(pick > 0.97, np.float32(-np.inf), x)).astype(np.float32)


def sum_bound(x: np.ndarray, axis: int) -> np.ndarray:
    """Error allowed between two f32 summations of the same n terms.

    A sequential f32 sum of n terms is within (n-1)·u·Σ|x_i| of the exact sum
    (to first order, u = 2**-24); the kernels' 16 partial sums and their tree
    (each term through at most ``min(n - 1, ceil(n/16) + 3)`` adds) and NumPy's
    pairwise sum are within the same bound. Their difference is therefore within
    2·n·u·Σ|x_i|, which also absorbs the second-order term for n·u << 1."""
    n = x.shape[axis]
    mag = np.sum(np.abs(x.astype(np.float64)), axis=axis, keepdims=True)
    return 2.0 * n * F32_U * mag


@pytest.mark.parametrize(("index", "shape"), list(enumerate(REDUCE_BINDINGS)))
def test_reductions(reductions: Case, index: int, shape: tuple[int, int, int]) -> None:
    """Integer sums (wrapping in the input dtype) and all maxima bitwise; an empty
    axis gives the identity (0, -inf, the type's minimum); f32 sums within
    ``sum_bound`` of the interpreter and of the exact (float64) sum, and
    bitwise ``lanes_sum`` (16 partial sums, the halving tree: the order the
    kernels state; axes up to 40 long give every lane several terms). Both
    pipelines (and the fused sum is the unfused one bit for bit: one lanes
    loop over the axis in both)."""
    inputs = reduce_inputs(rng_for("reduce", index), shape, finite_no_zero_ties)
    for name in ("x_f32", "v"):  # no infs in the sums
        inputs[name] = np.where(np.isinf(inputs[name]), np.float32(2.0), inputs[name])
    want, runs = reductions.run_all(inputs)
    for pipeline, got in runs.items():
        at = f"at {shape} ({pipeline})"
        for axis in range(3):
            for dt in INT_DTYPES:
                assert_bitwise(got[f"sum{axis}_{dt}"], want[f"sum{axis}_{dt}"],
                               f"sum{axis}_{dt} {at}")
            for dt in NUMERIC_DTYPES:
                assert_bitwise(got[f"max{axis}_{dt}"], want[f"max{axis}_{dt}"],
                               f"max{axis}_{dt} {at}")
            if shape[axis] == 0:
                assert (got[f"sum{axis}_f32"].view(np.uint32) == 0).all(), at
                assert (got[f"max{axis}_f32"] == -np.inf).all(), at
                for dt in INT_DTYPES:
                    assert (got[f"max{axis}_{dt}"] == np.iinfo(numpy_dtype(dt)).min).all(), at
            x = inputs["x_f32"]
            bound = sum_bound(x, axis)
            exact = np.sum(x.astype(np.float64), axis=axis, keepdims=True)
            c = got[f"sum{axis}_f32"].astype(np.float64)
            assert (np.abs(c - want[f"sum{axis}_f32"]) <= bound).all(), f"sum{axis}_f32 {at}"
            assert (np.abs(c - exact) <= bound / 2).all(), f"sum{axis}_f32 vs exact {at}"
            assert_bitwise(got[f"sum{axis}_f32"], lanes_sum(x, axis),
                           f"sum{axis}_f32 vs lanes reference {at}")
            if c.size and shape[axis]:
                rel = np.abs(c - want[f"sum{axis}_f32"]) / (bound / (2 * shape[axis]))
                print(f"reduce_sum {at} axis {axis}: max |c - numpy| = {rel.max():.3g} "
                      f"u·sum|x| (bound {2 * shape[axis]} u·sum|x|)")
        assert_bitwise(got["max_rank1"], want["max_rank1"], f"max_rank1 ({pipeline})")
        assert np.abs(got["sum_rank1"] - want["sum_rank1"]) <= sum_bound(inputs["v"], 0)
        assert_bitwise(got["sum_rank1"], lanes_sum(inputs["v"], 0),
                       f"sum_rank1 vs lanes reference ({pipeline})")


def sequential_max(x: np.ndarray, axis: int) -> np.ndarray:
    """The compiled kernel's stated order: ``acc = -inf; acc = max(acc, x_k)`` for
    k ascending, where a NaN acc stays, a NaN x_k is taken, and a tie (±0)
    takes x_k. np.where moves bits unchanged, so payloads survive."""
    moved = np.moveaxis(x, axis, 0)
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    acc = np.full(moved.shape[1:], lowest, dtype=x.dtype)
    for xk in moved:
        if x.dtype.kind == "f":
            take = ~np.isnan(acc) & (np.isnan(xk) | ~(acc > xk))
        else:
            take = ~(acc > xk)
        acc = np.where(take, xk, acc)
    return np.expand_dims(acc, axis)


def zeros_and_nans(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Mostly ±0 (ties), some negatives and NaNs with random payloads."""
    x = np.where(rng.random(shape) < 0.5, np.float32(0.0), np.float32(-0.0))
    x = np.where(rng.random(shape) < 0.1, np.float32(-1.0), x)
    nan_bits = np.uint32(0x7FC00000) | rng.integers(0, 1 << 22, shape, dtype=np.uint32)
    return np.where(rng.random(shape) < 0.04, nan_bits.view(np.float32), x).astype(np.float32)


@pytest.mark.parametrize(("index", "shape"), list(enumerate(REDUCE_BINDINGS)))
def test_reduce_max_nan_and_signed_zero(reductions: Case, index: int,
                                        shape: tuple[int, int, int]) -> None:
    """reduce_max propagates NaN (NaN exactly where the interpreter has NaN,
    equal values elsewhere) and is bitwise equal to the sequential definition
    (``sequential_max``), ±0 ties and NaN payloads included. Against NumPy
    itself it is not bitwise on such data: NumPy's SIMD reduction returns the
    canonical NaN 0x7fc00000 and resolves ±0 ties in its own lane order. Both
    pipelines: the fused max is the same sequential loop, so it is bitwise the
    unfused one, ties and payloads included. ``run_all``'s optimized-vs-original
    interpreter check holds on this data too, NumPy's lane order
    notwithstanding: both interpretations call the same ``np.max`` on the same
    array."""
    inputs = reduce_inputs(rng_for("reduce-nan", index), shape, zeros_and_nans)
    want, runs = reductions.run_all(inputs)
    for pipeline, got in runs.items():
        for axis in range(3):
            name = f"max{axis}_f32"
            what = f"{name} ({pipeline})"
            w, c = want[name], got[name]
            assert np.array_equal(np.isnan(w), np.isnan(c)), f"{what}: NaN positions differ"
            assert np.array_equal(w, c, equal_nan=True), what
            assert_bitwise(c, sequential_max(inputs["x_f32"], axis), f"{what} (sequential)")
            for dt in INT_DTYPES:
                assert_bitwise(got[f"max{axis}_{dt}"], sequential_max(inputs[f"x_{dt}"], axis),
                               f"max{axis}_{dt} ({pipeline}, sequential)")
            s = got[f"sum{axis}_f32"]
            nan_lines = np.isnan(inputs["x_f32"]).any(axis=axis, keepdims=True)
            assert np.array_equal(np.isnan(s), nan_lines), \
                f"sum{axis} ({pipeline}): NaN not propagated"


# --------------------------------------------------------------------------
# 4. matmul: 2-D, batched 3-D, transposed rhs via permute
# --------------------------------------------------------------------------

MATMUL_BINDINGS = [(1, 1, 1, 1), (0, 3, 2, 2), (3, 0, 2, 1), (2, 4, 1, 3), (2, 3, 4, 0),
                   (5, 7, 9, 2), (17, 64, 3, 1), (1, 33, 1, 4)]  # (m, k, n, batch)


@pytest.fixture(scope="module")
def matmuls(kernel_cache: Path) -> Case:
    """``[m,k]@[k,n]``, ``[m,k]@[n,k]ᵀ`` (permute view), batched ``[b,m,k]@[b,k,n]``
    and ``@[b,n,k]`` permuted, and ``x @ Wᵀ`` with a weight (a view, never copied)."""
    gb = GraphBuilder("matmuls")
    a = gb.input("a", "f32", ["m", "k"])
    b = gb.input("b", "f32", ["k", "n"])
    bt = gb.input("bt", "f32", ["n", "k"])
    a3 = gb.input("a3", "f32", ["batch", "m", "k"])
    b3 = gb.input("b3", "f32", ["batch", "k", "n"])
    b3t = gb.input("b3t", "f32", ["batch", "n", "k"])
    x = gb.input("x", "f32", ["m", 6])
    w = gb.weight("w", [5, 6])
    gb.output("mm", a @ b)
    gb.output("mm_t", a @ bt.T)
    gb.output("bmm", a3 @ b3)
    gb.output("bmm_t", a3 @ b3t.permute(0, 2, 1))
    gb.output("linear", x @ w.T)
    weights = {"w": random_f32(rng_for("matmul-w", 0), (5, 6), specials=False)}
    return build_case(gb, weights)


@pytest.mark.parametrize(("index", "dims"), list(enumerate(MATMUL_BINDINGS)))
def test_matmul(matmuls: Case, index: int, dims: tuple[int, int, int, int]) -> None:
    """Every matmul form within ``matmul_bound`` of NumPy and of the exact
    (float64) product, at K = 0 (all zeros) and K = 1 (one product: exact), and
    bitwise equal to ``lanes_matmul`` (K up to 64: lanes that take several
    terms, ragged last rounds), both pipelines (the fused k loop is the
    unfused one, so the two agree bitwise too)."""
    m, k, n, batch = dims
    rng = rng_for("matmul", index)

    def f(*shape: int) -> np.ndarray:
        return random_f32(rng, shape, specials=False)

    inputs = {"a": f(m, k), "b": f(k, n), "bt": f(n, k), "a3": f(batch, m, k),
              "b3": f(batch, k, n), "b3t": f(batch, n, k), "x": f(m, 6)}
    want, runs = matmuls.run_all(inputs)
    rhs = {"mm": ("a", inputs["b"]), "mm_t": ("a", inputs["bt"].T),
           "bmm": ("a3", inputs["b3"]), "bmm_t": ("a3", inputs["b3t"].transpose(0, 2, 1)),
           "linear": ("x", matmuls.weights["w"].T)}
    worst = 0.0
    for name, (lhs, right) in rhs.items():
        left = inputs[lhs]
        bound = matmul_bound(left, right)
        exact = np.matmul(left.astype(np.float64), right.astype(np.float64))
        scale = np.matmul(np.abs(left.astype(np.float64)), np.abs(right.astype(np.float64)))
        for pipeline, got in runs.items():
            at = f"{name} at {dims} ({pipeline})"
            c = got[name].astype(np.float64)
            assert (np.abs(c - want[name]) <= bound).all(), at
            assert (np.abs(c - exact) <= bound / 2).all(), f"{at} vs exact"
            if left.shape[-1] == 1:  # one product, no sum: exact (up to the sign of 0)
                assert np.array_equal(got[name], want[name]), f"{at} K=1"
            if left.shape[-1] == 0:
                assert (got[name].view(np.uint32) == 0).all(), f"{at} K=0 must be +0.0"
            assert_bitwise(got[name], lanes_matmul(left, right), f"{at} vs lanes reference")
            ok = scale > 0
            if ok.any():
                worst = max(worst, float((np.abs(c - want[name])[ok] / scale[ok]).max()))
    print(f"matmul {dims}: max |c - numpy| / sum|a||b| = {worst:.3g} "
          f"({worst / F32_U:.2f} u)")


SCHEDULED_BINDINGS = [(1, 1, 1), (7, 3, 17), (0, 2, 0), (13, 5, 40)]  # (rows, seq, t)


def scheduled_matmuls() -> ModuleOp:
    """Two projections (K = 48, three lane rounds; N = 24 and 26 columns: whole and
    ragged column tiles), attention scores (``q @ kᵀ`` over the head dim 64) and
    context (``p @ v``, K = t symbolic)."""
    gb = GraphBuilder("scheduled_matmuls")
    x = gb.input("x", "f32", ["rows", 48])
    q = gb.input("q", "f32", [2, "seq", 64])
    k = gb.input("k", "f32", [2, "t", 64])
    p = gb.input("p", "f32", [2, "seq", "t"])
    v = gb.input("v", "f32", [2, "t", 64])
    gb.output("proj24", x @ gb.weight("w24", [24, 48]).T)
    gb.output("proj26", x @ gb.weight("w26", [26, 48]).T)
    gb.output("scores", q @ k.permute(0, 2, 1))
    gb.output("context", p @ v)
    return gb.finish_module()


@pytest.mark.parametrize("arch", arch_params())
def test_scheduled_matmul_is_the_lanes_order(arch: Arch) -> None:
    """The default schedules of ``arch`` (projection register tiles with the lanes
    vectorized and privatized, scores vectorized along k, context along its
    columns; scalar: the thread pool only) give ``lanes_matmul``'s bits, at 1
    and 3 threads: a schedule may turn the 16 lanes into vector lanes (one
    AVX-512 vector, two AVX2 ones, added by the same halving tree), never
    change the order."""
    module = scheduled_matmuls()
    rng = rng_for(f"scheduled-matmul-{arch.name}", 0)
    weights = {f"w{n}": random_f32(rng, (n, 48), specials=False) for n in (24, 26)}
    pipeline = Pipeline(module, CompileOptions(arch=arch.name))
    kernels = pipeline.kernels
    chosen = [d.chosen for d in pipeline.decisions]
    assert len(chosen) == 4
    assert all(c is not None for c in chosen), pipeline.explain()
    if arch.vector:  # both projections vectorize their lanes loop k
        proj = [c for c in chosen if c is not None and sched.Vectorize("k", arch.f32_lanes) in c]
        assert len(proj) >= 2, pipeline.explain()
    program = compile_loop(kernels, weights)
    for rows, seq, t in SCHEDULED_BINDINGS:
        def f(*shape: int) -> np.ndarray:
            return random_f32(rng, shape, specials=False)

        inputs = {"x": f(rows, 48), "q": f(2, seq, 64), "k": f(2, t, 64), "p": f(2, seq, t),
                  "v": f(2, t, 64)}
        want = {"proj24": lanes_matmul(inputs["x"], weights["w24"].T),
                "proj26": lanes_matmul(inputs["x"], weights["w26"].T),
                "scores": lanes_matmul(inputs["q"], inputs["k"].transpose(0, 2, 1)),
                "context": lanes_matmul(inputs["p"], inputs["v"])}
        for threads in (1, 3):
            program.set_threads(threads)
            got = program.run(inputs)
            for name, ref in want.items():
                assert_bitwise(got[name], ref, f"{name} at rows={rows} seq={seq} t={t}, "
                               f"{arch.name}, {threads} threads")


# --------------------------------------------------------------------------
# 5. gather, concat, iota, dim
# --------------------------------------------------------------------------

ROWS = 11


@pytest.fixture(scope="module")
def indexing(kernel_cache: Path) -> Case:
    """gather from f32/i8/bf16/bool tables of rank 1-3, from a transposed and a
    sliced (offset) table, with 1-D and 2-D ids; iota on every numeric dtype and
    axis; dim of symbolic expressions."""
    gb = GraphBuilder("indexing")
    ids = gb.input("ids", "i64", ["n"])
    ids2 = gb.input("ids2", "i64", ["a", "b"])
    t = gb.weight("t", [ROWS, 3])
    t1 = gb.weight("t1", [ROWS])
    t3 = gb.weight("t3", [ROWS, 2, 2], "i8")
    tb = gb.weight("tb", [ROWS, 4], "bf16")
    tbool = gb.weight("tbool", [ROWS, 2], "bool")
    gb.output("rows", gather(t, ids))
    gb.output("rows2", gather(t, ids2))
    gb.output("rank1", gather(t1, ids))
    gb.output("rank3", gather(t3, ids2))
    gb.output("bf16_rows", gather(tb, ids))
    gb.output("bf16_rows_f32", gather(tb, ids).cast("f32"))
    gb.output("bool_rows", gather(tbool, ids))
    small = gb.input("small_ids", "i64", ["n"])  # ids in [0, 3) and [0, 7)
    gb.output("transposed", gather(t.T, small))
    gb.output("sliced", gather(t.slice(0, 2, 9), small))
    gb.output("gather_then_add", gather(t, ids) + gather(t, ids))
    for axis in (0, 1):
        for dt in NUMERIC_DTYPES:
            gb.output(f"iota{axis}_{dt}", gb.iota(["a", "b"], axis, dt))
    gb.output("iota_neg_axis", gb.iota(["n", 2, "a"], -1))
    for name, expr in (("dim_a", "a"), ("dim_ab", "a*b"), ("dim_poly", "a*b - 2*n + 7"),
                       ("dim_const", "3")):
        gb.output(name, gb.dim(expr))
    rng = rng_for("tables", 0)
    weights = {"t": random_f32(rng, (ROWS, 3)), "t1": random_f32(rng, (ROWS,)),
               "t3": random_int(rng, (ROWS, 2, 2), "i8"),
               "tb": rng.integers(0, 65536, (ROWS, 4), dtype=np.uint16),
               "tbool": rng.random((ROWS, 2)) < 0.5}
    return build_case(gb, weights)


@pytest.mark.parametrize(("index", "nab"),
                         list(enumerate([(0, 0, 0), (1, 1, 1), (2, 0, 3), (5, 3, 0),
                                         (40, 4, 200), (3, 7, 129)])))
def test_gather_iota_dim(indexing: Case, index: int, nab: tuple[int, int, int]) -> None:
    """gather, iota (i8 wraps past 127 like ``np.arange(..., dtype=int8)``) and dim:
    bitwise at every binding, both pipelines. ids always include the first and
    the last row."""
    n, a, b = nab
    rng = rng_for("indexing", index)
    ids = rng.integers(0, ROWS, n)
    ids[: min(n, 2)] = [0, ROWS - 1][: min(n, 2)]
    ids2 = rng.integers(0, ROWS, (a, b))
    if ids2.size:
        ids2.ravel()[0], ids2.ravel()[-1] = ROWS - 1, 0
    inputs = {"ids": ids, "ids2": ids2, "small_ids": rng.integers(0, 3, n)}
    want, runs = indexing.run_all(inputs)
    for pipeline, got in runs.items():
        for name in want:
            assert_bitwise(got[name], want[name], f"{name} at n={n}, a={a}, b={b} ({pipeline})")
        assert got["dim_poly"].shape == ()
        assert int(got["dim_poly"]) == a * b - 2 * n + 7
        if n >= 2:  # independent of the interpreter: rows 0 and ROWS - 1 themselves
            assert_bitwise(got["rows"][0], indexing.weights["t"][0], f"first row ({pipeline})")
            assert_bitwise(got["rows"][1], indexing.weights["t"][ROWS - 1],
                           f"last row ({pipeline})")


@pytest.fixture(scope="module")
def concats(kernel_cache: Path) -> Case:
    """concat of 2 and 3 operands along every axis of a rank-3 tensor (symbolic
    lengths on the concat axis, operands read through permuted views), for
    every dtype, and along a negative axis."""
    gb = GraphBuilder("concats")
    xs = [gb.input(name, "f32", [sym, "q", "r"]) for name, sym in
          (("x", "a"), ("y", "b"), ("z", "c"))]
    perms = {0: (0, 1, 2), 1: (1, 0, 2), 2: (1, 2, 0)}
    for axis, perm in perms.items():
        views = [x.permute(*perm) for x in xs]
        gb.output(f"cat3_axis{axis}", concat(views, axis))
        gb.output(f"cat2_axis{axis}", concat(views[:2], axis))
    gb.output("cat_neg_axis", concat([x.permute(1, 2, 0) for x in xs[1:]], -1))
    gb.output("cat_one", concat(xs[:1], 0))
    for dt in ("i64", "i32", "i8", "bool"):
        ins = [gb.input(f"{name}_{dt}", dt, [sym, "q", "r"]) for name, sym in
               (("x", "a"), ("y", "b"), ("z", "c"))]
        gb.output(f"cat3_{dt}", concat(ins, 0))
        gb.output(f"cat2_{dt}", concat([i.permute(2, 1, 0) for i in ins[1:]], 2))
    return build_case(gb)


@pytest.mark.parametrize(("index", "abcqr"),
                         list(enumerate([(0, 0, 0, 2, 3), (0, 2, 0, 1, 1), (2, 0, 3, 2, 1),
                                         (1, 1, 1, 0, 4), (3, 2, 4, 5, 0), (7, 1, 0, 3, 9)])))
def test_concat(concats: Case, index: int, abcqr: tuple[int, int, int, int, int]) -> None:
    """concat bitwise (NaN payloads included), zero-length operands (past = 0)
    and zero-size off-axis dims included, both pipelines."""
    a, b, c, q, r = abcqr
    rng = rng_for("concat", index)
    inputs: Arrays = {}
    for name, n in (("x", a), ("y", b), ("z", c)):
        inputs[name] = random_f32(rng, (n, q, r))
        for dt in ("i64", "i32", "i8", "bool"):
            inputs[f"{name}_{dt}"] = random_of(dt, rng, (n, q, r))
    want, runs = concats.run_all(inputs)
    for pipeline, got in runs.items():
        for name in want:
            assert_bitwise(got[name], want[name], f"{name} at {abcqr} ({pipeline})")
        assert got["cat3_axis0"].shape == (a + b + c, q, r)


# --------------------------------------------------------------------------
# 6. movement ops feeding compute ops (views and copy kernels)
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def movement(kernel_cache: Path) -> Case:
    """permute / broadcast / slice (symbolic start) / reshape (view and copy)
    each feeding a compute op, and views returned directly (copied on return)."""
    gb = GraphBuilder("movement")
    x = gb.input("x", "f32", ["a", "b", 4])
    row = gb.input("row", "f32", [1, 4])
    col = gb.input("col", "f32", ["a", "b", 1])
    k = gb.input("k", "f32", ["past", 4])
    v = gb.input("v", "f32", ["seq", 4])
    full = gb.input("full", "f32", ["past + seq", 4])
    gb.output("perm_neg", -x.permute(2, 0, 1))
    gb.output("perm_slice_neg", -x.permute(2, 0, 1).slice(0, 1, 3))
    gb.output("bcast_row", x + row)
    gb.output("bcast_col", x * col)
    gb.output("bcast_0d", x - 1.5)
    gb.output("merge_view", -x.reshape("a*b", 4))
    gb.output("split_view", -x.reshape("a", "b", 2, 2))
    gb.output("unit_dims", -x.reshape(1, "a", 1, "b", 4, 1))
    gb.output("drop_unit", -row.reshape(4) * -row.reshape(4))
    gb.output("merge_after_perm", -x.permute(1, 0, 2).reshape("b*a*4"))
    gb.output("merge_after_perm_out", x.permute(1, 0, 2).reshape("a*b", 4))
    stretched = col.broadcast_to("a", "b", 4)
    gb.output("merge_after_bcast", stretched.reshape("a*b*4") + x.reshape("a*b*4"))
    gb.output("ret_perm", x.permute(2, 1, 0))
    gb.output("ret_input", x)
    gb.output("ret_bcast", stretched)
    kv = concat([k, v], 0)
    gb.output("kv_new", -kv.slice(0, "past", "past + seq"))
    gb.output("kv_old", kv.slice(0, 0, "past") * 2.0)
    gb.output("full_new", full.slice(0, "past", "past + seq") + v)
    gb.output("full_cols", -full.slice(1, 1, 3))
    new_rows = kv.slice(0, "past", "past + seq").reshape("seq", 1, 4)
    gb.output("kv_bcast_merge", new_rows.broadcast_to("seq", 3, 4).reshape("seq*3", 4) * 1.0)
    return build_case(gb)


@pytest.mark.parametrize(("index", "dims"),
                         list(enumerate([(0, 0, 0, 0), (1, 1, 1, 1), (0, 3, 0, 2), (3, 0, 5, 0),
                                         (2, 5, 3, 1), (6, 4, 1, 7)])))
def test_movement_into_compute(movement: Case, index: int,
                               dims: tuple[int, int, int, int]) -> None:
    """Strided, stride-0, offset and copied operands give exactly the interpreter's
    values (every op here is bitwise), both pipelines: unfused, the copy
    kernel serves the reshapes a view cannot express (after permute, after
    broadcast); fused, the kernel reads through them with div/mod.

    ``drop_unit`` (``-r * -r``) once differed in the sign of a NaN (fixed)."""
    a, b, past, seq = dims
    rng = rng_for("movement", index)
    inputs = {"x": random_f32(rng, (a, b, 4)), "row": random_f32(rng, (1, 4)),
              "col": random_f32(rng, (a, b, 1)), "k": random_f32(rng, (past, 4)),
              "v": random_f32(rng, (seq, 4)), "full": random_f32(rng, (past + seq, 4))}
    want, runs = movement.run_all(inputs)
    for pipeline, got in runs.items():
        for name in want:
            check = assert_bitwise
            if pipeline == "fused" and name in FUSED_NAN_SIGN:
                check = assert_bitwise_but_nan_sign
            check(got[name], want[name], f"{name} at {dims} ({pipeline})")
        assert_bitwise(got["merge_after_perm_out"],
                       np.ascontiguousarray(inputs["x"].transpose(1, 0, 2)).reshape(a * b, 4),
                       f"reshape after permute (NumPy, {pipeline})")


def written_buffers(program: CompiledProgram) -> list[loop.BufferOp]:
    """For each launch of ``program``, in order, the buffer its kernel writes
    (the kernels of both pipelines write exactly one argument, the first)."""
    kernels = {op.sym_name.data: op for op in program.program.parent_op().walk()
               if isinstance(op, loop.KernelOp)}
    out = []
    for launch in program.program.launches():
        modes = kernels[launch.kernel_name].modes
        assert modes[0] == "w", (launch.kernel_name, modes)
        assert modes.count("w") == 1, (launch.kernel_name, modes)
        view = launch.views[0].owner
        assert isinstance(view, loop.ViewOp)
        buffer = view.source.owner
        assert isinstance(buffer, loop.BufferOp)
        out.append(buffer)
    return out


def is_copy_kernel(kernel: loop.KernelOp) -> bool:
    """True when every value the kernel stores is a value it loaded unchanged."""
    stores = [op for op in kernel.walk() if isinstance(op, loop.StoreOp)]
    return bool(stores) and all(isinstance(st.value.owner, loop.LoadOp) for st in stores)


def copy_launches(program: CompiledProgram) -> list[str]:
    """Names of the buffers written by launches of pure copy kernels, in order
    (a temporary is named ``temp``)."""
    kernels = {op.sym_name.data: op for op in program.program.parent_op().walk()
               if isinstance(op, loop.KernelOp)}
    return [buf.buffer_name.data if buf.buffer_name is not None else buf.kind.data
            for launch, buf in zip(program.program.launches(), written_buffers(program),
                                   strict=True)
            if is_copy_kernel(kernels[launch.kernel_name])]


def test_movement_copies_unfused(movement: Case) -> None:
    """``fuse=False``: the movement ops cost no kernels except the expected
    copies, one per non-view reshape, one per returned view and the concat
    (spec §3). A copy kernel is recognised by its body (it stores only loaded
    values), not by its name."""
    program = movement.programs["unfused"]
    copies = copy_launches(program)
    # non-view reshapes into temporaries: merge_after_perm, merge_after_bcast,
    # kv_bcast_merge (a merge across a broadcast dim); merge_after_perm_out is
    # one straight into its output; ret_perm, ret_input, ret_bcast returned
    # views; the concat kv (a kernel of its own, unfused) into a temporary
    assert sorted(copies) == sorted(["temp"] * 4 + ["merge_after_perm_out", "ret_perm",
                                                    "ret_input", "ret_bcast"]), \
        (copies, launched_kernels(program))
    assert sum(k.startswith("copy") for k in launched_kernels(program)) == 7


def test_movement_copies_fused(movement: Case) -> None:
    """``fuse=True``: no movement op is ever stored. Every launch writes one of
    the program's outputs (no temporaries at all: the non-view reshapes are
    read through with div/mod, the concat with one branch per operand), one
    launch per output, and the only pure copies left are the outputs that are
    themselves views of an input (returned views must be materialised)."""
    program = movement.programs["fused"]
    written = written_buffers(program)
    assert all(buf.kind.data == "output" for buf in written), launched_kernels(program)
    names = [buf.buffer_name.data for buf in written if buf.buffer_name is not None]
    assert sorted(names) == sorted(n for n, _ in program.signature.outputs), names
    assert sorted(copy_launches(program)) == sorted(["merge_after_perm_out", "ret_perm",
                                                     "ret_input", "ret_bcast"])
    assert len(written) < len(movement.programs["unfused"].program.launches())


WEIGHT_SHAPES = {"w": (5, 6)}


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_transposed_weight_is_not_copied(matmuls: Case, pipeline: str) -> None:
    """``x @ W.T``, ``a @ b.T`` and the batched ``@ b.permute(0, 2, 1)`` read the
    transposed operand in place, under both pipelines (spec §3): exactly one
    launch per matmul, each writing its output buffer (no temporary, so in
    particular no kernel writes a weight-shaped transposed copy), and the
    weight is read straight from its buffer through a transposed view
    (strides ``(1, 6)``)."""
    program = matmuls.programs[pipeline]
    written = written_buffers(program)
    assert len(written) == 5, launched_kernels(program)
    assert all(buf.kind.data == "output" for buf in written), launched_kernels(program)
    for buf in written:
        shape = tuple(str(d) for d in buf.result.type.dims)
        assert all(shape not in (tuple(map(str, s)), tuple(map(str, s[::-1])))
                   for s in WEIGHT_SHAPES.values()), shape
    weight_reads = []
    for launch in program.program.launches():
        for v in launch.views[1:]:
            view = v.owner
            assert isinstance(view, loop.ViewOp)
            src = view.source.owner
            if isinstance(src, loop.BufferOp) and src.kind.data == "weight":
                weight_reads.append((src.buffer_name.data if src.buffer_name else "",
                                     tuple(str(e) for e in view.layout.stride_exprs)))
    assert weight_reads == [("w", ("1", "6"))], weight_reads


# --------------------------------------------------------------------------
# 7. the runtime boundary: arguments and out-of-range ids
# --------------------------------------------------------------------------


def boundary_graph() -> GraphBuilder:
    gb = GraphBuilder("boundary")
    x = gb.input("x", "f32", ["n", 5])
    y = gb.input("y", "f32", ["n", 5])
    ids = gb.input("ids", "i64", ["m"])
    gb.output("sum", x + y)
    gb.output("rows", gather(gb.weight("t", [7, 5]), ids))
    return gb


BOUNDARY_WEIGHTS = {"t": np.arange(35, dtype=np.float32).reshape(7, 5)}


@pytest.fixture(scope="module")
def boundary(kernel_cache: Path) -> Case:
    return build_case(boundary_graph(), dict(BOUNDARY_WEIGHTS))


def good_boundary_inputs() -> Arrays:
    return {"x": np.ones((3, 5), np.float32), "y": np.ones((3, 5), np.float32),
            "ids": np.array([0, 6, 3], np.int64)}


def _noncontiguous() -> np.ndarray:
    return np.ones((3, 10), np.float32)[:, ::2]


BAD_ARGUMENTS: list[tuple[str, Callable[[Arrays], None], str]] = [
    ("wrong dtype f64", lambda d: d.update(x=d["x"].astype(np.float64)), "expected dtype f32"),
    ("wrong ids dtype", lambda d: d.update(ids=d["ids"].astype(np.int32)), "expected dtype i64"),
    ("wrong rank", lambda d: d.update(x=np.ones(15, np.float32)), "expected rank 2"),
    ("wrong dim", lambda d: d.update(x=np.ones((3, 6), np.float32),
                                     y=np.ones((3, 6), np.float32)), "dim 1 is 6"),
    ("inconsistent symbol", lambda d: d.update(y=np.ones((4, 5), np.float32)), "dim 0 is 4"),
    ("non-contiguous", lambda d: d.update(x=_noncontiguous()), "C-contiguous"),
    ("fortran order", lambda d: d.update(y=np.asfortranarray(np.ones((3, 5), np.float32))),
     "C-contiguous"),
    ("missing input", lambda d: d.pop("ids"), "missing input"),
    ("unknown input", lambda d: d.update(z=np.ones(1, np.float32)), "unknown input"),
    ("not an array", lambda d: d.update(x=[[1.0] * 5] * 3), "expected a numpy array"),
    ("bool as f32", lambda d: d.update(y=np.ones((3, 5), bool)), "expected dtype f32"),
]


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize(("case", "mutate", "message"), BAD_ARGUMENTS,
                         ids=[c[0] for c in BAD_ARGUMENTS])
def test_bad_arguments_raise(boundary: Case, case: str, mutate: Callable[[Arrays], None],
                             message: str, pipeline: str) -> None:
    """Each malformed argument is an ``ArgumentError`` naming the problem, raised
    before any kernel runs; the program still works afterwards. Both
    pipelines (the check is the runtime's, on the graph's signature, which
    the optimized graph keeps)."""
    program = boundary.programs[pipeline]
    inputs = good_boundary_inputs()
    mutate(inputs)
    with pytest.raises(ArgumentError, match=message):
        program.run(inputs)
    out = program.run(good_boundary_inputs())
    assert_bitwise(out["rows"], BOUNDARY_WEIGHTS["t"][[0, 6, 3]], f"after {case}")


BAD_IDS = [-1, 7, 8, 2**31, 2**62, 2**63 - 1, -(2**63)]


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize("bad", BAD_IDS)
@pytest.mark.parametrize("where_", [0, 2])
def test_gather_out_of_range_raises(boundary: Case, bad: int, where_: int,
                                    pipeline: str) -> None:
    """An id < 0 or >= rows (first or last position) is a ``KernelError`` naming
    the gather kernel (``@gather`` unfused, ``@fused_gather`` fused: the
    region rooted at the gather keeps its bounds check), like the
    interpreter's error on the original and on the optimized graph; never a
    wrap or a crash."""
    program = boundary.programs[pipeline]
    inputs = good_boundary_inputs()
    inputs["ids"][where_] = bad
    for module in (boundary.module, boundary.optimized):
        with pytest.raises(InterpreterError, match="out of range"):
            run_graph(module, inputs, boundary.weights)
    with pytest.raises(KernelError, match=r"kernel @(fused_)?gather\b.*out of range"):
        program.run(inputs)
    good = good_boundary_inputs()
    assert_bitwise(program.run(good)["rows"], BOUNDARY_WEIGHTS["t"][good["ids"]],
                   "after a failed run")


CHILD = """
import json, sys
import numpy as np
sys.path[:0] = [{test_dir!r}, {helpers_dir!r}]  # this module, and test/py's _numerics
from test_primitives_c import BAD_ARGUMENTS, BAD_IDS, BOUNDARY_WEIGHTS, boundary_graph
from test_primitives_c import good_boundary_inputs
from nanocompile.compiler import compile_program

program = compile_program(boundary_graph().finish_module(), BOUNDARY_WEIGHTS,
                          fuse={fuse})
errors = []
for _, mutate, _ in BAD_ARGUMENTS:
    inputs = good_boundary_inputs()
    mutate(inputs)
    try:
        program.run(inputs)
        errors.append("no error")
    except Exception as e:
        errors.append(type(e).__name__)
for bad in BAD_IDS:
    for m in (1, 3, 1000):
        ids = np.zeros(m, np.int64)
        ids[-1] = bad
        try:
            program.run({{**good_boundary_inputs(), "ids": ids}})
            errors.append("no error")
        except Exception as e:
            errors.append(type(e).__name__)
print(json.dumps(errors))
"""


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_boundary_in_child_process(kernel_cache: Path, pipeline: str) -> None:
    """The same bad arguments and ids in a fresh Python, for each pipeline: it
    exits normally (no segfault) having seen only ArgumentError / KernelError."""
    script = CHILD.format(test_dir=str(Path(__file__).parent),
                          helpers_dir=str(Path(__file__).parents[1]), fuse=pipeline == "fused")
    env = {**os.environ, "NANOCOMPILE_CACHE_DIR": str(kernel_cache)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, f"child died ({proc.returncode}): {proc.stderr[-2000:]}"
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert errors == ["ArgumentError"] * len(BAD_ARGUMENTS) + \
        ["KernelError"] * (3 * len(BAD_IDS))


# --------------------------------------------------------------------------
# 8. determinism and the cache
# --------------------------------------------------------------------------


def determinism_graph() -> ModuleOp:
    gb = GraphBuilder("determinism")
    x = gb.input("x", "f32", ["seq", 8])
    w = gb.weight("w", [3, 8])
    h = (x @ w.T).exp()
    gb.output("y", where(h <= 2.0, h, -h).sum(-1) + gb.dim("seq").cast("f32"))
    return gb.finish_module()


def pipeline_c(graph: ModuleOp, pipeline: str) -> str:
    """The C that ``compile_program(graph, fuse=pipeline == "fused")`` compiles,
    built stage by stage."""
    return emit_c(lower_to_loop(optimize_graph(graph) if pipeline == "fused" else graph))


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_same_graph_same_c_and_cache_hit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         pipeline: str) -> None:
    """Per pipeline, like with like: two independently built copies of a graph
    lower to byte-identical C (unfused: ``emit_c(lower_to_loop(g))``; fused:
    ``emit_c(lower_to_loop(optimize_graph(g)))``), which is exactly the
    ``source`` that ``compile_program`` builds for that pipeline; optimizing
    and lowering leave their input unchanged; the first compile (fresh cache)
    builds, the second is a cache hit, and both programs compute the same
    bits."""
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(tmp_path))
    fuse = pipeline == "fused"
    first, second = determinism_graph(), determinism_graph()
    c1, c2 = pipeline_c(first, pipeline), pipeline_c(second, pipeline)
    assert c1 == c2
    assert pipeline_c(first, pipeline) == c1  # the passes leave their input unchanged
    weights = {"w": random_f32(rng_for("det", 0), (3, 8), specials=False)}
    p1 = compile_program(first, weights, fuse=fuse)
    p2 = compile_program(second, weights, fuse=fuse)
    assert not p1.library.cache_hit
    assert p2.library.cache_hit
    assert p1.source == p2.source == c1
    assert p1.library.path == p2.library.path
    x = random_f32(rng_for("det", 1), (4, 8), specials=False)
    assert_bitwise(p1.run({"x": x})["y"], p2.run({"x": x})["y"], "two compiles")


def test_fused_and_unfused_c_differ_but_agree(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The two pipelines build different programs from one graph (fewer
    launches fused: the exp/where/neg chain, the row sum and the ``+ dim``
    join the matmul's kernel or one row kernel), two distinct libraries, and
    the same bits."""
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(tmp_path))
    graph = determinism_graph()
    weights = {"w": random_f32(rng_for("det", 0), (3, 8), specials=False)}
    unfused = compile_program(graph, weights, fuse=False)
    fused = compile_program(graph, weights, fuse=True)
    assert unfused.source != fused.source
    assert unfused.library.path != fused.library.path
    assert fused.launches < unfused.launches
    for index, seq in enumerate((0, 1, 5)):
        x = random_f32(rng_for("det", 2 + index), (seq, 8))
        assert_bitwise(fused.run({"x": x})["y"], unfused.run({"x": x})["y"],
                       f"fused vs unfused at seq={seq}")


# --------------------------------------------------------------------------
# 9. regression tests for the bugs this suite found (all fixed)
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def narrow_ids(kernel_cache: Path) -> Case:
    gb = GraphBuilder("narrow_ids")
    t = gb.weight("t", [ROWS, 3])
    for dt in ("i32", "i8"):
        gb.output(f"rows_{dt}", gather(t, gb.input(f"ids_{dt}", dt, ["n"])))
    return build_case(gb, {"t": np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 3)})


# regression (fixed): gather read i32/i8 ids as int64
@pytest.mark.parametrize("dt", ["i32", "i8"])
def test_gather_narrow_id_dtypes(narrow_ids: Case, dt: str) -> None:
    """gather with i32 / i8 ids equals the interpreter, both pipelines (ids are
    placed at the start of a larger zeroed buffer, so the bug's over-read
    stays in bounds)."""
    n = 3
    inputs: Arrays = {}
    for d in ("i32", "i8"):
        padded = np.zeros(8 * n, numpy_dtype(d))
        padded[:n] = [0, ROWS - 1, 4]
        inputs[f"ids_{d}"] = padded[:n]
    want, runs = narrow_ids.run_all(inputs)
    for pipeline, got in runs.items():
        assert_bitwise(got[f"rows_{dt}"], want[f"rows_{dt}"], f"gather with {dt} ids ({pipeline})")


@pytest.fixture(scope="module")
def symbolic_rows(kernel_cache: Path) -> tuple[Case, Case]:
    """Two programs (the bug in one must not mask the other): gather from a table
    input ``[r, 3]``, and from ``weight[10, 3].slice(0, s, 10)`` (10 - s rows; the
    weight sits at the start of a 20-row buffer, so an over-read stays in bounds)."""
    gb = GraphBuilder("input_table")
    ids = gb.input("ids", "i64", ["n"])
    gb.output("rows", gather(gb.input("table", "f32", ["r", 3]), ids))
    input_table = build_case(gb)
    gb = GraphBuilder("sliced_table")
    ids = gb.input("ids", "i64", ["n"])
    gb.output("start", -gb.input("start", "f32", ["s"]))  # binds s (see test_unused_input)
    gb.output("rows", gather(gb.weight("w", [10, 3]).slice(0, "s", 10), ids))
    padded = np.arange(60, dtype=np.float32).reshape(20, 3)
    return input_table, build_case(gb, {"w": padded[:10]})


# regression (fixed): gather bounded ids by the constant part of a symbolic row count
@pytest.mark.parametrize("case", ["input table", "sliced weight"])
def test_gather_symbolic_row_count(symbolic_rows: tuple[Case, Case], case: str) -> None:
    """A table whose row count is symbolic: valid ids give the interpreter's rows,
    and an id >= the actual row count is a KernelError. Both pipelines."""
    input_table, sliced = symbolic_rows
    if case == "input table":
        table = np.arange(15, dtype=np.float32).reshape(5, 3)
        want, runs = input_table.run_all({"table": table, "ids": np.array([0, 4, 2])})
        for pipeline, got in runs.items():
            assert_bitwise(got["rows"], want["rows"], f"rows ({pipeline})")
    else:
        inputs = {"ids": np.array([0, 4]), "start": np.zeros(5, np.float32)}
        want, runs = sliced.run_all(inputs)
        for pipeline, got in runs.items():
            assert_bitwise(got["rows"], want["rows"],
                           f"valid rows of the sliced table ({pipeline})")
        inputs["ids"] = np.array([0, 9])
        for module in (sliced.module, sliced.optimized):
            with pytest.raises(InterpreterError):
                run_graph(module, inputs, sliced.weights)
        for program in sliced.programs.values():
            with pytest.raises(KernelError):
                program.run(inputs)


@pytest.fixture(scope="module")
def unchecked_slices(kernel_cache: Path) -> Case:
    gb = GraphBuilder("unchecked_slices")
    x = gb.input("x", "f32", ["n"])
    y = gb.input("y", "f32", ["m"])
    gb.output("head", x.slice(0, 0, "m") + y)
    gb.output("tail_sum", x.slice(0, 1, "n").sum(0))
    return build_case(gb)


# regression (fixed): symbolic slice bounds were not checked at run time
@pytest.mark.parametrize("case", ["stop > size", "start > stop"])
def test_symbolic_slice_bounds_checked(unchecked_slices: Case, case: str) -> None:
    """Slice bounds that do not fit at run time raise a Python error in the
    compiled runtime of both pipelines, as in the interpreter on the original
    and the optimized graph (x sits inside a larger buffer, so the bug's
    over-read stays in bounds). Fused, the slice is read through inside the
    consumer's kernel, so the lowering must still emit its requirement."""
    if case == "stop > size":
        x, y = np.arange(16, dtype=np.float32)[:2], np.ones(4, np.float32)
    else:
        x, y = np.arange(16, dtype=np.float32)[:0], np.ones(0, np.float32)
    inputs = {"x": x, "y": y}
    for module in (unchecked_slices.module, unchecked_slices.optimized):
        with pytest.raises(InterpreterError):
            run_graph(module, inputs, {})
    for program in unchecked_slices.programs.values():
        with pytest.raises((ArgumentError, KernelError)):
            program.run(inputs)
    fits = {"x": np.arange(5, dtype=np.float32), "y": np.ones(3, np.float32)}
    want, runs = unchecked_slices.run_all(fits)
    for pipeline, got in runs.items():
        assert_bitwise(got["head"], want["head"], f"head ({pipeline})")


SEGFAULT_CHILD = """
import numpy as np
from nanocompile.compiler import compile_program
from nanocompile.frontend import GraphBuilder

gb = GraphBuilder("slice_overrun")
x, y = gb.input("x", "f32", ["n"]), gb.input("y", "f32", ["m"])
gb.output("o", x.slice(0, 0, "m") + y)
program = compile_program(gb.finish_module(), {}, fuse=FUSE)
try:
    program.run({"x": np.ones(2, np.float32), "y": np.ones(10**7, np.float32)})
    print("no error")
except Exception as e:
    print(type(e).__name__)
"""


# regression (fixed): a slice past the end read out of bounds (SIGSEGV)
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_slice_overrun_does_not_crash(kernel_cache: Path, pipeline: str) -> None:
    """In a child Python, for each pipeline: an unfitting symbolic slice raises a
    Python error; the child exits normally."""
    env = {**os.environ, "NANOCOMPILE_CACHE_DIR": str(kernel_cache)}
    script = SEGFAULT_CHILD.replace("FUSE", str(pipeline == "fused"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 0, f"child died with {proc.returncode}"
    assert proc.stdout.strip() in ("ArgumentError", "KernelError"), proc.stdout


@pytest.fixture(scope="module")
def unused_input(kernel_cache: Path) -> Case:
    gb = GraphBuilder("unused_input")
    x = gb.input("x", "f32", ["n"])
    gb.input("shape_only", "f32", ["m"])  # consumed by no op; binds m
    gb.output("y", -x)
    gb.output("m", gb.dim("m"))
    return build_case(gb)


# regression (fixed): lowering deleted inputs no op reads (DCE of graph.input)
def test_unused_input_keeps_signature(unused_input: Case) -> None:
    """The compiled signature is the graph's (an input that only binds a symbol
    counts), so the interpreter and both pipelines accept the same arguments
    and agree (fused: dce must not delete the unused ``graph.input`` either)."""
    inputs = {"x": np.ones(2, np.float32), "shape_only": np.ones(3, np.float32)}
    want, runs = unused_input.run_all(inputs)
    for pipeline, got in runs.items():
        assert int(got["m"]) == 3, pipeline
        assert_bitwise(got["y"], want["y"], f"y ({pipeline})")
        assert unused_input.programs[pipeline].signature.inputs == \
            unused_input.programs["unfused"].signature.inputs


@pytest.fixture(scope="module")
def nan_const(kernel_cache: Path) -> Case:
    gb = GraphBuilder("nan_const")
    cond = gb.input("cond", "bool", ["n"])
    x = gb.input("x", "f32", ["n"])
    nan = np.array(0xFFC12345, np.uint32).view(np.float32)  # -NaN, payload 0x12345
    gb.output("w", where(cond, x, gb.const(nan, "f32")))
    return build_case(gb)


# regression (fixed): NaN constants lost their sign and payload in C
def test_where_nan_constant_bits(nan_const: Case) -> None:
    """A NaN constant keeps its bits through ``where`` (bitwise claim), both
    pipelines (fused, the scalar constant is a literal inside the kernel)."""
    inputs = {"cond": np.array([True, False, False]), "x": np.ones(3, np.float32)}
    want, runs = nan_const.run_all(inputs)
    for pipeline, got in runs.items():
        assert_bitwise(got["w"], want["w"], f"where with a NaN constant ({pipeline})")
        assert got["w"].view(np.uint32)[1] == 0xFFC12345, pipeline


# --------------------------------------------------------------------------
# 10. regression: a bug this suite found in fusion (fixed)
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def negation_folds(kernel_cache: Path) -> Case:
    gb = GraphBuilder("negation_folds")
    x = gb.input("x", "f32", ["n"])
    y = gb.input("y", "f32", ["n"])
    z = gb.input("z", "f32", ["n"])  # its own input: a -x shared by both would be stored
    gb.output("neg_add", -x + y)
    gb.output("neg_mul_neg", -z * -z)
    return build_case(gb)


# bug: fused kernels lose the sign of a negated NaN. Reproduction:
#   gb = GraphBuilder("g"); x = gb.input("x", "f32", ["n"]); y = gb.input("y", "f32", ["n"])
#   gb.output("o", -x + y); m = gb.finish_module()
#   x = np.array([np.uint32(0x7FC12345).view(np.float32)]); y = np.ones(1, np.float32)
#   compile_program(m, {}, fuse=False).run(...)["o"] -> 0xffc12345 (= the interpreter)
#   compile_program(m, {}, fuse=True).run(...)["o"]  -> 0x7fc12345
# The fused kernel is ``v4 = -(v3); v6 = v4 + v5;``: the same scalar ops, in the
# same order, as the two unfused kernels, but within one C function gcc -O3
# rewrites ``(-a) + b`` to ``b - a`` and ``(-a) * (-a)`` to ``a * a`` (legal for
# gcc: IEEE 754 leaves the sign of a NaN result of add/mul unspecified; no flag
# among -fsignaling-nans / -frounding-math stops it; -O0 does not do it). Finite
# results are unaffected (those rewrites are exact), so only NaN sign bits
# differ, and with a single NaN operand, where the unfused program matches the
# interpreter bit for bit.
# Fixed: the C target now negates by flipping the sign bit (nc_negf), which gcc
# does not fold into the neighbouring add or mul.
def test_fused_negation_keeps_nan_sign(negation_folds: Case) -> None:
    """``-x + y`` and ``-z * -z`` with x, z NaNs (y finite): the unfused program is
    the interpreter bit for bit (the negated NaN, quieted); the fused program
    must be too (fusion claims to be bitwise equal to the unfused program)."""
    nan = np.array([0x7FC12345, 0xFFC00001, 0x7F800001], np.uint32).view(np.float32)
    inputs = {"x": nan, "y": np.ones(3, np.float32), "z": nan}
    want = run_graph(negation_folds.module, inputs, {})
    unfused = negation_folds.programs["unfused"].run(inputs)
    fused = negation_folds.programs["fused"].run(inputs)
    for name in want:
        assert_bitwise(unfused[name], want[name], f"{name} (unfused)")
    for name in want:
        assert_bitwise(fused[name], unfused[name], f"{name}: fused vs unfused")

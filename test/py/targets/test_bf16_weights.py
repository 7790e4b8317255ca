"""bf16 weights stay bf16 (issue 17): a weight stored as bf16 in the graph,
followed by the exact cast to f32, computes the bits of the same graph whose
weight is the widened f32 array.

Claims, on primitive and kernel shapes (projection with bias, the fused
gate/up pair and down, a tied embedding read by a gather and by the LM head,
an rms_norm weight, an elementwise use), each compiled with the default
schedules of every arch this CPU runs:

* fusion widens the weight where it is read: the bf16 program launches as
  many kernels as the f32 one (no kernel stores a widened copy), binds the
  weights as bf16 and picks the same schedules (a projection's first candidate
  may be the bf16 one, a strided decode tile);
* the vector archs load bf16 vectors and widen them in registers
  (``_cvtepu16_epi32``, shift, reinterpret); the scalar path ``nc_bf16``;
* its outputs are bitwise those of the f32 program on the widened weights,
  at 1, 2 and 3 threads: the widened value is the same f32, so every later
  instruction sees the same operands. Specials (NaN payloads, inf, ±0,
  subnormals) in the elementwise case; in the matmuls ±inf, ±0 and
  subnormals but no NaN operand (which of two NaN payloads an FMA keeps is
  the instruction form's choice, which gcc's register allocation makes);
* the interpreter runs a bf16 weight as its bits widened (bitwise the f32
  graph's result);
* bytes moved count 2 per bf16 weight element;
* ``vectorize`` by 4, 8 and 16 of a loop loading bf16 (an elementwise loop
  and a matmul's lanes loop) gives the scalar loop's bits; a lane-varying
  bf16 load used other than widened is refused (``NoVectorForm``), the kernel
  unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from _arches import arch_params
from _numerics import assert_bitwise, random_f32, rng_for
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser

from nanocompile.analysis.work import count_work
from nanocompile.checkpoint.safetensors import bf16_to_f32, f32_to_bf16
from nanocompile.compiler import (
    CompileOptions,
    Pipeline,
    compile_loop,
    lower_to_loop,
    optimize_graph,
)
from nanocompile.dialects import get_all_dialects, loop
from nanocompile.frontend import GraphBuilder, gather
from nanocompile.frontend.composites import linear, rms_norm, silu
from nanocompile.frontend.tensor import Tensor
from nanocompile.interpreter import run_graph
from nanocompile.schedule.vectorize import NoVectorForm, vectorize
from nanocompile.targets.arch import Arch, cpu_flags

THREADS = (1, 2, 3)
WIDTH_FLAGS = {4: ("avx2", "fma"), 8: ("avx2", "fma"), 16: ("avx512f",)}

# name -> shape of the weights the cases read
Shapes = dict[str, tuple[int, ...]]
Case = Callable[[GraphBuilder, Callable[[str], Tensor]], None]


def _projection(k: int, n: int) -> tuple[Shapes, Case]:
    def build(gb: GraphBuilder, w: Callable[[str], Tensor]) -> None:
        x = gb.input("x", "f32", ["seq", k])
        gb.output("out", linear(x, w("w"), w("b")))
    return {"w": (n, k), "b": (n,)}, build


def _mlp(hidden: int, inter: int) -> tuple[Shapes, Case]:
    def build(gb: GraphBuilder, w: Callable[[str], Tensor]) -> None:
        x = gb.input("x", "f32", ["seq", hidden])
        h = rms_norm(x, w("norm"), 1e-6)
        act = silu(linear(h, w("gate"))) * linear(h, w("up"))
        gb.output("out", x + linear(act, w("down")))
    return {"norm": (hidden,), "gate": (inter, hidden), "up": (inter, hidden),
            "down": (hidden, inter)}, build


def _embedding(vocab: int, hidden: int) -> tuple[Shapes, Case]:
    """A tied embedding: gathered by the ids, and the LM head's matrix."""
    def build(gb: GraphBuilder, w: Callable[[str], Tensor]) -> None:
        ids = gb.input("ids", "i64", ["seq"])
        table = w("embed")
        x = rms_norm(gather(table, ids), w("norm"), 1e-6)
        gb.output("x", x)
        gb.output("logits", x @ table.T)
    return {"embed": (vocab, hidden), "norm": (hidden,)}, build


def _elementwise(n: int) -> tuple[Shapes, Case]:
    def build(gb: GraphBuilder, w: Callable[[str], Tensor]) -> None:
        x = gb.input("x", "f32", ["seq", n])
        gb.output("out", x * w("scale") + w("shift"))
    return {"scale": (n,), "shift": (n,)}, build


CASES = {
    "projection 64x48": _projection(64, 48),
    "projection 96x16": _projection(96, 16),
    "projection ragged k 20": _projection(20, 24),
    "mlp 32/80": _mlp(32, 80),
    "embedding + lm head": _embedding(40, 32),
    "elementwise 37": _elementwise(37),
}


def build(case: str, fmt: str) -> ModuleOp:
    """``case`` with its weights stored in ``fmt`` (bf16: widened by a cast)."""
    shapes, body = CASES[case]
    gb = GraphBuilder("case")

    def weight(name: str) -> Tensor:
        t = gb.weight(name, list(shapes[name]), fmt)
        return t.cast("f32") if fmt == "bf16" else t

    body(gb, weight)
    return gb.finish_module()


def bf16_weights(case: str, specials: bool, nan: bool = True) -> dict[str, np.ndarray]:
    """Random bf16 bit patterns per weight (with specials: NaN, inf, ±0,
    subnormals; ``nan=False``: a NaN becomes -inf)."""
    shapes, _ = CASES[case]
    rng = rng_for(f"bf16 weights {case}", 0)
    out = {}
    for name, shape in shapes.items():
        values = random_f32(rng, shape, specials=specials)
        if not nan:
            values = np.where(np.isnan(values), np.float32(-np.inf), values)
        out[name] = f32_to_bf16(values)
    return out


def inputs(case: str, seq: int, rng: np.random.Generator, specials: bool
           ) -> dict[str, np.ndarray]:
    shapes, _ = CASES[case]
    if case.startswith("embedding"):
        return {"ids": rng.integers(0, shapes["embed"][0], seq).astype(np.int64)}
    k = next(iter(shapes.values()))
    width = k[-1] if case.startswith(("projection", "mlp")) else k[0]
    if case.startswith("mlp"):
        width = shapes["norm"][0]
    return {"x": random_f32(rng, (seq, width), specials=specials)}


def widened(weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: bf16_to_f32(bits) for name, bits in weights.items()}


def pipeline(case: str, fmt: str, arch: Arch) -> Pipeline:
    return Pipeline(build(case, fmt), CompileOptions(arch=arch.name))


def kernels_text(module: ModuleOp) -> str:
    return "\n".join(str(op) for op in module.ops if isinstance(op, loop.KernelOp))


# --------------------------------------------------------------------------
# compiled: bf16 storage = f32 widened, every arch, 1..3 threads


@pytest.mark.parametrize("arch", arch_params())
@pytest.mark.parametrize("case", list(CASES))
def test_bf16_storage_is_bitwise_the_widened_f32(case: str, arch: Arch) -> None:
    p16, p32 = pipeline(case, "bf16", arch), pipeline(case, "f32", arch)
    # fusion widens where the weight is read: no extra kernel, the same schedules
    # (a bf16 projection's candidates start with a strided decode tile: defaults.py)
    launches16 = count_work(p16.kernels).launches
    assert launches16 == count_work(p32.kernels).launches, case
    for d16, d32 in zip(p16.decisions, p32.decisions, strict=True):
        assert (d16.chosen is None) == (d32.chosen is None), (case, d16.kernel)
        assert d32.chosen is None or d32.chosen in d16.candidates, (case, d16.kernel)
    c = p16.text("c")
    if arch.vector and case != "projection ragged k 20":  # ragged k: scalar lanes
        assert "_cvtepu16_epi32" in c, case
    assert "nc_bf16(" in c, case  # the scalar tails and the epilogue's bias
    bits = bf16_weights(case, specials=True, nan=case.startswith("elementwise"))
    prog16 = compile_loop(p16.kernels, bits)
    prog32 = compile_loop(p32.kernels, widened(bits))
    rng = rng_for(f"bf16 inputs {case}", 0)
    for threads in THREADS:
        prog16.set_threads(threads)
        prog32.set_threads(threads)
        for seq in (1, 2, 3, 7):
            feed = inputs(case, seq, rng, specials=case.startswith("elementwise"))
            got, want = prog16.run(feed), prog32.run(feed)
            for name in want:
                assert_bitwise(got[name], want[name],
                               f"{case}, {arch.name}, {name}, seq {seq}, {threads} threads")


def test_bf16_weights_are_bound_as_bf16() -> None:
    """The program reads the uint16 bits: an f32 array for a bf16 weight is an
    argument error naming the weight and the dtype."""
    from nanocompile.dialects.graph.signature import ArgumentError

    case = "projection 64x48"
    kernels = Pipeline(build(case, "bf16")).kernels
    bits = bf16_weights(case, specials=False)
    with pytest.raises(ArgumentError, match=r"weight 'w'.*bf16"):
        compile_loop(kernels, widened(bits))


# --------------------------------------------------------------------------
# the interpreter


@pytest.mark.parametrize("case", list(CASES))
def test_interpreter_bf16_is_bitwise_the_widened_f32(case: str) -> None:
    bits = bf16_weights(case, specials=True)
    rng = rng_for(f"bf16 interpreter {case}", 0)
    feed = inputs(case, 3, rng, specials=True)
    got = run_graph(build(case, "bf16"), feed, bits)
    want = run_graph(build(case, "f32"), feed, widened(bits))
    for name in want:
        assert_bitwise(got[name], want[name], f"{case} {name}")


# --------------------------------------------------------------------------
# bytes moved


def test_bf16_weights_count_two_bytes_per_element() -> None:
    """The projection reads W [48, 64] and b [48] once per launch: the bf16
    program moves 2 bytes less per weight element than the f32 one, nothing
    else changes."""
    case = "projection 64x48"
    w16 = count_work(lower_to_loop(optimize_graph(build(case, "bf16"))))
    w32 = count_work(lower_to_loop(optimize_graph(build(case, "f32"))))
    assert w32.bytes_written == w16.bytes_written
    assert str(w32.bytes_read - w16.bytes_read) == str(2 * (48 * 64 + 48))


def test_gather_of_a_bf16_table_counts_the_rows_it_reads() -> None:
    """The widening does not widen the footprint: a gather reads one row per id."""
    case = "embedding + lm head"
    w16 = count_work(lower_to_loop(optimize_graph(build(case, "bf16"))))
    w32 = count_work(lower_to_loop(optimize_graph(build(case, "f32"))))
    # the gather reads seq rows of the table and the norm, the head the whole table
    diff = w32.bytes_read - w16.bytes_read
    for seq in (1, 5):
        assert diff.evaluate({"seq": seq}) == 2 * (seq * 32 + 32 + 40 * 32), seq


# --------------------------------------------------------------------------
# vectorize on bf16 loads


def _width_params() -> list[object]:
    params = []
    for w, flags in WIDTH_FLAGS.items():
        missing = [f for f in flags if f not in cpu_flags()]
        marks = [pytest.mark.skip(reason=f"the CPU has no {', '.join(missing)}")] \
            if missing else []
        params.append(pytest.param(w, id=f"w{w}", marks=marks))
    return params


def _parse(text: str) -> ModuleOp:
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return Parser(ctx, text).parse_module()


def _kernel(module: ModuleOp) -> loop.KernelOp:
    (kernel,) = [op for op in module.ops if isinstance(op, loop.KernelOp)]
    return kernel


@pytest.mark.parametrize("width", _width_params())
@pytest.mark.parametrize("case", ["elementwise 37", "projection 64x48"])
def test_vectorize_widens_bf16_vectors(case: str, width: int) -> None:
    """``vectorize`` of the elementwise loop ``d1`` (37: a scalar tail) or the
    matmul's lanes loop ``k`` by 4, 8 and 16: a ``vector<Wxbf16>`` load and
    its ``arith.extf``, the unscheduled kernel's bits."""
    module = lower_to_loop(optimize_graph(build(case, "bf16")))
    name = "d1" if case.startswith("elementwise") else "k"
    vectorized = module.clone()
    vectorize(_kernel(vectorized), name, width)
    vectorized.verify()
    text = str(_kernel(vectorized))
    assert f"vector<{width}xbf16>" in text
    assert f"vector<{width}xbf16> to vector<{width}xf32>" in text  # the arith.extf
    bits = bf16_weights(case, specials=case.startswith("elementwise"))
    feed = inputs(case, 3, rng_for(f"bf16 vectorize {case}", width),
                  specials=case.startswith("elementwise"))
    want = compile_loop(module, bits).run(feed)
    got = compile_loop(vectorized, bits).run(feed)
    for key in want:
        assert_bitwise(got[key], want[key], f"{case} by {width}")


COPY = """builtin.module {
  loop.kernel @copy(%0: !loop.ptr<bf16>, %1: !loop.ptr<bf16>, %2: !loop.ptr<f32>) syms []
      access ["w", "r", "w"] footprints [#loop.fp<[16], [1]>, #loop.fp<[16], [1]>,
                                         #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    loop.for "i" %i = %c0 to %c16 {
      %x = loop.load %1[%i] strides [1] : bf16
      loop.store %x, %0[%i] strides [1] : bf16
      %y = arith.extf %x : bf16 to f32
      loop.store %y, %2[%i] strides [1] : f32
      loop.yield
    }
  }
}"""


def test_a_bf16_load_used_unwidened_is_refused() -> None:
    module = _parse(COPY)
    kernel = _kernel(module)
    before = str(kernel)
    with pytest.raises(NoVectorForm, match="bf16 data used other than widened to f32"):
        vectorize(kernel, "i", 8)
    assert str(kernel) == before


def test_a_bf16_vector_store_is_invalid_ir() -> None:
    """Only loads have bf16 vectors (bf16 is never computed, only widened)."""
    text = """builtin.module {
  loop.kernel @k(%0: !loop.ptr<bf16>, %1: !loop.ptr<bf16>) syms [] access ["w", "r"]
      footprints [#loop.fp<[16], [1]>, #loop.fp<[16], [1]>] {
    %c0 = arith.constant 0 : index
    %x = loop.load %1[%c0] strides [1] : vector<16xbf16>
    loop.store %x, %0[%c0] strides [1] : vector<16xbf16>
  }
}"""
    module = _parse(text)
    with pytest.raises(Exception, match="vector accesses are 1-d f32 vectors"):
        module.verify()

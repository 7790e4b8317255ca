"""spec §5 kernel A (W8A32) compiled, bitwise against the NumPy reference of
the spec (``_int8_reference.kernel_a``, written from the spec alone): issue
18's "must show" item 1 for kernel A.

Kernel A as a graph: ``y = matmul(x, permute(cast(q)), order="blocks32") *
broadcast(reshape(scale))`` (``+ bias`` after that, if any), ``x`` an f32
input ``[M, K]``, ``q`` an i8 weight ``[N, K]``, ``scale`` an f32 weight
``[N]``. Claims, each compiled with the default schedules of every arch this
CPU runs (scalar always; AVX2 and AVX-512 skipped with their reason where the
CPU lacks them) at 1, 2 and 3 threads:

* K not a multiple of 32 or 8 (1, 7, 8, 31, 32, 33, 40, 47, 63, 72, 95, 100,
  135: no whole block, whole blocks only, leftover groups of 8 into c0, a tail
  of K mod 8 terms, or all of them), 1, 7 and 64 rows, with and without a
  bias: every output bit is the reference's;
* the fused pair of a gate/up projection (two kernel-A sums sharing the k
  loop, multiplied): the reference's product;
* specials: zero rows of x, -0.0 entries, an inf column of x (its products
  with q = 0 are the default NaN, the only NaN that arises, so the bits are
  defined), an all-zero weight row (scale 1.0): the reference's bits;
* unfused (the widening a kernel of its own) = fused, and the vector archs
  load the int8 weight as bytes widened in registers (no f32 copy, 1 byte
  per weight counted in the bytes moved);
* every model shape (q/o 896x896, k/v 896x128, gate/up 896x4864, down
  4864x896, the LM head 896x151936) at 1, 7 and 64 rows: the quick suite runs
  k/v at 1 and 7 rows on every arch; the full grid (every shape, rows,
  threads and arch) is marked slow: its weights (136 MB for the LM head) and
  the reference's loop over K (seconds per shape) are too much for the quick
  suite. For N > 256 a seeded random subset of 256 output columns is compared
  (the reference is a Python loop over k).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from _arches import arch_params
from _int8_reference import kernel_a, quantize_rows
from _numerics import assert_bitwise, rng_for

from nanocompile.analysis.work import count_work
from nanocompile.backend.runtime import CompiledProgram
from nanocompile.compiler import CompileOptions, Pipeline, compile_loop
from nanocompile.dialects import graph as g
from nanocompile.dialects import loop
from nanocompile.frontend.tensor import GraphBuilder, Tensor
from nanocompile.targets.arch import SCALAR, Arch

ROWS = (1, 7, 64)
THREADS = (1, 2, 3)
TAIL_KS = (1, 7, 8, 31, 32, 33, 40, 47, 63, 72, 95, 100, 135)
TAIL_N = 20  # output columns of the tail cases: not a multiple of any column tile
MODEL_SHAPES = {  # name: (K, N)
    "q_o": (896, 896), "k_v": (896, 128), "gate_up": (896, 4864), "down": (4864, 896),
    "lm_head": (896, 151936),
}
COMPARED_COLUMNS = 256


def kernel_a_graph(gb: GraphBuilder, x: Tensor, name: str, k: int, n: int,
                   bias: bool = False) -> Tensor:
    """Kernel A on ``x`` with the weights ``<name>.q`` (i8 ``[n, k]``),
    ``<name>.scale`` and, with ``bias``, ``<name>.bias`` (f32 ``[n]``)."""
    q = gb.weight(f"{name}.q", [n, k], "i8")
    scale = gb.weight(f"{name}.scale", [n])
    dot = gb.add(g.MatmulOp(x.value, q.cast("f32").T.value, order="blocks32"))
    y = dot * scale.reshape(1, n).broadcast_to(x.shape[0], n)
    if bias:
        y = y + gb.weight(f"{name}.bias", [n]).reshape(1, n).broadcast_to(x.shape[0], n)
    return y


def weights_for(name: str, k: int, n: int, rng: np.random.Generator, bias: bool = False,
                quantized: bool = True) -> dict[str, np.ndarray]:
    """The int8 format of random weights (``quantize_rows`` of normal values,
    row 0 all zero: scale 1.0); ``quantized=False`` draws the bytes directly
    (the LM head: its f32 matrix would be 545 MB)."""
    if quantized:
        w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
        w[0] = 0.0
        q, scale = quantize_rows(w)
    else:
        q = np.clip(np.rint(rng.standard_normal((n, k)) * 40), -127, 127).astype(np.int8)
        scale = (rng.random(n) * 2e-3 + 1e-4).astype(np.float32)
    out = {f"{name}.q": q, f"{name}.scale": scale}
    if bias:
        out[f"{name}.bias"] = rng.standard_normal(n).astype(np.float32)
    return out


def activations(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    """Activations of realistic magnitudes (normal, 1e-2 .. 1e2)."""
    x = rng.standard_normal((rows, k)).astype(np.float32)
    return x * (np.float32(10.0) ** rng.integers(-2, 3, (rows, 1))).astype(np.float32)


def reference(x: np.ndarray, w: dict[str, np.ndarray], name: str,
              columns: np.ndarray | None = None) -> np.ndarray:
    """The reference's output of kernel A ``name`` (at ``columns`` only, if given)."""
    q, scale = w[f"{name}.q"], w[f"{name}.scale"]
    if columns is not None:
        q, scale = q[columns], scale[columns]
    y = kernel_a(x, q, scale)
    bias = w.get(f"{name}.bias")
    if bias is not None:
        y = y + (bias if columns is None else bias[columns])[None, :]
    return y


def compile_for(module: object, weights: dict[str, np.ndarray], arch: Arch,
                fuse: bool = True) -> CompiledProgram:
    """``module`` (a graph) through every stage with the default schedules of ``arch``."""
    pipeline = Pipeline(module, CompileOptions(fuse=fuse, arch=arch.name))  # type: ignore[arg-type]
    return compile_loop(pipeline.kernels, weights)


def check(program: CompiledProgram, feeds: Sequence[dict[str, np.ndarray]],
          wants: Sequence[dict[str, np.ndarray]], label: str,
          columns: dict[str, np.ndarray] | None = None) -> None:
    """Every feed's outputs at every thread count are the wanted bits."""
    for threads in THREADS:
        assert program.set_threads(threads) == threads
        for feed, want in zip(feeds, wants, strict=True):
            got = program.run(feed)
            for out, bits in want.items():
                value = got[out] if columns is None else got[out][:, columns[out]]
                rows = next(iter(feed.values())).shape[0]
                assert_bitwise(value, bits, f"{label}: {out}, {rows} rows, {threads} threads")


# --------------------------------------------------------------------------
# K not a multiple of 32 or 8: one program of a kernel A per K


def _tail_module() -> tuple[object, dict[str, np.ndarray]]:
    """A kernel A per K of ``TAIL_KS``, every other one with a bias."""
    gb = GraphBuilder("tails")
    rng = rng_for("kernel A tails", 0)
    weights: dict[str, np.ndarray] = {}
    for i, k in enumerate(TAIL_KS):
        x = gb.input(f"x{k}", "f32", ["seq", k])
        gb.output(f"y{k}", kernel_a_graph(gb, x, f"w{k}", k, TAIL_N, bias=i % 2 == 1))
        weights |= weights_for(f"w{k}", k, TAIL_N, rng, bias=i % 2 == 1)
    return gb.finish_module(), weights


@pytest.mark.parametrize("arch", arch_params(quick_on_host_only=True))
def test_every_tail_is_the_reference(arch: Arch) -> None:
    module, weights = _tail_module()
    program = compile_for(module, weights, arch)
    rng = rng_for(f"kernel A tail inputs {arch.name}", 0)
    feeds, wants = [], []
    for rows in ROWS:
        feed = {f"x{k}": activations(rng, rows, k) for k in TAIL_KS}
        feeds.append(feed)
        wants.append({f"y{k}": reference(feed[f"x{k}"], weights, f"w{k}") for k in TAIL_KS})
    check(program, feeds, wants, f"tails, {arch.name}")


def test_unfused_is_the_fused() -> None:
    """One kernel per primitive (the int8 weight widened by a cast kernel into
    a temporary) gives the fused kernel's bits (scalar, so both run the lanes
    loop as lowered)."""
    module, weights = _tail_module()

    fused = compile_for(module, weights, SCALAR)
    unfused = compile_for(module, weights, SCALAR, fuse=False)
    assert unfused.launches > fused.launches  # the casts are kernels of their own
    rng = rng_for("kernel A unfused", 0)
    for rows in (1, 7):
        feed = {f"x{k}": activations(rng, rows, k) for k in TAIL_KS}
        got, want = unfused.run(feed), fused.run(feed)
        for k in TAIL_KS:
            assert_bitwise(got[f"y{k}"], want[f"y{k}"], f"unfused K={k}, {rows} rows")


# --------------------------------------------------------------------------
# gate/up: two kernel-A sums in one k loop


# the host's arch and scalar quickly (test_specials_are_the_reference: every arch)
@pytest.mark.parametrize("arch", arch_params(quick_on_host_only=True))
def test_fused_gate_up_pair_is_the_reference(arch: Arch) -> None:
    """``gate * up`` of two kernel-A projections: fusion puts both in one
    kernel sharing the k loop (two sums per column); each keeps its order.
    (The model's SwiGLU, ``silu(gate) * up``, is three kernels: an epilogue
    calling exp does not join a kernel-A matmul, lit fuse-kernel-a-swiglu.)"""
    k, n = 136, 36  # 4 blocks, a group of 8 (into c0) and no tail; columns not tiles' multiple
    gb = GraphBuilder("gate_up")
    x = gb.input("x", "f32", ["seq", k])
    gb.output("y", kernel_a_graph(gb, x, "gate", k, n) * kernel_a_graph(gb, x, "up", k, n))
    module = gb.finish_module()
    rng = rng_for("kernel A gate up", 0)
    weights = weights_for("gate", k, n, rng) | weights_for("up", k, n, rng)
    pipeline = Pipeline(module, CompileOptions(arch=arch.name))
    kernels = [op for op in pipeline.kernels.ops if isinstance(op, loop.KernelOp)]
    assert len(kernels) == 1, [op.sym_name.data for op in kernels]
    program = compile_loop(pipeline.kernels, weights)
    feeds = [{"x": activations(rng, rows, k)} for rows in ROWS]
    wants = [{"y": reference(f["x"], weights, "gate") * reference(f["x"], weights, "up")}
             for f in feeds]
    check(program, feeds, wants, f"gate/up, {arch.name}")


# --------------------------------------------------------------------------
# specials


@pytest.mark.parametrize("arch", arch_params())
def test_specials_are_the_reference(arch: Arch) -> None:
    """Zero rows, -0.0 entries, an inf column (its products with the zero
    weights of row 0 and the zero entries of q are the default NaN; every NaN
    the kernel makes is that one, so the bits are defined) and an all-zero
    weight row."""
    k, n = 100, 24
    gb = GraphBuilder("specials")
    gb.output("y", kernel_a_graph(gb, gb.input("x", "f32", ["seq", k]), "w", k, n, bias=True))
    module = gb.finish_module()
    rng = rng_for("kernel A specials", 0)
    weights = weights_for("w", k, n, rng, bias=True)
    assert not weights["w.q"][0].any()
    assert (weights["w.q"] == 0).sum() > n  # zeros elsewhere too, against the inf column
    program = compile_for(module, weights, arch)
    x = activations(rng, 7, k)
    x[1] = 0.0
    x[2] = -0.0
    x[3, ::3] = -0.0
    x[4:, 42] = np.inf  # an inf column (as the block's lane 2 of c1)
    x[6, 42] = -np.inf
    want = reference(x, weights, "w")
    assert np.isnan(want).any()
    assert np.isinf(want).any()
    check(program, [{"x": x}], [{"y": want}], f"specials, {arch.name}")


# --------------------------------------------------------------------------
# the program: int8 read as bytes, widened in registers


# the host's arch and scalar quickly (test_specials_are_the_reference: every arch)
@pytest.mark.parametrize("arch", arch_params(quick_on_host_only=True))
def test_int8_weights_are_read_as_bytes(arch: Arch) -> None:
    """One kernel (no widened copy), the i8 weight bound as int8 and counted at
    1 byte per element; the vector archs load bytes and widen them in
    registers, by the arch's width when K is a multiple of 32 (no tail of 8):
    16 lanes on AVX-512 (accumulators ``c0 | c1`` and ``c2 | c3``, each halved
    by ``loop.foldhalf`` before the tree's other bits), 8 on AVX2."""
    k, n = 896, 128
    gb = GraphBuilder("kv")
    gb.output("y", kernel_a_graph(gb, gb.input("x", "f32", ["seq", k]), "w", k, n, True))
    pipeline = Pipeline(gb.finish_module(), CompileOptions(arch=arch.name))
    work = count_work(pipeline.kernels)
    assert work.launches == 1
    want = f"{4 * k}*seq + {k * n + 4 * n + 4 * n}"  # x, q (1 byte each), scale, bias
    assert str(work.bytes_read) == want
    assert str(work.bytes_written) == f"{4 * n}*seq"
    c = pipeline.text("c")
    kernel = c.split("nc_parallel_for")[0].split("nck_")[-1]
    if arch.f32_lanes == 16:
        assert "_mm_loadu_si128((const __m128i *)&p" in c
        assert "_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(" in c
        assert "_mm512_extractf64x4_pd(" in kernel  # loop.foldhalf
        assert "nc_lanesum8_t2_0_1(" in c
    elif arch.vector:
        assert "_mm_loadl_epi64((const __m128i *)&p" in c
        assert "_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(" in c
        assert "nc_lanesum8_t2_0_1(" in c
        assert "__m512 " not in kernel
    else:
        assert "vector" not in str(pipeline.kernels)
    from nanocompile.dialects.graph.signature import ArgumentError

    with pytest.raises(ArgumentError, match=r"weight 'w\.q'.*i8"):  # an f32 array for int8
        compile_loop(pipeline.kernels, {"w.q": np.zeros((n, k), np.float32),
                                        "w.scale": np.ones(n, np.float32),
                                        "w.bias": np.zeros(n, np.float32)})


# --------------------------------------------------------------------------
# the model's shapes


def _shape_case(name: str, arch: Arch, rows: Sequence[int], label: str) -> None:
    k, n = MODEL_SHAPES[name]
    rng = rng_for(f"kernel A {name}", 0)
    bias = name in ("q_o", "k_v")  # q, k, v have a bias (o_proj does not, the same kernel)
    weights = weights_for("w", k, n, rng, bias, quantized=name != "lm_head")
    gb = GraphBuilder(name)
    gb.output("y", kernel_a_graph(gb, gb.input("x", "f32", ["seq", k]), "w", k, n, bias))
    program = compile_for(gb.finish_module(), weights, arch)
    columns = None if n <= COMPARED_COLUMNS else np.sort(
        rng_for(f"kernel A {name} columns", 0).choice(n, COMPARED_COLUMNS, replace=False))
    feeds = [{"x": activations(rng, r, k)} for r in rows]
    wants = [{"y": reference(f["x"], weights, "w", columns)} for f in feeds]
    check(program, feeds, wants, f"{label} {name} {k}x{n}, {arch.name}",
          None if columns is None else {"y": columns})


# the host's arch and scalar quickly (test_specials_are_the_reference: every arch)
@pytest.mark.parametrize("arch", arch_params(quick_on_host_only=True))
def test_kv_projection_is_the_reference(arch: Arch) -> None:
    """A model shape in the quick suite: k/v (896 -> 128, with bias) at 1 and 7 rows."""
    _shape_case("k_v", arch, (1, 7), "quick")


@pytest.mark.slow  # minutes: 136 MB of LM-head weights, seconds of reference per shape
@pytest.mark.parametrize("arch", arch_params())
@pytest.mark.parametrize("name", list(MODEL_SHAPES))
def test_every_model_shape_is_the_reference(name: str, arch: Arch) -> None:
    _shape_case(name, arch, ROWS, "full")

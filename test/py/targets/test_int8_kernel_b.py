"""spec §5 kernel B (W8A8) compiled, bitwise against the NumPy reference of the
spec (``_int8_reference.kernel_b``, written from the spec alone): issue 18's
"must show" item 1 for kernel B, on every int8-dot path of its integer core.

Kernel B as the compiler builds it: a projection ``x @ W.T`` (``W`` an f32
weight ``[N, K]``, a bias after it) through ``quantize-int8{kernel=b}``: the
activations quantized per block of 32 (``graph.round``, the block scales, the
offset summed ``order = "sequential"``), ``graph.matmul_i8`` (the integer core,
``lowering/builder.py``'s ``emit_matmul_i8``), then ``(total - offset) *
scale``; the weights bound are the tests' own ``quantize_rows`` of ``W``.
Claims:

* K with and without tails (1, 7, 31, 32, 33, 40, 100, 128, 160, 896: no whole
  block, whole blocks only, leftover blocks into acc0, a tail of K mod 32
  columns, or all of them), 1 and 7 rows, 1 and 2 threads, with and without a
  bias: every output bit is the reference's, specials among the rows (an
  all-zero row: scale 1.0; -0.0; every |x| the block's max: xq = +-127; exact
  halves x / xs = k + 1/2, which roundf takes away from zero);
* unfused (one kernel per primitive) = fused, bit for bit;
* the Loop IR states the order: a lanes loop of 32 lanes, tail 8, kernel A's
  tree, over the lane terms, each an exact i32 dot product of 4 columns (one
  ``loop.dot4`` of two ``vector<4xi8>`` loads); the weight is read as bytes (1
  byte per element counted); the default schedules vectorize the lanes loop by
  8 (``vector<32xi8>`` loads, ``loop.dot4`` of 8 i32 lanes) on AVX2, by 16 on
  AVX-512 where K is a multiple of 128 (``vector<64xi8>``, two blocks per
  vector, their scales packed) and jam 16 columns;
* every int8-dot path (``targets/arch.py``; ``PATHS``): ``scalar`` (the scalar
  arch: ``nc_dot4`` per term, what every CPU runs), ``avx2`` (``vpmaddubsw``
  with the sign trick, the AVX2 arch), ``avx_vnni`` (``_mm256_dpbusd_avx_epi32``,
  the AVX2 arch), ``avx512_vnni`` (``_mm512_dpbusd_epi32``, the AVX-512 arch) and
  ``avx2/avx512`` (the AVX2 path on the AVX-512 arch: its 8 lanes twice per 16),
  each chosen by ``NANOCOMPILE_INT8_DOT`` and skipped with its reason where the
  CPU lacks its flags, gives the reference's bits on the tails and the model's
  shapes (q/o, k/v, gate/up, down at 1, 7 and 64 rows, a column subset of 256),
  at 1, 2 and 3 threads (the C is checked to hold the path's instruction);
* the quick suite compiles the scalar path and the host's best path on the
  tails; the other paths and the model's shapes are marked slow (seconds of gcc
  and of the reference each).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from _arches import missing_reason
from _int8_reference import kernel_b, quantize_rows
from _numerics import assert_bitwise, rng_for

from nanocompile.analysis.work import kernel_bytes
from nanocompile.backend.runtime import CompiledProgram
from nanocompile.compiler import CompileOptions, Pipeline, compile_loop, int8_pass
from nanocompile.dialects import loop
from nanocompile.frontend.tensor import GraphBuilder
from nanocompile.schedule.defaults import STRIDED_DECODE_COLUMNS
from nanocompile.targets.arch import (
    AVX2,
    AVX512,
    INT8_DOT_FLAGS,
    SCALAR,
    Arch,
    best_int8_dot,
    cpu_flags,
)

THREADS = (1, 2, 3)
ROWS = (1, 7, 64)
PATHS = {"scalar": SCALAR, "avx2": AVX2, "avx_vnni": AVX2, "avx512_vnni": AVX512,
         "avx2/avx512": AVX512}
"""Each int8-dot path and the arch it is compiled for (the scalar arch does not
vectorize: its integer core is ``nc_dot4`` per lane term; ``avx2/avx512``: the
AVX2 path on the AVX-512 arch, a CPU with AVX-512F but no VNNI, whose lane
terms in vectors of 16 run the path's 8 lanes twice)."""
PATH_C = {"scalar": "nc_dot4(", "avx2": "_mm256_maddubs_epi16(",
          "avx_vnni": "_mm256_dpbusd_avx_epi32(", "avx512_vnni": "_mm512_dpbusd_epi32(",
          "avx2/avx512": "_mm256_maddubs_epi16("}
"""What the C of each path holds (its instruction; AVX512-VNNI: on zmm, the
lane terms of a K that is a multiple of 128 in vectors of 16)."""


def dot_path(key: str) -> str:
    """The int8-dot path of a ``PATHS`` key."""
    return key.split("/")[0]
HOST_PATH = best_int8_dot(cpu_flags())
TAIL_KS = (1, 7, 31, 32, 33, 40, 100, 128, 160, 896)
TAIL_N = 20  # output columns: not a multiple of any column tile
MODEL_SHAPES = {"q_o": (896, 896), "k_v": (896, 128), "gate_up": (896, 4864),
                "down": (4864, 896)}  # name: (K, N); the LM head is kernel A's
COMPARED_COLUMNS = 256


def projection(gb: GraphBuilder, k: int, n: int, name: str, bias: bool) -> None:
    """``y<name> = x<name> @ w<name>.T (+ bias)``: with no bias negated, so the
    projection is not a graph output (which ``quantize-int8`` takes for the LM
    head, kernel A); negation is exact."""
    x = gb.input(f"x{name}", "f32", ["seq", k])
    y = x @ gb.weight(f"w{name}", [n, k]).T
    if bias:
        y = y + gb.weight(f"b{name}", [n]).reshape(1, n).broadcast_to(x.shape[0], n)
    else:
        y = -y
    gb.output(f"y{name}", y)


def weights_for(name: str, k: int, n: int, rng: np.random.Generator,
                bias: bool) -> dict[str, np.ndarray]:
    """The int8 format of random weights (``quantize_rows``; row 0 all zero: scale 1.0)."""
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    w[0] = 0.0
    q, scale = quantize_rows(w)
    out = {f"w{name}.int8": q, f"w{name}.scale": scale}
    if bias:
        out[f"b{name}"] = rng.standard_normal(n).astype(np.float32)
    return out


def reference(x: np.ndarray, w: dict[str, np.ndarray], name: str,
              columns: np.ndarray | None = None) -> np.ndarray:
    q, scale = w[f"w{name}.int8"], w[f"w{name}.scale"]
    if columns is not None:
        q, scale = q[columns], scale[columns]
    y = kernel_b(x, q, scale)
    bias = w.get(f"b{name}")
    if bias is None:
        return -y
    return y + (bias if columns is None else bias[columns])[None, :]


def activations(rng: np.random.Generator, rows: int, k: int) -> np.ndarray:
    """Realistic magnitudes (normal, 1e-2 .. 1e2 per row); with 7 rows, rows 1-4
    are specials: all zero, -0.0 and 0.0 mixed, every |x| equal (xq = +-127), and
    exact halves (block max 127 so xs = 1.0, the others k + 1/2)."""
    x = rng.standard_normal((rows, k)).astype(np.float32)
    x *= (np.float32(10.0) ** rng.integers(-2, 3, (rows, 1))).astype(np.float32)
    if rows >= 5:
        x[1] = 0.0
        x[2, ::2] = -0.0
        x[3] = np.where(rng.random(k) < 0.5, -3.25, 3.25).astype(np.float32)
        halves = rng.integers(-126, 126, k).astype(np.float32) + np.float32(0.5)
        halves[::32] = 127.0  # each block's max: xs = 127 / 127 = 1.0
        x[4] = halves
    return x


def module_for(cases: Sequence[tuple[str, int, int, bool]]) -> object:
    gb = GraphBuilder("kernel_b")
    for name, k, n, bias in cases:
        projection(gb, k, n, name, bias)
    return gb.finish_module()


def compile_for(module: object, weights: dict[str, np.ndarray], arch: Arch,
                fuse: bool = True) -> CompiledProgram:
    """``module`` through ``quantize-int8{kernel=b}`` and every stage, the default
    schedules of ``arch`` (the int8-dot path: ``NANOCOMPILE_INT8_DOT`` or the host's)."""
    options = CompileOptions(fuse=fuse, arch=arch.name, quantize=int8_pass(kernel="b"))
    return compile_loop(Pipeline(module, options).kernels, weights)  # type: ignore[arg-type]


def path_reason(path: str) -> str | None:
    """Why the int8-dot ``path`` cannot run here (its arch's or its own flags), None
    when it can."""
    reason = missing_reason(PATHS[path])
    if reason is not None:
        return reason
    missing = [f for f in INT8_DOT_FLAGS[dot_path(path)] if f not in cpu_flags()]
    return (f"the CPU has no {', '.join(missing)} (the {path} int8-dot path untested here)"
            if missing else None)


def path_params(paths: Sequence[str] = tuple(PATHS)) -> list[object]:
    """``pytest.param`` per int8-dot path, id its name, skipped with its reason."""
    out = []
    for path in paths:
        reason = path_reason(path)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        out.append(pytest.param(path, id=path, marks=marks))
    return out


def compile_on_path(module: object, weights: dict[str, np.ndarray], path: str,
                    monkeypatch: pytest.MonkeyPatch) -> CompiledProgram:
    """``compile_for`` on the int8-dot ``path`` (``PATHS``' arch, the path by
    ``NANOCOMPILE_INT8_DOT``); its C holds the path's instruction."""
    monkeypatch.setenv("NANOCOMPILE_INT8_DOT", dot_path(path))
    program = compile_for(module, weights, PATHS[path])
    assert PATH_C[path] in program.source, path
    if path != "scalar":  # the integer core vectorized, 16 lanes on AVX-512 (every
        # module here has a K that is a multiple of 128: its lane terms run no tail)
        lanes = 16 if PATHS[path] is AVX512 else 8
        assert f"nc_dot4x{lanes}(" in program.source, path
    return program


def check(program: CompiledProgram, feeds: Sequence[dict[str, np.ndarray]],
          wants: Sequence[dict[str, np.ndarray]], label: str,
          columns: dict[str, np.ndarray] | None = None) -> None:
    for threads in THREADS:
        assert program.set_threads(threads) == threads
        for feed, want in zip(feeds, wants, strict=True):
            got = program.run(feed)
            for out, bits in want.items():
                value = got[out] if columns is None else got[out][:, columns[out]]
                rows = next(iter(feed.values())).shape[0]
                assert_bitwise(value, bits, f"{label}: {out}, {rows} rows, {threads} threads")


def _tails() -> tuple[list[tuple[str, int, int, bool]], dict[str, np.ndarray]]:
    rng = rng_for("kernel B tails", 0)
    cases = [(f"{k}", k, TAIL_N, i % 2 == 0) for i, k in enumerate(TAIL_KS)]
    weights: dict[str, np.ndarray] = {}
    for name, k, n, bias in cases:
        weights |= weights_for(name, k, n, rng, bias)
    return cases, weights


def _tail_feeds(label: str) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]],
                                    dict[str, np.ndarray]]:
    cases, weights = _tails()
    rng = rng_for(f"kernel B tail inputs {label}", 0)
    feeds, wants = [], []
    for rows in ROWS:
        feed = {f"x{name}": activations(rng, rows, k) for name, k, _, _ in cases}
        feeds.append(feed)
        wants.append({f"y{name}": reference(feed[f"x{name}"], weights, name)
                      for name, _, _, _ in cases})
    return feeds, wants, weights


def _tail_case(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cases, _ = _tails()
    feeds, wants, weights = _tail_feeds(path)
    program = compile_on_path(module_for(cases), weights, path, monkeypatch)
    check(program, feeds, wants, f"tails, {path} int8-dot path")


def test_every_tail_is_the_reference_scalar(monkeypatch: pytest.MonkeyPatch) -> None:
    _tail_case("scalar", monkeypatch)


@pytest.mark.skipif(HOST_PATH == "scalar", reason="this CPU has no vector int8-dot path")
def test_every_tail_is_the_reference_on_the_hosts_path(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """The path this CPU's programs use (``host_int8_dot``), in the quick suite."""
    _tail_case(HOST_PATH, monkeypatch)


@pytest.mark.slow  # seconds of gcc per path: the 3-minute budget
@pytest.mark.parametrize("path", path_params([p for p in PATHS if p not in ("scalar",
                                                                            HOST_PATH)]))
def test_every_tail_is_the_reference(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _tail_case(path, monkeypatch)


@pytest.mark.slow  # one kernel per primitive: hundreds of kernels to compile
def test_unfused_is_the_fused() -> None:
    cases, _ = _tails()
    feeds, _, weights = _tail_feeds("unfused")
    fused = compile_for(module_for(cases), weights, SCALAR)
    unfused = compile_for(module_for(cases), weights, SCALAR, fuse=False)
    assert unfused.launches > fused.launches
    for feed in feeds:
        got, want = unfused.run(feed), fused.run(feed)
        for name, _, _, _ in cases:
            assert_bitwise(got[f"y{name}"], want[f"y{name}"], f"unfused {name}")


def test_the_loop_ir_states_the_order_and_reads_bytes() -> None:
    """The integer core's kernel: a lanes loop (32 lanes, tail 8, tree [3, 4, 2, 0,
    1]) of FMAs over 8 lane terms per block, each the i32 ``loop.dot4`` of the 4
    bytes of xq and w from the term's first column, the K mod 32 tail unrolled
    after it (widened i8 products); the weight counted at 1 byte per element, the
    quantized activations at 1 and their scales at 4."""
    k, n = 100, 24
    module = module_for([("", k, n, True)])
    pipeline = Pipeline(module, CompileOptions(arch="scalar",  # type: ignore[arg-type]
                                               quantize=int8_pass(kernel="b")))
    kernels = [op for op in pipeline.kernels.ops if isinstance(op, loop.KernelOp)]
    (core,) = [kr for kr in kernels if "math.fma" in str(kr)]  # the only FMAs
    text = str(core)
    (lanes,) = [op for op in core.walk() if isinstance(op, loop.ForOp) and op.lanes is not None]
    assert "lanes 32 tail 8 tree [3, 4, 2, 0, 1]" in text
    parent = lanes.parent_op()
    assert isinstance(parent, loop.ForOp)
    assert parent.loop_name.data == "d1"  # right in the column loop: no loop in between
    in_lanes = str(lanes)
    assert in_lanes.count("math.fma") == 1
    assert in_lanes.count("loop.dot4") == 1  # xq and w of the lane's 4 columns
    assert in_lanes.count(": vector<4xi8>") == 2 + 1  # their loads, the dot's type
    assert "arith.extsi" not in in_lanes
    assert text.count(": i8 to i32") == 2 * (k % 32)  # the tail's
    i8_reads = [fp for arg, mode, fp in zip(core.args, core.modes, core.footprints.data,
                                           strict=True)
                if mode == "r" and arg.type.dtype.data == "i8"]
    # xq a view of the padded [seq, 128] buffer; w the [N, K] weight read transposed
    assert sorted(str(fp) for fp in i8_reads) == sorted([
        f"#loop.fp<[seq, {k}], [128, 1]>", f"#loop.fp<[{k}, {n}], [1, {k}]>"])
    read, written = kernel_bytes(core)
    blocks = -(-k // 32)
    # xq, w (1 byte each), xs, the offset, the row scale, the bias (4 bytes each)
    assert str(read) == f"{k + 4 * blocks + 4}*seq + {k * n + 4 * n + 4 * n}"
    assert str(written) == f"{4 * n}*seq"



_SHAPE_FEEDS: dict[str, tuple[dict[str, np.ndarray], list[dict[str, np.ndarray]],
                               list[dict[str, np.ndarray]], np.ndarray | None]] = {}


def _shape_feeds(name: str) -> tuple[dict[str, np.ndarray], list[dict[str, np.ndarray]],
                                     list[dict[str, np.ndarray]], np.ndarray | None]:
    """Weights, feeds at ``ROWS`` rows, the reference's outputs and the compared
    columns of the shape ``name`` (computed once per process: every path
    compares with the same reference)."""
    if name not in _SHAPE_FEEDS:
        k, n = MODEL_SHAPES[name]
        rng = rng_for(f"kernel B {name}", 0)
        weights = weights_for(name, k, n, rng, name in ("q_o", "k_v"))
        columns = None if n <= COMPARED_COLUMNS else np.sort(
            rng_for(f"kernel B {name} columns", 0).choice(n, COMPARED_COLUMNS,
                                                          replace=False))
        feeds = [{f"x{name}": activations(rng, rows, k)} for rows in ROWS]
        wants = [{f"y{name}": reference(f[f"x{name}"], weights, name, columns)}
                 for f in feeds]
        _SHAPE_FEEDS[name] = weights, feeds, wants, columns
    return _SHAPE_FEEDS[name]


def _shape_case(name: str, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    k, n = MODEL_SHAPES[name]
    weights, feeds, wants, columns = _shape_feeds(name)
    program = compile_on_path(module_for([(name, k, n, name in ("q_o", "k_v"))]), weights,
                              path, monkeypatch)
    check(program, feeds, wants, f"{name} {k}x{n}, {path} int8-dot path",
          None if columns is None else {f"y{name}": columns})


@pytest.mark.slow  # seconds of gcc and of the reference per shape
@pytest.mark.parametrize("path", path_params())
@pytest.mark.parametrize("name", list(MODEL_SHAPES))
def test_every_model_shape_is_the_reference(name: str, path: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _shape_case(name, path, monkeypatch)


def test_the_projection_tiles_rows() -> None:
    """``fuse`` stores the row-invariant ``128 * off`` (the offset's row kernel
    multiplies it once, at the end of its sum), so the projection's rows are a
    perfect nest and its default schedule is the projections' register tile:
    rows inside strided column tiles on the pool (8 columns ``n / 8`` apart,
    since session 20: decode 2.2x faster on a Zen 4), 3 rows x 2 columns jammed
    (6 sums x 4 vector accumulators), the leftover rows (all of them at decode)
    jamming the tile's 8 columns; the offset is read, never computed, in the
    projection. The bits at
    1, 7 and 64 rows (all leftover, 2 tiles + 1, 21 tiles + 1) and 1/2/3
    threads: ``test_every_tail_is_the_reference*`` and, slow, the model shapes."""
    k, n = 160, 32
    module = module_for([("", k, n, True)])
    pipeline = Pipeline(module, CompileOptions(arch="avx512",  # type: ignore[arg-type]
                                               quantize=int8_pass(kernel="b")))
    kernels = [op for op in pipeline.kernels.ops if isinstance(op, loop.KernelOp)]
    (core,) = [kr for kr in kernels if "loop.dot4" in str(kr)]
    names = [op.loop_name.data for op in core.walk() if isinstance(op, loop.ForOp)]
    assert names[:3] == ["d1o", "d1q", "d0o"], names  # rows inside the column tiles
    assert "d0_tail" in names
    first = next(op for op in core.walk() if isinstance(op, loop.ForOp))
    assert first.parallel is not None
    dots = {op.loop_name.data: str(op).count("loop.dot4") for op in core.walk()
            if isinstance(op, loop.ForOp) and op.loop_name.data in ("k", "k_tail")}
    assert dots == {"k": 3 * 2 * 4, "k_tail": STRIDED_DECODE_COLUMNS * 4}, dots
    assert "1.280000e+02" not in str(core)  # 128 * off: in the offset's kernel
    (offset,) = [kr for kr in kernels if "1.280000e+02" in str(kr)]
    assert "loop.dot4" not in str(offset)  # the offset's own (row) kernel

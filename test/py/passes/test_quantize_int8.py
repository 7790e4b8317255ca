"""The ``quantize-int8`` pass (issue 18, spec §5) on the Qwen2 graph.

Claims:

* on the full-size Qwen2 graph (bf16 and f32 weight formats): exactly the 7
  projections of every layer and, with the default ``embedding=int8``, the
  tied embedding (both its lookup and the LM head) are quantized; norms,
  biases and attention's matmuls are not; the graph verifies; every int8
  weight has its source's shape and an f32 scale per row; ``int8_sources``
  names each one's source (the names and shapes come from the config,
  independently of the pass);
* the bytes per decode step (``count_work`` of the lowered graph) drop by
  exactly what the format says: each quantized element read at 1 byte
  instead of 2 (bf16) or 4 (f32), plus 4 bytes per row for the scales; the
  lookup reads an int8 row and one scale per token;
* what the rewritten graph means (interpreted): kernel A of the tests'
  reference (``_int8_reference.kernel_a``) then the bias, bit for bit, and
  the lookup ``f32(q[id]) * scale[id]``;
* it is idempotent and refuses bad options with one line.

Kernel B (``kernel=b``, spec §5's W8A8):

* on the full-size Qwen2 graph (bf16 and f32, both embedding options): the 7
  projections of every layer become ``graph.matmul_i8`` minus the offset, times
  the row scale; each activation is quantized once (4 per layer: q/k/v share
  one, gate/up one, o and down one each), each with one block-order offset sum;
  the LM head stays kernel A (int8 embedding) or f32; the graph verifies;
* what it means (interpreted, both modes): the tests' reference
  ``_int8_reference.kernel_b`` then the bias, bit for bit, for K with and
  without tails, several projections of one activation, beside the int8
  embedding's lookup and kernel-A LM head; and on the tiny Qwen2 graph itself,
  layer 0's q projection of the real activation;
* the tiny model runs whole in kernel B (exact mode): finite logits, and its
  agreement with kernel A and f32 is printed (not a gate: random weights);
* its bytes per step are kernel A's plus, per token row and layer, four
  activation quantizations (derived from their four kernels) and the
  projections reading int8 activations; ``head=b`` (the LM head on kernel B
  too) one more quantization per LM-head row (all positions' logits).
"""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from _int8_reference import kernel_a, kernel_b
from _prompts import prompt_ids
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from nanocompile.analysis.work import count_work
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.int8 import quantize_rows
from nanocompile.checkpoint.snapshot import Snapshot, expected_tensors
from nanocompile.checkpoint.synth import synthetic_config
from nanocompile.compiler import lower_to_loop, optimize_graph
from nanocompile.dialects import graph as g
from nanocompile.frontend import GraphBuilder, gather
from nanocompile.inference.engine import Engine, SnapshotWeights
from nanocompile.interpreter import InterpreterBackend, run_graph
from nanocompile.ir.symbolic import Expr
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.passes.quantize_int8 import QuantizeInt8Pass, int8_sources

CFG = Qwen2Config.from_dict(synthetic_config())
EMBED = "model.embed_tokens.weight"
PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
ITEMSIZE = {"bf16": 2, "f32": 4}


def expected_quantized(layers: int, embedding: str) -> set[str]:
    names = {f"model.layers.{i}.{p}.weight" for i in range(layers) for p in PROJECTIONS}
    return names | ({EMBED} if embedding == "int8" else set())


def graph(weights: str, n_layers: int | None = None) -> ModuleOp:
    return build_qwen2(CFG, Qwen2GraphOptions(n_layers=n_layers, last_only=True,
                                              weights=weights))


@cache
def quantized(weights: str, embedding: str, n_layers: int | None = None,
              kernel: str = "a") -> ModuleOp:
    module = graph(weights, n_layers)
    QuantizeInt8Pass(kernel=kernel, embedding=embedding).apply(Context(), module)
    module.verify()
    return module


def ops(module: ModuleOp, kind: type) -> list:
    return [op for op in module.walk() if isinstance(op, kind)]


@pytest.mark.parametrize("weights", ["bf16", "f32"])
@pytest.mark.parametrize("embedding", ["int8", "f32"])
def test_qwen2_projections_and_embedding(weights: str, embedding: str) -> None:
    module = quantized(weights, embedding)
    layers = CFG.num_hidden_layers
    want = expected_quantized(layers, embedding)
    shapes = expected_tensors(CFG)
    sources = int8_sources(module)
    assert {src for src, _ in sources.values()} == want
    assert sources == {f"{n}.{part}": (n, part) for n in want for part in ("int8", "scale")}
    found = {op.weight_name.data: op.result.type.spec for op in ops(module, g.WeightOp)}
    for name in want:
        n, k = shapes[name]
        assert (found[f"{name}.int8"].dtype, found[f"{name}.int8"].shape) == ("i8", (n, k))
        assert (found[f"{name}.scale"].dtype, found[f"{name}.scale"].shape) == ("f32", (n,))
        assert name not in found
    # every other tensor of the checkpoint is still its own weight, in its format
    assert {n for n in found if n not in sources} == set(shapes) - want
    assert {found[n].dtype for n in found if n not in sources} == {weights}

    matmuls = Counter(op.order_name for op in ops(module, g.MatmulOp))
    lm_head = 1 if embedding == "int8" else 0
    assert matmuls == {"blocks32": 7 * layers + lm_head,
                       None: 2 * layers + 1 - lm_head}  # scores and context per layer
    for op in ops(module, g.MatmulOp):
        if op.order_name == "blocks32":  # rhs = permute(cast(i8 weight)), scaled after
            permute = op.rhs.owner
            assert isinstance(permute, g.PermuteOp)
            assert permute.permutation == (1, 0)
            cast = permute.operand.owner
            assert isinstance(cast, g.CastOp)
            assert g.tensor_type(cast.operand).dtype.data == "i8"
            (use,) = op.result.uses
            assert isinstance(use.operation, g.MulOp)
    gathers = ops(module, g.GatherOp)
    assert len(gathers) == (2 if embedding == "int8" else 1)  # the rows and their scales


def test_pass_is_idempotent() -> None:
    once = quantized("bf16", "int8", 2)
    twice = once.clone()
    QuantizeInt8Pass().apply(Context(), twice)
    assert str(twice) == str(once)


def _bytes(module: ModuleOp) -> Expr:
    return count_work(lower_to_loop(optimize_graph(module))).bytes_moved


def _saved(layers: int, embedding: str, itemsize: int) -> tuple[int, int]:
    """(constant, per-token) bytes a decode step saves: every quantized element at 1
    byte instead of ``itemsize``, plus an f32 scale per row; the lookup reads a row of
    int8 and one scale per token; the MLP's three kernels cost some back."""
    shapes = expected_tensors(CFG)
    names = expected_quantized(layers, embedding)
    elements = sum(shapes[n][0] * shapes[n][1] for n in names)
    rows = sum(shapes[n][0] for n in names)
    hidden = CFG.hidden_size
    per_token = itemsize * hidden - (hidden + 4) if embedding == "int8" else 0
    # kernel A's gate, up and SiLU are three kernels where the unquantized SwiGLU
    # is one: per token and layer x is read by both projections (4 H more) and
    # their sums are stored and read back (4 I + 4 I, then 8 I)
    per_token -= layers * (4 * hidden + 16 * CFG.intermediate_size)
    return (itemsize - 1) * elements - 4 * rows, per_token


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
@pytest.mark.parametrize(("weights", "embedding", "layers"), [
    ("bf16", "int8", None), ("bf16", "f32", 2), ("f32", "int8", 2), ("f32", "f32", 2)])
def test_bytes_per_step_one_per_weight_element(weights: str, embedding: str,
                                               layers: int | None) -> None:
    before = _bytes(graph(weights, layers))
    after = _bytes(quantized(weights, embedding, layers))
    const, per_token = _saved(layers or CFG.num_hidden_layers, embedding, ITEMSIZE[weights])
    assert before - after == Expr.lift(const) + per_token * Expr.sym("seq")
    for sym in ("past",):  # the f32 KV cache and the activations: unchanged
        assert after.coefficient(sym) == before.coefficient(sym)
    if (weights, embedding, layers) == ("bf16", "int8", None):
        assert str(after) == ("5376*past*seq + 5376*seq*seq + 24576*past + 4595596*seq "
                              "+ 496540160")


def _quantization_bytes(k: int) -> int:
    """Bytes one activation quantization moves per token row, K = ``k`` columns a
    multiple of 32 (nb = K / 32 blocks), in its four kernels: the block maxima read
    x (4 K) and write xs (4 nb); xq = round(x / xs) reads x and xs, writes K; the
    block sums read xq, write 4 nb (i32); the offset reads them and xs (8 nb) and
    writes 4."""
    nb = k // 32
    return (4 * k + 4 * nb) + (4 * k + 4 * nb + k) + (k + 4 * nb) + (8 * nb + 4)


def _moved(kernel: str, head: str = "a", layers: int = 2) -> Expr:
    """Bytes per step of the ``quantize-int8{kernel head}`` program, all positions."""
    module = build_qwen2(CFG, Qwen2GraphOptions(n_layers=layers, last_only=False,
                                                weights="bf16"))
    QuantizeInt8Pass(kernel=kernel, head=head).apply(Context(), module)
    module.verify()
    return _bytes(module)


def test_kernel_b_bytes_are_kernel_a_and_its_quantizations() -> None:
    """Kernel B against kernel A, per token row and layer: four activation
    quantizations (q/k/v's input and o's, H columns; gate/up's, H; down's, I), and
    each projection reads xq and xs (K + 4 nb bytes) instead of x (4 K), plus the
    offset (4) where its epilogue subtracts it: q, k, v, o and down; gate and up
    store raw sums and the SiLU kernel reads the offset once. The weights' bytes
    are the same int8 and scales (the constant term); the LM head is kernel A in
    both."""
    hidden, inter = CFG.hidden_size, CFG.intermediate_size

    def reads(k: int, offset: bool) -> int:  # a projection's x bytes: kernel B - kernel A
        return k + 4 * (k // 32) + (4 if offset else 0) - 4 * k

    per_layer = (3 * _quantization_bytes(hidden) + _quantization_bytes(inter)
                 + 4 * reads(hidden, True)  # q, k, v, o
                 + 2 * reads(hidden, False) + 4  # gate, up; the offset in the SiLU kernel
                 + reads(inter, True))  # down
    # by hand for H = 896, I = 4864: 3 * 9524 + 51684 - 4 * 2572 - 2 * 2576 + 4 - 13980
    assert per_layer == 50840
    a, b = _moved("a"), _moved("b")
    assert b - a == 2 * per_layer * Expr.sym("seq")
    assert b.coefficient("past") == a.coefficient("past")


def test_kernel_b_head_bytes_are_one_more_quantization() -> None:
    """``head=b`` (spec §5's switch) moves, per token row of the LM head, the bytes of
    one more activation quantization (H columns, nb = H / 32 blocks: block maxima
    read x, 4 H, and write xs, 4 nb; xq reads x and xs, writes H; the block sums
    read xq, write 4 nb; the offset reads them and xs, 8 nb, writes 4) and the LM
    head reads xq, xs and the offset (H + 4 nb + 4) instead of x (4 H): 7 H + 24 nb
    + 8 more. All positions' logits, so the final norm's output is a tensor in
    both programs."""
    hidden = CFG.hidden_size
    blocks = hidden // 32
    per_row = _quantization_bytes(hidden) + (hidden + 4 * blocks + 4) - 4 * hidden
    assert per_row == 7 * hidden + 24 * blocks + 8
    assert _moved("b", "b") - _moved("b", "a") == per_row * Expr.sym("seq")


def _linear_graph(n: int, k: int) -> g.GraphFuncOp:
    gb = GraphBuilder("linear")
    x = gb.input("x", "f32", ["seq", k])
    ids = gb.input("ids", "i64", ["seq"])
    w = gb.weight("w", [n, k], "bf16").cast("f32")
    b = gb.weight("b", [n])
    gb.output("y", x @ w.T + b.reshape(1, n).broadcast_to("seq", n))
    gb.output("rows", gather(w, ids))
    return gb.finish()


@pytest.mark.parametrize(("n", "k"), [(16, 40), (24, 77), (8, 896)])
def test_the_rewritten_graph_means_kernel_a(n: int, k: int) -> None:
    """Interpreted, the quantized graph is kernel A (the reference) plus the bias,
    and the lookup f32(q[id]) * scale[id], bit for bit."""
    func = _linear_graph(n, k)
    QuantizeInt8Pass().apply(Context(), ModuleOp([func]))
    func.verify()
    assert set(int8_sources(func)) == {"w.int8", "w.scale"}
    rng = np.random.default_rng(n * k)
    w = (rng.standard_normal((n, k)) * 0.1).astype(np.float32)
    w = (w.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)  # bf16 values
    q, scale = quantize_rows(w)
    bias = rng.standard_normal(n).astype(np.float32)
    x = rng.standard_normal((7, k)).astype(np.float32)
    ids = np.array([3, 0, n - 1, 3, 1, 2, 5], np.int64)
    out = run_graph(func, {"x": x, "ids": ids}, {"w.int8": q, "w.scale": scale, "b": bias})
    want = kernel_a(x, q, scale) + bias[None, :]
    np.testing.assert_array_equal(out["y"].view(np.uint32), want.view(np.uint32))
    rows = q[ids].astype(np.float32) * scale[ids][:, None]
    np.testing.assert_array_equal(out["rows"].view(np.uint32), rows.view(np.uint32))


def test_int8_sources_lists_pairs_only() -> None:
    gb = GraphBuilder("f")
    x = gb.input("x", "f32", [2, 4])
    gb.output("a", x + gb.weight("lonely.int8", [2, 4], "i8").cast("f32"))
    gb.output("b", gb.weight("odd.int8", [2, 4], "f32"))
    gb.output("c", gb.weight("odd.scale", [2]))
    gb.output("d", gb.weight("short.int8", [2, 4], "i8"))
    gb.output("e", gb.weight("short.scale", [3]))
    assert int8_sources(gb.finish()) == {}


@pytest.mark.parametrize(("options", "message"), [
    ({"kernel": "c"}, "quantize-int8: expected kernel a or b, got 'c'"),
    ({"embedding": "bf16"}, "quantize-int8: expected embedding int8 or f32, got 'bf16'"),
])
def test_bad_options_are_one_line(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        QuantizeInt8Pass(**options)
    assert "\n" not in str(info.value)


# --------------------------------------------------------------------------
# kernel B


def _groups(module: ModuleOp) -> list[set[str]]:
    """For each quantized activation (in graph order), the projections reading it,
    as ``layer.name`` (``0.q_proj``)."""
    by_lhs: dict[object, set[str]] = {}
    for op in ops(module, g.MatmulI8Op):
        permute = op.rhs.owner
        assert isinstance(permute, g.PermuteOp)
        weight = permute.operand.owner
        assert isinstance(weight, g.WeightOp)
        parts = weight.weight_name.data.split(".")  # model.layers.i.self_attn.q_proj...
        by_lhs.setdefault(op.lhs, set()).add(f"{parts[2]}.{parts[4]}")
    return list(by_lhs.values())


# the non-slow suite's 3-minute budget; the full suite runs it: kernel B over f32 weights (the
# pass's f32-weights form: test_qwen2_projections_and_embedding, quickly)
@pytest.mark.parametrize("weights", ["bf16", pytest.param("f32", marks=pytest.mark.slow)])
@pytest.mark.parametrize("embedding", ["int8", "f32"])
def test_qwen2_kernel_b(weights: str, embedding: str) -> None:
    module = quantized(weights, embedding, kernel="b")
    layers = CFG.num_hidden_layers
    want = expected_quantized(layers, embedding)
    assert {src for src, _ in int8_sources(module).values()} == want
    lm_head = 1 if embedding == "int8" else 0
    assert len(ops(module, g.MatmulI8Op)) == 7 * layers
    assert Counter(op.order_name for op in ops(module, g.MatmulOp)) == +Counter(
        {"blocks32": lm_head, None: 2 * layers + 1 - lm_head})  # + drops a zero count
    # one quantization per activation: q/k/v share one, gate/up one; o and down
    assert len(ops(module, g.RoundOp)) == 4 * layers
    offsets = [op for op in ops(module, g.ReduceSumOp) if op.order_name == "sequential"]
    assert len(offsets) == 4 * layers
    want_groups = [{f"{i}.{p}" for p in names} for i in range(layers)
                   for names in (("q_proj", "k_proj", "v_proj"), ("o_proj",),
                                 ("gate_proj", "up_proj"), ("down_proj",))]
    assert _groups(module) == want_groups
    for op in ops(module, g.MatmulI8Op):  # (total - offset) * scale[n]
        (use,) = op.result.uses
        sub = use.operation
        assert isinstance(sub, g.SubOp)
        assert use.index == 0
        offset = sub.rhs.owner
        assert isinstance(offset, g.BroadcastOp)
        (scaled,) = sub.result.uses
        assert isinstance(scaled.operation, g.MulOp)
    # kernel B reads its int8 weights as they are: only the embedding's are widened
    widened = [op for op in ops(module, g.CastOp) if isinstance(op.operand.owner, g.WeightOp)
               and g.tensor_type(op.operand).dtype.data == "i8"]
    assert [op.operand.owner.weight_name.data for op in widened] == [f"{EMBED}.int8"] * lm_head


def test_kernel_b_pass_is_idempotent() -> None:
    once = quantized("bf16", "int8", 2, kernel="b")
    twice = once.clone()
    QuantizeInt8Pass(kernel="b").apply(Context(), twice)
    assert str(twice) == str(once)


def _kernel_b_graph(n: int, k: int) -> g.GraphFuncOp:
    """Two projections of one activation (a bf16 weight with a bias, an f32 one with
    a bias), and a tied embedding: its lookup and the LM head."""
    gb = GraphBuilder("kb")
    x = gb.input("x", "f32", ["seq", k])
    ids = gb.input("ids", "i64", ["seq"])
    w = gb.weight("w", [n, k], "bf16").cast("f32")
    v = gb.weight("v", [n, k])
    b, c = gb.weight("b", [n]), gb.weight("c", [n])
    e = gb.weight("e", [10, k], "bf16").cast("f32")
    gb.output("y", x @ w.T + b.reshape(1, n).broadcast_to("seq", n))
    gb.output("z", x @ v.T + c.reshape(1, n).broadcast_to("seq", n))
    gb.output("logits", x @ e.T)
    gb.output("rows", gather(e, ids))
    return gb.finish()


def _bf16(rng: np.random.Generator, shape: tuple[int, int], sigma: float) -> np.ndarray:
    w = (rng.standard_normal(shape) * sigma).astype(np.float32)
    return (w.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def _activations(rng: np.random.Generator, k: int) -> np.ndarray:
    x = rng.standard_normal((7, k)).astype(np.float32)
    x[1, :32] = 0.0  # an all-zero block (or all of a short K)
    x[2] *= np.float32(1e-30)
    x[3] *= np.float32(1e20)
    x[4, ::3] = 0.0
    return x


@pytest.mark.parametrize(("n", "k"), [(16, 40), (24, 77), (8, 896), (9, 64), (6, 192),
                                      (5, 1), (7, 33)])
@pytest.mark.parametrize("exact", [False, True])
def test_the_rewritten_graph_means_kernel_b(n: int, k: int, exact: bool) -> None:
    """Interpreted, each projection is kernel B (the reference) plus its bias, bit
    for bit, the two sharing one quantization of x; the LM head is kernel A and the
    lookup f32(q[id]) * scale[id]."""
    func = _kernel_b_graph(n, k)
    QuantizeInt8Pass(kernel="b").apply(Context(), ModuleOp([func]))
    func.verify()
    assert len([op for op in func.walk() if isinstance(op, g.RoundOp)]) == 1
    rng = np.random.default_rng(n * k + 1)
    values = {"w": _bf16(rng, (n, k), 0.1), "v": _bf16(rng, (n, k), 2.0),
              "e": _bf16(rng, (10, k), 0.5)}
    weights = {}
    for name, w in values.items():
        weights[f"{name}.int8"], weights[f"{name}.scale"] = quantize_rows(w)
    bias = {name: rng.standard_normal(n).astype(np.float32) for name in "bc"}
    x = _activations(rng, k)
    ids = np.array([3, 0, 9, 3, 1, 2, 5], np.int64)
    out = run_graph(func, {"x": x, "ids": ids}, weights | bias, exact=exact)
    for name, proj, b in (("y", "w", "b"), ("z", "v", "c")):
        want = kernel_b(x, weights[f"{proj}.int8"], weights[f"{proj}.scale"]) + bias[b]
        np.testing.assert_array_equal(out[name].view(np.uint32), want.view(np.uint32),
                                      err_msg=name)
    qe, se = weights["e.int8"], weights["e.scale"]
    want = kernel_a(x, qe, se)
    np.testing.assert_array_equal(out["logits"].view(np.uint32), want.view(np.uint32))
    rows = qe[ids].astype(np.float32) * se[ids][:, None]
    np.testing.assert_array_equal(out["rows"].view(np.uint32), rows.view(np.uint32))


Q_PROJ = "model.layers.0.self_attn.q_proj"


def _with_q_outputs(module: ModuleOp) -> ModuleOp:
    """``module`` returning also layer 0's q projection input ("h") and its output
    with the bias ("q")."""
    func = next(op for op in module.walk() if isinstance(op, g.GraphFuncOp))
    weight = next(op for op in func.weights() if op.weight_name.data == f"{Q_PROJ}.weight")
    value = weight.result
    if weight.result.type.dtype.data == "bf16":
        (cast,) = [u.operation for u in value.uses]
        value = cast.results[0]
    (permute,) = [u.operation for u in value.uses]
    (matmul,) = [u.operation for u in permute.results[0].uses]
    assert isinstance(matmul, g.MatmulOp)
    (add,) = [u.operation for u in matmul.result.uses]
    assert isinstance(add, g.AddOp)
    old = func.return_op()
    outputs = [*zip(old.names, old.outputs, strict=True), ("h", matmul.lhs),
               ("q", add.result)]
    func.block.insert_op_before(g.ReturnOp(outputs), old)
    func.block.erase_op(old)
    return module


class _Int8Mapping(dict[str, np.ndarray]):
    """The weights of a quantized graph: spec §5's format of each source, the rest
    from the snapshot (in the graph's format)."""

    def __init__(self, snapshot: Path, module: ModuleOp, weights: str) -> None:
        snap = Snapshot.open(snapshot)
        base = SnapshotWeights(snap, weights)
        sources = int8_sources(module)
        formats = {src: quantize_rows(snap.f32(src)) for src, _ in sources.values()}
        names = [op.weight_name.data for op in module.walk() if isinstance(op, g.WeightOp)]
        super().__init__({n: formats[sources[n][0]][0 if sources[n][1] == "int8" else 1]
                          if n in sources else base[n] for n in names})


@pytest.mark.parametrize("weights", ["bf16", "f32"])
def test_tiny_qwen2_q_projection_is_kernel_b(tiny_snapshot: Path, weights: str) -> None:
    """In the real graph (tiny config, its weights, a real prompt): layer 0's q
    projection of the normed activation is kernel B plus the bias, bit for bit."""
    snap = Snapshot.open(tiny_snapshot)
    module = _with_q_outputs(build_qwen2(snap.config, Qwen2GraphOptions(
        n_layers=1, last_only=True, weights=weights)))
    QuantizeInt8Pass(kernel="b").apply(Context(), module)
    module.verify()
    mapping = _Int8Mapping(tiny_snapshot, module, weights)
    ids = np.array(prompt_ids(tiny_snapshot, "france"), np.int64)
    empty = np.zeros((1, 2, 0, snap.config.head_dim), np.float32)
    out = run_graph(module, {"token_ids": ids, "past_keys": empty, "past_values": empty},
                    mapping)
    bias = snap.f32(f"{Q_PROJ}.bias")  # (a bf16 graph's mapping holds its bits)
    want = kernel_b(out["h"], mapping[f"{Q_PROJ}.weight.int8"],
                    mapping[f"{Q_PROJ}.weight.scale"]) + bias
    assert out["q"].shape == (len(ids), snap.config.hidden_size)
    np.testing.assert_array_equal(out["q"].view(np.uint32), want.view(np.uint32))


def _kl_top1(ref: np.ndarray, other: np.ndarray) -> tuple[float, float]:
    """Mean per-position KL(softmax(ref) || softmax(other)) in f64, and how often
    the argmax agrees."""
    def log_softmax(z: np.ndarray) -> np.ndarray:
        z = z.astype(np.float64)
        z = z - z.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

    lp, lq = log_softmax(ref), log_softmax(other)
    kl = (np.exp(lp) * (lp - lq)).sum(axis=-1)
    return float(kl.mean()), float((ref.argmax(-1) == other.argmax(-1)).mean())


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_tiny_model_runs_in_kernel_b(tiny_snapshot: Path) -> None:
    """The whole tiny model after quantize-int8{kernel=b} (int8 and f32 embedding),
    interpreted exactly: every position's logits finite, then greedy steps on the
    cache. Its agreement with kernel A and with the unquantized model is printed
    (random weights: not a gate)."""
    snap = Snapshot.open(tiny_snapshot)
    base = build_qwen2(snap.config, Qwen2GraphOptions(weights="bf16"))
    ids = prompt_ids(tiny_snapshot, "fibonacci")
    runs: dict[str, tuple[np.ndarray, list[int]]] = {}
    for name, options in (("f32", None), ("A", {"kernel": "a"}), ("B", {"kernel": "b"}),
                          ("B, f32 embedding", {"kernel": "b", "embedding": "f32"})):
        module = base.clone()
        if options is not None:
            QuantizeInt8Pass(**options).apply(Context(), module)
        module.verify()
        weights = _Int8Mapping(tiny_snapshot, module, "bf16")
        engine = Engine(snap.config, InterpreterBackend(module, weights, exact=True))
        cache = engine.new_cache(len(ids) + 3)
        logits = engine.forward(ids, cache)
        tokens = [int(np.argmax(logits[-1]))]
        for _ in range(3):
            step = engine.forward([tokens[-1]], cache)
            logits = np.concatenate([logits, step])
            tokens.append(int(np.argmax(step[-1])))
        assert logits.shape == (len(ids) + 3, snap.config.vocab_size)
        assert np.isfinite(logits).all(), name
        runs[name] = logits, tokens
    for name in ("A", "B", "B, f32 embedding"):
        for ref in ("f32", "A")[:1 if name == "A" else 2]:
            kl, top1 = _kl_top1(runs[ref][0], runs[name][0])
            print(f"kernel {name} vs {ref}: KL {kl:.3g}, top-1 {top1:.2f}, tokens "
                  f"{runs[name][1]} vs {runs[ref][1]}")

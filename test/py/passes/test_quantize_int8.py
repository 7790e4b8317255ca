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
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import numpy as np
import pytest
from _int8_reference import kernel_a
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from nanocompile.analysis.work import count_work
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.int8 import quantize_rows
from nanocompile.checkpoint.snapshot import expected_tensors
from nanocompile.checkpoint.synth import synthetic_config
from nanocompile.compiler import lower_to_loop, optimize_graph
from nanocompile.dialects import graph as g
from nanocompile.frontend import GraphBuilder, gather
from nanocompile.interpreter import run_graph
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
def quantized(weights: str, embedding: str, n_layers: int | None = None) -> ModuleOp:
    module = graph(weights, n_layers)
    QuantizeInt8Pass(embedding=embedding).apply(Context(), module)
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
    int8 and one scale per token."""
    shapes = expected_tensors(CFG)
    names = expected_quantized(layers, embedding)
    elements = sum(shapes[n][0] * shapes[n][1] for n in names)
    rows = sum(shapes[n][0] for n in names)
    hidden = CFG.hidden_size
    per_token = itemsize * hidden - (hidden + 4) if embedding == "int8" else 0
    return (itemsize - 1) * elements - 4 * rows, per_token


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
        assert str(after) == ("5376*past*seq + 5376*seq*seq + 24576*past + 2641804*seq "
                              "+ 496540160")


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
    ({"kernel": "b"}, "quantize-int8: expected kernel a, got 'b'"),
    ({"embedding": "bf16"}, "quantize-int8: expected embedding int8 or f32, got 'bf16'"),
])
def test_bad_options_are_one_line(options: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        QuantizeInt8Pass(**options)
    assert "\n" not in str(info.value)

"""The frontend and the Qwen2 graph: node counts, broadcasting, composite order."""

import collections

import numpy as np
import pytest

from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.dialects import graph as g
from nanocompile.frontend import GraphBuilder, where
from nanocompile.frontend import composites as C
from nanocompile.interpreter import run_graph
from nanocompile.ir.checks import check_dominance
from nanocompile.ir.shapes import ShapeError
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

QWEN05 = Qwen2Config(
    vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
    num_attention_heads=14, num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=1e6,
    max_position_embeddings=32768, tie_word_embeddings=True, bos_token_id=151643,
    eos_token_id=151645, torch_dtype="bfloat16",
)

# spec §2.4: per block, and the nodes outside the blocks
BLOCK_HISTOGRAM = {
    "reshape": 30, "broadcast": 24, "mul": 13, "weight": 12, "permute": 12, "add": 11,
    "matmul": 9, "const": 8, "slice": 6, "div": 4, "concat": 4, "reduce_sum": 3, "neg": 3,
    "sqrt": 2, "reciprocal": 2, "where": 2, "exp": 2, "less_equal": 1, "reduce_max": 1,
    "sub": 1,
}
OUTSIDE_HISTOGRAM = {
    "input": 3, "weight": 2, "gather": 1, "const": 5, "iota": 3, "dim": 2, "reshape": 9,
    "broadcast": 10, "add": 3, "cast": 1, "mul": 4, "concat": 3, "cos": 1, "sin": 1,
    "less_equal": 1, "where": 1, "reduce_sum": 1, "div": 1, "sqrt": 1, "reciprocal": 1,
    "permute": 1, "matmul": 1,
}


def _histogram(layers: int, last_only: bool = False) -> collections.Counter[str]:
    module = build_qwen2(QWEN05, Qwen2GraphOptions(n_layers=layers, last_only=last_only))
    func = module.body.block.first_op
    assert isinstance(func, g.GraphFuncOp)
    return collections.Counter(op.name.removeprefix("graph.") for op in func.body.block.ops
                               if not isinstance(op, g.ReturnOp))


def test_node_counts_per_block_and_outside() -> None:
    one, two = _histogram(1), _histogram(2)
    block = two - one
    assert dict(block) == BLOCK_HISTOGRAM
    assert sum(block.values()) == 150
    outside = one - block
    assert dict(outside) == OUTSIDE_HISTOGRAM
    assert sum(outside.values()) == 56


def test_full_model_node_count_and_verification() -> None:
    module = build_qwen2(QWEN05)
    module.verify()
    check_dominance(module)
    func = module.body.block.first_op
    assert isinstance(func, g.GraphFuncOp)
    assert len(list(func.body.block.ops)) - 1 == 3656  # minus graph.return
    assert len(func.weights()) == 24 * 12 + 2
    sig = {op.arg_name.data: str(op.result.type) for op in func.inputs()}
    assert sig == {
        "token_ids": "!graph.tensor<[seq], i64>",
        "past_keys": "!graph.tensor<[24, 2, past, 64], f32>",
        "past_values": "!graph.tensor<[24, 2, past, 64], f32>",
    }
    out = {n: str(v.type) for n, v in zip(func.return_op().names, func.return_op().outputs,
                                          strict=True)}
    assert out == {
        "logits": "!graph.tensor<[seq, 151936], f32>",
        "keys": "!graph.tensor<[24, 2, seq, 64], f32>",
        "values": "!graph.tensor<[24, 2, seq, 64], f32>",
    }


def test_last_only_adds_one_slice() -> None:
    assert _histogram(1, last_only=True) - _histogram(1) == collections.Counter(slice=1)


def test_untied_config_gets_lm_head() -> None:
    cfg = Qwen2Config(**{**QWEN05.__dict__, "tie_word_embeddings": False})
    module = build_qwen2(cfg, Qwen2GraphOptions(n_layers=1))
    func = module.body.block.first_op
    names = {op.weight_name.data for op in func.weights()}
    assert "lm_head.weight" in names


def test_broadcasting_inserts_reshape_and_broadcast() -> None:
    gb = GraphBuilder("f")
    x = gb.input("x", "f32", ["seq", 8])
    w = gb.weight("w", [8])
    y = x * w
    z = y / 2.0
    gb.output("z", z)
    func = gb.finish()
    names = [op.name for op in func.body.block.ops]
    assert names == ["graph.input", "graph.weight", "graph.reshape", "graph.broadcast",
                     "graph.mul", "graph.const", "graph.reshape", "graph.broadcast",
                     "graph.div", "graph.return"]
    xs = np.arange(24, dtype=np.float32).reshape(3, 8)
    ws = np.linspace(-1, 1, 8, dtype=np.float32)
    out = run_graph(func, {"x": xs}, {"w": ws})["z"]
    np.testing.assert_array_equal(out, (xs * ws) / np.float32(2))


def test_scalars_take_the_tensor_dtype() -> None:
    gb = GraphBuilder("f")
    i = gb.input("i", "i64", ["n"])
    j = i + 3
    assert j.dtype == "i64"
    mask = where(i <= 2, 0.0, float("-inf"))
    assert mask.dtype == "f32"
    with pytest.raises(ShapeError, match="cannot broadcast"):
        _ = gb.input("a", "f32", ["n", 3]) + gb.input("b", "f32", ["n", 4])


def _run1(build, **arrays: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    gb = GraphBuilder("f")
    ins = {k: gb.input(k, "f32", list(v.shape)) for k, v in arrays.items()}
    gb.output("y", build(gb, **ins))
    return run_graph(gb.finish(), arrays, {})["y"]


def test_rms_norm_is_the_spec_order_bitwise() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 64)).astype(np.float32) * 3
    w = rng.standard_normal(64).astype(np.float32)
    got = _run1(lambda gb, x, w: C.rms_norm(x, w, 1e-6), x=x, w=w)
    ms = np.sum(x * x, axis=-1, keepdims=True, dtype=np.float32) / np.float32(64)
    r = np.float32(1) / np.sqrt(ms + np.float32(1e-6))
    np.testing.assert_array_equal(got, (x * r) * w)


def test_sigmoid_is_exact_in_both_tails() -> None:
    x = np.array([-1000, -104, -88, -20, -1, -0.0, 0, 1, 20, 88, 104, 1000], np.float32)
    got = _run1(lambda gb, x: C.sigmoid(x), x=x)
    assert np.all(np.isfinite(got))
    e = np.exp(-np.abs(x))
    np.testing.assert_array_equal(got, np.where(x >= 0, np.float32(1), e) / (e + np.float32(1)))
    assert got[0] == 0.0
    assert got[-1] == 1.0


def test_softmax_order_bitwise() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 7)).astype(np.float32) * 10
    x[0, 2] = -np.inf
    got = _run1(lambda gb, x: C.softmax(x), x=x)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_array_equal(got, e / e.sum(-1, keepdims=True, dtype=np.float32))


def test_rope_inverse_frequencies_are_an_f32_power() -> None:
    inv = C.rope_inverse_frequencies(64, 1e6)
    assert inv.dtype == np.float32
    assert inv.shape == (32,)
    assert inv[0] == 1.0
    f64_then_cast = (1.0 / 1e6 ** (np.arange(0, 64, 2) / 64)).astype(np.float32)
    np.testing.assert_allclose(inv, f64_then_cast, rtol=1e-6)


def test_causal_mask_and_rope_tables() -> None:
    gb = GraphBuilder("f")
    ids = gb.input("ids", "i64", ["seq"])
    pk = gb.input("pk", "f32", ["past"])
    mask = C.causal_mask(gb, "seq", "past")
    cos, sin = C.rope_tables(gb, "seq", "past", 8, 10000.0)
    for name, t in (("mask", mask), ("cos", cos), ("sin", sin), ("ids", ids), ("pk", pk)):
        gb.output(name, t)
    out = run_graph(gb.finish(), {"ids": np.zeros(3, np.int64), "pk": np.zeros(2, np.float32)},
                    {})
    expected = np.where(np.arange(5)[None, :] <= 2 + np.arange(3)[:, None], 0, -np.inf)
    np.testing.assert_array_equal(out["mask"], expected.astype(np.float32))
    inv = C.rope_inverse_frequencies(8, 10000.0)
    angles = np.arange(2, 5, dtype=np.float32)[:, None] * inv[None, :]
    both = np.concatenate([angles, angles], -1)
    np.testing.assert_array_equal(out["cos"], np.cos(both))
    np.testing.assert_array_equal(out["sin"], np.sin(both))


def test_repeat_kv_is_consecutive() -> None:
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    got = _run1(lambda gb, x: C.repeat_kv(x, 7), x=x)
    np.testing.assert_array_equal(got, np.repeat(x, 7, axis=0))

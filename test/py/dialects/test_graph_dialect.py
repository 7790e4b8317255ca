"""The Graph dialect built from Python: inference, verification, registries."""

import re

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects import get_all_dialects
from nanocompile.dialects import graph as g
from nanocompile.ir.checks import DominanceError, check_dominance
from nanocompile.ir.shapes import ShapeError
from nanocompile.ir.symbolic import Expr
from nanocompile.passes import get_all_passes


def _module(block: Block, name: str = "f") -> ModuleOp:
    return ModuleOp([g.GraphFuncOp(name, block)])


def test_build_infers_types_and_verifies() -> None:
    block = Block()
    x = g.InputOp("x", "f32", ["seq", 896])
    w = g.WeightOp("w", [128, 896])
    wt = g.PermuteOp(w.result, [1, 0])
    y = g.MatmulOp(x.result, wt.result)
    block.add_ops([x, w, wt, y, g.ReturnOp([("y", y.result)])])
    module = _module(block)
    module.verify()
    check_dominance(module)
    assert y.result.type == g.TensorType.get("f32", ["seq", 128])
    assert y.result.type.dims == (Expr.sym("seq"), Expr.const(128))


def test_build_rejects_bad_operands_at_construction() -> None:
    x = g.InputOp("x", "f32", ["seq", 896])
    i = g.InputOp("i", "i64", ["seq"])
    j = g.InputOp("j", "f32", ["seq"])
    with pytest.raises(ShapeError, match="shapes of lhs"):
        g.AddOp(x.result, i.result)
    with pytest.raises(ShapeError, match="dtypes of lhs"):
        g.AddOp(j.result, i.result)
    with pytest.raises(ShapeError, match="must be a float tensor"):
        g.ExpOp(i.result)
    with pytest.raises(ShapeError, match="is not a permutation"):
        g.PermuteOp(x.result, [0, 0])


def test_const_round_trips_exact_floats() -> None:
    values = np.array([0.125, -np.inf, np.inf, -0.0, 1e-45, 3.4028235e38, 1e-6], np.float32)
    c = g.ConstOp(values, "f32")
    back = c.to_array()
    assert back.tobytes() == values.tobytes()
    text = str(c)
    for token in ("-inf", "-0.0", "0.125"):
        assert token in text
    scalar = g.ConstOp(np.float32(2.5), "f32")
    assert scalar.result.type.dims == ()
    assert scalar.to_array().shape == ()


@pytest.mark.parametrize(
    ("values", "dtype", "message"),
    [
        ([300], "i8", "expected i8 values in [-128, 127], got 300"),
        (np.array([300]), "i8", "expected i8 values in [-128, 127], got 300"),  # wrapped to 44
        (np.array([1e20]), "i64", "expected whole i64 values in [-9223372036854775808, "
                                  "9223372036854775807], got 1e+20"),
        ([2**63], "i64", "got 9223372036854775808"),
        ([1.5], "i32", "expected whole i32 values"),  # truncated to 1
        ([float("nan")], "i32", "expected whole i32 values"),
        (np.array([1e39]), "f32", "expected f32 values within"),  # rounded to inf
    ],
)
def test_const_values_must_fit_their_dtype(values: object, dtype: str, message: str) -> None:
    """Issue 14, point 9: out-of-range constants wrapped, truncated or escaped as
    NumPy's OverflowError; now one ValueError naming the value."""
    with pytest.raises(ValueError, match=re.escape(message)):
        g.ConstOp(values, dtype)  # type: ignore[arg-type]


def test_const_values_in_range_are_kept() -> None:
    edge = g.ConstOp(np.array([-128, 127, 0]), "i8")
    assert edge.to_array().tolist() == [-128, 127, 0]
    big = g.ConstOp(np.array([-(2**63), 2**63 - 1]), "i64")
    assert big.to_array().tolist() == [-(2**63), 2**63 - 1]
    assert g.ConstOp(np.array([2.0, -3.0]), "i32").to_array().tolist() == [2, -3]
    specials = g.ConstOp(np.array([np.inf, -np.inf, np.nan, 3.4028235e38]), "f32").to_array()
    assert np.isinf(specials[:2]).all()
    assert np.isnan(specials[2])
    assert g.ConstOp(np.array([True, False]), "bool").to_array().tolist() == [True, False]


@pytest.mark.parametrize(
    ("shape", "message"),
    [([2**63], "expected shape coefficients below 2**63 in magnitude, got 9223372036854775808"),
     (["seq", Expr.sym("seq") + 2**64], "got 18446744073709551616"),
     ([-1, 4], "expected dims that can be non-negative, got -1"),
     (["seq", Expr.const(-3)], "got -3")],
)
def test_dims_must_be_int64_and_not_negative(shape: list[object], message: str) -> None:
    """Issue 14, point 9: a dim of 2**63 reached the C as INT64_C(9223372036854775808)."""
    with pytest.raises(VerifyException, match=re.escape(message)):
        g.InputOp("x", "f32", shape)  # type: ignore[arg-type]


def test_a_symbol_bound_by_no_input_inside_a_region_is_rejected() -> None:
    """Issue 14, point 9: fuse moves a graph.dim of an unbound symbol into a
    region, where the graph.func verifier did not look: the module verified and
    lowering failed later with a Loop-IR error."""
    from nanocompile.compiler import optimize_graph
    from nanocompile.frontend import GraphBuilder

    gb = GraphBuilder("f")
    x = gb.input("x", "i64", ["seq"])
    gb.output("y", x + gb.dim("n"))
    with pytest.raises(VerifyException, match=r"graph.dim: symbol 'n' .* is not bound by any "
                       r"graph.input \(bound: \['seq'\]\)"):
        optimize_graph(gb.finish_module())


def test_dominance_checker_catches_use_before_def() -> None:
    x = g.InputOp("x", "f32", [4])
    n = g.NegOp(x.result)
    block = Block()
    block.add_ops([n, x, g.ReturnOp([("n", n.result)])])
    module = _module(block)
    module.verify()  # xDSL's verify does not notice
    with pytest.raises(DominanceError, match="used before it is defined"):
        check_dominance(module)


def test_unbound_symbol_is_rejected() -> None:
    x = g.InputOp("x", "f32", ["seq + past", 4])  # a sum binds nothing
    block = Block()
    block.add_ops([x, g.ReturnOp([("x", x.result)])])
    with pytest.raises(VerifyException, match="not bound"):
        _module(block).verify()


def test_graph_func_helpers() -> None:
    x = g.InputOp("x", "f32", ["seq", 4])
    p = g.InputOp("p", "f32", ["past", 4])
    w = g.WeightOp("w", [4])
    block = Block()
    block.add_ops([x, p, w, g.ReturnOp([("x", x.result)])])
    f = g.GraphFuncOp("f", block)
    assert f.bound_symbols() == {"seq", "past"}
    assert [op.arg_name.data for op in f.inputs()] == ["x", "p"]
    assert [op.weight_name.data for op in f.weights()] == ["w"]
    assert f.return_op().names == ("x",)


def test_every_op_class_name_ends_in_op() -> None:
    for factory in get_all_dialects().values():
        dialect = factory()
        if dialect.name not in ("graph",):
            continue
        for op in dialect.operations:
            assert issubclass(op, IRDLOperation)
            assert op.__name__.endswith("Op"), op.__name__
            assert op.name.startswith(f"{dialect.name}."), op.name


def test_dialect_registry_keys_are_dialect_names() -> None:
    for key, factory in get_all_dialects().items():
        assert factory().name == key


def test_pass_registry_keys_are_pass_names() -> None:
    for key, factory in get_all_passes().items():
        assert factory().name == key


def test_graph_dialect_has_every_primitive() -> None:
    names = {op.name.removeprefix("graph.") for op in g.Graph.operations}
    primitives = {
        "input", "weight", "const", "iota", "dim", "add", "sub", "mul", "div", "less_equal",
        "where", "neg", "exp", "sqrt", "reciprocal", "sin", "cos", "cast", "reduce_sum",
        "reduce_max", "reshape", "permute", "broadcast", "slice", "concat", "matmul", "gather",
        "round", "matmul_i8",  # spec §5 kernel B (issue 18)
        "update_slice",  # the KV cache as the program's state (issue 19)
    }
    assert primitives <= names
    assert names - primitives == {"func", "return", "fused", "yield"}


def test_only_sources_with_a_name_are_impure() -> None:
    """graph.input and graph.weight are the signature: never dead code."""
    from xdsl.traits import Pure

    assert not g.InputOp.has_trait(Pure)
    assert not g.WeightOp.has_trait(Pure)
    for op in g.Graph.operations:
        if op not in (g.InputOp, g.WeightOp, g.GraphFuncOp, g.ReturnOp, g.FusedYieldOp):
            assert op.has_trait(Pure), op.name


def test_every_primitive_defines_its_result_type() -> None:
    # GraphPrimitiveOp.infer is abstract: a primitive that forgot it would only
    # fail when first built. Check all registered primitives up front.
    primitives = [op for op in g.Graph.operations if issubclass(op, g.GraphPrimitiveOp)]
    assert len(primitives) >= 26
    missing = [op.name for op in primitives if op.infer is g.GraphPrimitiveOp.infer]
    assert missing == []


def test_kernel_b_ops_infer_their_types() -> None:
    """graph.matmul_i8: [M, K] i8, [M, ceil(K / 32)] f32, [K, N] i8 -> [M, N] f32;
    graph.round keeps its operand's type; reduce_sum's order is optional."""
    xq = g.InputOp("xq", "i8", ["seq", 33])
    xs = g.InputOp("xs", "f32", ["seq", 2])
    w = g.WeightOp("w", [33, 5], "i8")
    y = g.MatmulI8Op(xq.result, xs.result, w.result)
    assert y.result.type == g.TensorType.get("f32", ["seq", 5])
    r = g.RoundOp(xs.result)
    assert r.result.type == xs.result.type
    plain, ordered = g.ReduceSumOp(xs.result, 1), g.ReduceSumOp(xs.result, -1, "sequential")
    assert (plain.order_name, ordered.order_name) == (None, "sequential")
    assert ordered.axis.data == 1
    block = Block()
    block.add_ops([xq, xs, w, y, r, plain, ordered, g.ReturnOp([("y", y.result)])])
    _module(block).verify()
    assert "order" not in str(plain)
    assert 'axis = 1, order = "sequential"' in str(ordered)


def test_kernel_b_ops_reject_bad_operands_at_construction() -> None:
    xq = g.InputOp("xq", "i8", ["seq", 40])
    xs = g.InputOp("xs", "f32", ["seq", 1])
    w = g.WeightOp("w", [40, 5], "i8")
    with pytest.raises(ShapeError, match=re.escape(
            "matmul_i8: lhs_scale [seq, 1] must be [seq, 2] (a scale per row of lhs and "
            "block of 32 of its K = 40)")):
        g.MatmulI8Op(xq.result, xs.result, w.result)
    with pytest.raises(ShapeError, match="round operand must be a float tensor, got i8"):
        g.RoundOp(xq.result)
    bad = g.ReduceSumOp(xs.result, 1, "pairwise")
    with pytest.raises(VerifyException, match='unknown order "pairwise", expected one of '
                                              "sequential"):
        bad.verify()

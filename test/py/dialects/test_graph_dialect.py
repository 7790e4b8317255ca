"""The Graph dialect built from Python: inference, verification, registries."""

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

"""The reference interpreter: argument checking, per-node checks, edge semantics."""

import numpy as np
import pytest

from nanocompile.dialects.graph.signature import ArgumentError
from nanocompile.frontend import GraphBuilder, gather
from nanocompile.interpreter import InterpreterError, run_graph
from nanocompile.ir.dtypes import bf16_bits_to_f32


def _graph():  # type: ignore[no-untyped-def]
    gb = GraphBuilder("f")
    ids = gb.input("ids", "i64", ["seq"])
    cache = gb.input("cache", "f32", [2, "past", 4])
    table = gb.weight("table", [10, 4])
    gb.output("rows", gather(table, ids))
    gb.output("cache", cache)
    return gb.finish()


TABLE = np.arange(40, dtype=np.float32).reshape(10, 4)


def test_runs_and_binds_symbols() -> None:
    out = run_graph(_graph(), {"ids": np.array([3, 0], np.int64),
                               "cache": np.zeros((2, 5, 4), np.float32)}, {"table": TABLE})
    np.testing.assert_array_equal(out["rows"], TABLE[[3, 0]])
    assert out["cache"].shape == (2, 5, 4)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"ids": np.zeros(2, np.int64)}, "missing input"),
        ({"ids": np.zeros(2, np.int64), "cache": np.zeros((2, 0, 4), np.float32),
          "extra": np.zeros(1)}, "unknown input"),
        ({"ids": np.zeros(2, np.int32), "cache": np.zeros((2, 0, 4), np.float32)},
         "expected dtype i64"),
        ({"ids": np.zeros((2, 1), np.int64), "cache": np.zeros((2, 0, 4), np.float32)},
         "expected rank 1"),
        ({"ids": np.zeros(2, np.int64), "cache": np.zeros((3, 0, 4), np.float32)},
         "dim 0 is 3, expected 2"),
        ({"ids": [1, 2], "cache": np.zeros((2, 0, 4), np.float32)}, "expected a numpy array"),
    ],
)
def test_bad_arguments_are_named(inputs: dict, message: str) -> None:
    with pytest.raises(ArgumentError, match=message):
        run_graph(_graph(), inputs, {"table": TABLE})


def test_inconsistent_symbols() -> None:
    gb = GraphBuilder("f")
    a = gb.input("a", "f32", ["seq", 4])
    b = gb.input("b", "f32", ["seq", 4])
    gb.output("c", a + b)
    with pytest.raises(ArgumentError, match="expected seq = 3"):
        run_graph(gb.finish(), {"a": np.zeros((3, 4), np.float32),
                                "b": np.zeros((2, 4), np.float32)}, {})


def test_missing_and_misshapen_weights() -> None:
    good = {"ids": np.zeros(1, np.int64), "cache": np.zeros((2, 0, 4), np.float32)}
    with pytest.raises(ArgumentError, match="missing weight 'table'"):
        run_graph(_graph(), good, {})
    with pytest.raises(ArgumentError, match="weight 'table'"):
        run_graph(_graph(), good, {"table": np.zeros((10, 5), np.float32)})


@pytest.mark.parametrize("bad_id", [10, -1, 2**40])
def test_gather_id_out_of_range_is_an_error(bad_id: int) -> None:
    with pytest.raises(InterpreterError, match="out of range"):
        run_graph(_graph(), {"ids": np.array([1, bad_id], np.int64),
                             "cache": np.zeros((2, 0, 4), np.float32)}, {"table": TABLE})


def test_symbolic_slice_checked_at_run_time() -> None:
    gb = GraphBuilder("f")
    x = gb.input("x", "f32", ["seq", 4])
    gb.output("last", x.slice(0, x.shape[0] - 1, x.shape[0]))
    func = gb.finish()
    out = run_graph(func, {"x": np.arange(8, dtype=np.float32).reshape(2, 4)}, {})
    np.testing.assert_array_equal(out["last"], [[4, 5, 6, 7]])
    with pytest.raises(InterpreterError, match="do not fit"):
        run_graph(func, {"x": np.zeros((0, 4), np.float32)}, {})


def test_reduce_max_nan_and_empty_axis() -> None:
    gb = GraphBuilder("f")
    x = gb.input("x", "f32", [2, "n"])
    i = gb.input("i", "i32", [2, "n"])
    gb.output("m", x.max(-1))
    gb.output("mi", i.max(-1))
    func = gb.finish()
    out = run_graph(func, {"x": np.array([[1, np.nan], [3, 2]], np.float32),
                           "i": np.zeros((2, 2), np.int32)}, {})
    assert np.isnan(out["m"][0, 0])
    assert out["m"][1, 0] == 3
    empty = run_graph(func, {"x": np.zeros((2, 0), np.float32), "i": np.zeros((2, 0), np.int32)},
                      {})
    np.testing.assert_array_equal(empty["m"], [[-np.inf], [-np.inf]])
    np.testing.assert_array_equal(empty["mi"], [[np.iinfo(np.int32).min]] * 2)


def test_integer_arithmetic_wraps_and_casts() -> None:
    gb = GraphBuilder("f")
    a = gb.input("a", "i8", [3])
    f = gb.input("f", "f32", [3])
    gb.output("sum", a + a)
    gb.output("b", f.cast("bool"))
    gb.output("s", a.sum(0))
    out = run_graph(gb.finish(), {"a": np.array([100, -100, 1], np.int8),
                                  "f": np.array([0.0, -0.0, 0.5], np.float32)}, {})
    np.testing.assert_array_equal(out["sum"], np.array([-56, 56, 2], np.int8))
    np.testing.assert_array_equal(out["b"], [False, False, True])
    assert out["s"].dtype == np.int8


def test_bf16_cast_is_exact() -> None:
    gb = GraphBuilder("f")
    w = gb.weight("w", [65536], "bf16")
    gb.output("f", w.cast("f32"))
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    out = run_graph(gb.finish(), {}, {"w": bits})["f"]
    expected = (bits.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(out.view(np.uint32), expected.view(np.uint32))
    np.testing.assert_array_equal(bf16_bits_to_f32(bits).view(np.uint32),
                                  expected.view(np.uint32))


def test_zero_d_results_stay_zero_d() -> None:
    gb = GraphBuilder("f")
    n = gb.input("n", "i64", ["seq"])
    d = gb.dim("seq")
    gb.output("d", d)
    gb.output("e", gb.const(np.float32(2.0), "f32").exp())
    gb.output("n", n)
    out = run_graph(gb.finish(), {"n": np.zeros(7, np.int64)}, {})
    assert out["d"].shape == ()
    assert int(out["d"]) == 7
    assert out["e"].shape == ()

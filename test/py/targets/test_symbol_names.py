"""Shape symbols become C identifiers in the kernels and their pool tasks: a
symbol named like the C target's own names (the task's context pointer, its
context structs, chunk bounds) must still compile and compute the same bits as
the exact interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from nanocompile.compiler import compile_program
from nanocompile.frontend.tensor import GraphBuilder
from nanocompile.interpreter.graph import run_graph
from nanocompile.targets.c import SymbolNameError


@pytest.mark.parametrize("symbol", ["ctx", "ctx0", "ctx_", "b_", "e_", "rc"])
def test_a_parallel_kernel_over_any_symbol_name(symbol: str) -> None:
    gb = GraphBuilder("names")
    x = gb.input("x", "f32", [symbol, 64])
    gb.output("y", (x.exp() * 2.0).named("y"))
    graph = gb.finish_module()
    program = compile_program(graph, {}, schedule=True, cache=False)
    assert "nc_parallel_for" in program.source  # the kernel runs on the pool
    x_value = np.random.default_rng(0).standard_normal((37, 64)).astype(np.float32)
    want = run_graph(graph, {"x": x_value}, {}, exact=True)["y"]
    for threads in (1, 2):
        program.set_threads(threads)
        got = program.run({"x": x_value})["y"]
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("symbol", ["v0", "i3", "b1", "io", "syms", "int", "nc_x", "nck_y"])
def test_a_symbol_taken_in_c_is_one_clear_error(symbol: str) -> None:
    gb = GraphBuilder("names")
    x = gb.input("x", "f32", [symbol, 64])
    gb.output("y", (x.exp() * 2.0).named("y"))
    with pytest.raises(SymbolNameError, match=f"the shape symbol '{symbol}' cannot be a C "):
        compile_program(gb.finish_module(), {}, schedule=True, cache=False)

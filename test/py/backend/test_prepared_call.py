"""CompiledProgram.prepare: a call checked, planned and allocated once."""

from __future__ import annotations

import numpy as np
import pytest

from nanocompile.backend.runtime import CompiledProgram, PreparedCall
from nanocompile.compiler import compile_program
from nanocompile.dialects.graph.signature import ArgumentError
from nanocompile.frontend.composites import linear, silu
from nanocompile.frontend.tensor import GraphBuilder

K, N = 48, 40


@pytest.fixture(scope="module")
def program() -> CompiledProgram:
    gb = GraphBuilder("mlp")
    x = gb.input("x", "f32", ["seq", K])
    y = silu(linear(x, gb.weight("w", [N, K]), gb.weight("b", [N])))
    gb.output("y", y.named("y"))
    rng = np.random.default_rng(0)
    weights = {"w": rng.standard_normal((N, K), dtype=np.float32),
               "b": rng.standard_normal(N, dtype=np.float32)}
    return compile_program(gb.finish_module(), weights, schedule=True)


def _x(rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((rows, K), dtype=np.float32)


@pytest.mark.parametrize("rows", [1, 7])
def test_prepared_runs_are_bitwise_the_programs_calls(program: CompiledProgram,
                                                      rows: int) -> None:
    x = _x(rows, 1)
    prepared = program.prepare({"x": x})
    assert isinstance(prepared, PreparedCall)
    assert dict(prepared.bindings) == {"seq": rows}
    first = prepared.run()
    expected = program.run({"x": x})["y"]
    assert first["y"].shape == (rows, N)
    assert np.array_equal(first["y"], expected)
    again = prepared.run()
    assert again["y"] is first["y"]  # the same output array every call
    assert np.array_equal(again["y"], expected)


def test_a_prepared_call_reads_the_inputs_current_contents(program: CompiledProgram) -> None:
    x = _x(3, 2)
    prepared = program.prepare({"x": x})
    before = prepared.run()["y"].copy()
    x[...] = _x(3, 3)  # refilled in place
    after = prepared.run()["y"]
    assert not np.array_equal(after, before)
    assert np.array_equal(after, program.run({"x": x})["y"])


def test_prepare_checks_like_a_call(program: CompiledProgram) -> None:
    with pytest.raises(ArgumentError, match="C-contiguous"):
        program.prepare({"x": np.asfortranarray(_x(4, 4))})
    with pytest.raises(ArgumentError):
        program.prepare({"x": _x(4, 4).astype(np.float64)})
    with pytest.raises(ArgumentError):
        program.prepare({})

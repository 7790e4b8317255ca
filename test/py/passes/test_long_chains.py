"""Long flat chains of elementwise ops compile, fused and unfused (issue 14, point 8).

A chain of thousands of single-use elementwise ops is legal Graph IR, and
every pass on the compile path walks it: the fuse pass's epilogue analysis
and read-through paths, the lowering, the C target, the interpreter. None of
them may recurse once per op (Python's stack holds about a thousand frames):
the chains below are 1,000 and 5,000 ops long and must compile, and run
bitwise equal to the interpreter (each op is one correctly rounded IEEE
operation: add, neg, mul by 1).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from _numerics import assert_bitwise, random_f32, rng_for
from xdsl.dialects.builtin import ModuleOp

from nanocompile.compiler import compile_program, optimize_graph
from nanocompile.dialects import graph as g
from nanocompile.frontend import GraphBuilder
from nanocompile.interpreter import run_graph

LONG = pytest.param(5000, marks=pytest.mark.slow)  # ~5 s each: the 1,000 case stays fast
LENGTHS = (1000, LONG)


@pytest.fixture(scope="module", autouse=True)
def kernel_cache(shared_kernel_cache: Path) -> Iterator[Path]:
    """The tests' shared gcc and program cache (conftest.py) for this module: the
    tests never write the user's cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NANOCOMPILE_CACHE_DIR", str(shared_kernel_cache))
        yield shared_kernel_cache


def chain(n: int) -> ModuleOp:
    """``n`` elementwise ops, each using the one before once: add x, neg, mul by 1."""
    gb = GraphBuilder(f"chain{n}")
    x = gb.input("x", "f32", ["seq", 8])
    y = x
    for i in range(n):
        y = y + x if i % 3 == 0 else -y if i % 3 == 1 else y * 1.0
    gb.output("y", y)
    return gb.finish_module()


def index_chain(n: int) -> ModuleOp:
    """``n`` index-only ops (reshapes back and forth) read through by one add."""
    gb = GraphBuilder(f"index_chain{n}")
    x = gb.input("x", "f32", ["seq", 8])
    y = x
    for i in range(n):
        y = y.reshape("seq", 2, 4) if i % 2 == 0 else y.reshape("seq", 8)
    gb.output("y", y + x)
    return gb.finish_module()


UNFUSED_SLOW = pytest.mark.slow  # one kernel per op: a 1,000-kernel C file for gcc (~30 s)


@pytest.mark.parametrize(
    ("build", "n", "fuse"),
    [*((b, 1000, True) for b in (chain, index_chain)),
     *(pytest.param(b, 5000, True, marks=pytest.mark.slow) for b in (chain, index_chain)),
     (index_chain, 1000, False),
     pytest.param(chain, 1000, False, marks=UNFUSED_SLOW)],
)
def test_long_chain_compiles_and_matches_the_interpreter(build: Callable[[int], ModuleOp],
                                                         n: int, fuse: bool) -> None:
    module = build(n)
    x = random_f32(rng_for(f"chain-{n}", 0), (3, 8), specials=False)
    want = run_graph(module, {"x": x}, {})["y"]
    program = compile_program(module, {}, fuse=fuse)
    got = program.run({"x": x})["y"]
    assert_bitwise(got, want, f"{build.__name__}({n}), fuse={fuse}")


@pytest.mark.parametrize("n", LENGTHS)
def test_long_chain_fuses_into_one_region(n: int) -> None:
    fused = optimize_graph(chain(n))
    (func,) = fused.ops
    regions = [op for op in func.walk() if isinstance(op, g.FusedOp)]
    assert len(regions) == 1
    assert run_graph(fused, {"x": np.ones((2, 8), np.float32)}, {})["y"].shape == (2, 8)


@pytest.mark.slow  # ~4 s: nc-opt parses and prints a 2,000-op chain
def test_ncopt_fuses_a_long_chain(tmp_path: Path) -> None:
    """Once "nc-opt: error: input nested too deeply" from the fuse pass."""
    src = tmp_path / "chain.mlir"
    src.write_text(str(chain(2000)))
    proc = subprocess.run(
        [sys.executable, "-c", "from nanocompile.tools.nc_opt import main; main()",
         "-p", "fuse", str(src)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "nested too deeply" not in proc.stderr
    assert proc.stdout.count("graph.fused ") == 1

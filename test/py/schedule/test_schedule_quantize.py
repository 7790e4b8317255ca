"""``vectorize`` of spec §5 kernel B's quantization of the activations
(``xq = clamp(roundf(x / xs_b), -127, 127)`` stored as int8): ``math.round``
per lane (``nc_roundf<W>``) and the f32 -> i8 ``loop.vfptosi`` stored as a
``vector<Wxi8>`` (schedule/vectorize.py, targets/c_vector.py).

Claims:

* the vectorized kernel (4, 8 and 16 lanes, each where the CPU has its
  flags) stores the unscheduled kernel's bytes, and both equal an
  independent NumPy reference (round half away from zero in float64, the
  clamp, NaN to 127), on blocks built to hit exact halves of both signs, the
  floats just below a half (0.49999997, where floor(|q| + 0.5) would round
  up), -0.0 and tiny negatives, the clamp's edges (126.5, 127.5, -127.5,
  beyond, infinities) and NaN, at block counts with and without a vector
  tail, at 1, 2 and 3 threads;
* the default schedule vectorizes the kernel (it had stayed scalar:
  ``math.round`` and the i8 cast had no vector form), and only an f32 -> i8
  cast that is only stored is vectorized (an i32 one is still refused, the
  lit test ``apply-schedule-vectorize-no-vector-form.mlir``).
"""

from __future__ import annotations

import numpy as np
import pytest
from _arches import arch_params
from _schedule_helpers import only_kernel, scheduled_copy
from xdsl.dialects.builtin import ModuleOp

from nanocompile.compiler import compile_loop, lower_to_loop, optimize_graph, schedule_loop
from nanocompile.dialects import graph as g
from nanocompile.dialects import loop, sched
from nanocompile.frontend.tensor import GraphBuilder, where
from nanocompile.targets.arch import Arch, cpu_flags


def quantize_module(blocks: int) -> ModuleOp:
    """The kernel ``quantize-int8{kernel=b}`` builds and lowers to one
    ``fused_cast`` (x in blocks of 32; the per-block scale ``xs``, broadcast
    along the block), as a one-kernel program."""
    gb = GraphBuilder("quantize")
    x = gb.input("x", "f32", ["seq", blocks, 32])
    xs = gb.input("xs", "f32", ["seq", blocks, 1])
    q = gb.add(g.RoundOp((x / xs.broadcast_to("seq", blocks, 32)).value))
    q = where(q <= 127.0, q, 127.0)
    q = where(-127.0 <= q, q, -127.0)
    gb.output("xq", q.cast("i8"))
    return lower_to_loop(optimize_graph(gb.finish_module()))


SPECIAL = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997,
                    1.4999999, -1.4999999, -0.0, 0.0, -1e-30, 1e-30, -0.3, 0.3,
                    126.5, -126.5, 127.49999, 127.5, -127.5, -127.49999, 128.0, -128.0,
                    300.0, -300.0, np.inf, -np.inf, np.nan, 3.0, -3.0, 8388607.5],
                   np.float32)


def reference(x: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """roundf (halves away from zero) in float64, where f32 + 0.5 is exact; the
    clamp as the kernel's selects order it (NaN fails both: 127)."""
    v = (x / xs).astype(np.float64)  # the f32 quotient, widened
    r = np.sign(v) * np.floor(np.abs(v) + 0.5)
    return np.where(r <= 127, r, 127).clip(-127).astype(np.int8)


def feed(rows: int, blocks: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    xs = rng.uniform(0.01, 2.0, (rows, blocks, 1)).astype(np.float32)
    xs[:, 0] = 1.0  # the special quotients exactly, in block 0 of every row
    x = (rng.standard_normal((rows, blocks, 32)) * 60).astype(np.float32)
    x[:, 0, :] = SPECIAL
    if blocks > 1:  # and in a scaled block: exact halves of xs = 0.5
        xs[:, 1] = 0.5
        x[:, 1, :] = SPECIAL * np.float32(0.5)
    return {"x": x, "xs": xs}


WIDTHS = [pytest.param(w, id=f"w{w}") for w in (4, 8, 16)]


def _needs(width: int) -> list[str]:
    return ["avx512f"] if width == 16 else ["avx2"]


@pytest.mark.parametrize("width", WIDTHS)
def test_vectorized_quantization_is_bitwise(width: int) -> None:
    missing = [f for f in _needs(width) if f not in cpu_flags()]
    if missing:
        pytest.skip(f"the CPU has no {', '.join(missing)}: {width} lanes untested here")
    rng = np.random.default_rng(11)
    for blocks in (1, 3):
        module = quantize_module(blocks)
        scheduled = scheduled_copy(module, [sched.Vectorize("d2", width),
                                            sched.Parallel("d0")])
        ops = {op.name for op in scheduled.walk()}
        assert "loop.vfptosi" in ops, ops
        plain, fast = compile_loop(module, {}), compile_loop(scheduled, {})
        inputs = feed(5, blocks, rng)
        want = _run(plain, inputs)
        assert np.array_equal(want, reference(inputs["x"], inputs["xs"])), blocks
        for threads in (1, 2, 3):
            fast.set_threads(threads)
            got = _run(fast, inputs)
            assert np.array_equal(got, want), (blocks, threads)


def _run(program: object, inputs: dict[str, np.ndarray]) -> np.ndarray:
    (out,) = program.run(inputs).values()  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("arch", [a for a in arch_params(quick_on_host_only=True)
                                  if a.values[0].vector])
def test_default_schedule_vectorizes_the_quantization(arch: Arch) -> None:
    module = quantize_module(3)
    scheduled, _ = schedule_loop(module, arch)
    kernel = only_kernel(scheduled)
    stores = [op for op in kernel.walk() if isinstance(op, loop.StoreOp)]
    assert any(str(op.value.type) == f"vector<{arch.f32_lanes}xi8>" for op in stores), \
        [str(op.value.type) for op in stores]
    rng = np.random.default_rng(12)
    inputs = feed(4, 3, rng)
    assert np.array_equal(_run(compile_loop(scheduled, {}), inputs),
                          reference(inputs["x"], inputs["xs"]))

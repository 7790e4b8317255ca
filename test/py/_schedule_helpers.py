"""Helpers the schedule tests share: a module parsed from text, a module's one
kernel, a loop by name, a copy of a module with directives applied, a refusal
that leaves the kernel as it was, the value of index arithmetic at given loop
indices, spec §5 kernel A's projection as a one-kernel module (and f32 and bf16
ones, with random weights and the independent reference for each; kernel B's
integer core and per-block FMA too), and a plain row-dot kernel in Loop IR
text (``ROWS_KERNEL``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from _fma_reference import lanes_matmul
from _int8_reference import kernel_a, quantize_rows
from _numerics import assert_bitwise, random_f32
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import BlockArgument, SSAValue
from xdsl.parser import Parser

from nanocompile.compiler import compile_loop, lower_to_loop, optimize_graph
from nanocompile.dialects import get_all_dialects, loop, sched
from nanocompile.dialects import graph as g
from nanocompile.frontend import GraphBuilder
from nanocompile.frontend.composites import linear
from nanocompile.passes.apply_schedule import apply_directives, replace_kernel
from nanocompile.schedule.primitives import ScheduleError

ROWS_KERNEL = """builtin.module {
  loop.kernel @rows(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>)
      syms ["n"] access ["w", "r", "r"]
      footprints [#loop.fp<[n], [1]>, #loop.fp<[n, 40], [40, 1]>, #loop.fp<[40], [1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    %c40 = arith.constant 40 : index
    loop.for "d0" %j = %c0 to %n {
      %z = arith.constant 0.000000e+00 : f32
      %s = loop.for "k" %k = %c0 to %c40 iter(%acc = %z) -> (f32) {
        %w = loop.load %1[%j, %k] strides [40, 1] : f32
        %x = loop.load %2[%k] strides [1] : f32
        %p = math.fma %w, %x, %acc : f32
        loop.yield %p : f32
      }
      loop.store %s, %0[%j] strides [1] : f32
    }
  }
}"""
"""One kernel: ``y[j] = sum_k W[j, k] * x[k]`` over ``n`` rows of 40, an FMA chain
in ``k`` order (a loop ``d0`` of symbolic extent around a sum ``k``)."""


def parse_module(text: str) -> ModuleOp:
    """``text`` parsed with every nanocompile dialect registered."""
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return Parser(ctx, text).parse_module()


def unchanged(action: Callable[[loop.KernelOp], None], kernel: loop.KernelOp,
              error: type[ScheduleError]) -> None:
    """``action`` on ``kernel`` raises ``error`` and leaves the kernel as it was."""
    before = str(kernel)
    with pytest.raises(error):
        action(kernel)
    assert str(kernel) == before


def only_kernel(module: ModuleOp) -> loop.KernelOp:
    """The module's one kernel."""
    (kernel,) = [op for op in module.ops if isinstance(op, loop.KernelOp)]
    return kernel


def loop_named(kernel: loop.KernelOp, name: str) -> loop.ForOp:
    """The kernel's one loop called ``name``."""
    (found,) = [op for op in kernel.walk() if isinstance(op, loop.ForOp)
                and op.loop_name.data == name]
    return found


def scheduled_copy(module: ModuleOp, directives: list[sched.Directive]) -> ModuleOp:
    """A verified copy of ``module`` with ``directives`` applied to its kernel."""
    out = module.clone()
    kernel = only_kernel(out)
    replace_kernel(out, kernel, apply_directives(kernel, directives, out, []), [])
    out.verify()
    return out


INDEX_OPS = {arith.AddiOp: lambda a, b: a + b, arith.SubiOp: lambda a, b: a - b,
             arith.MuliOp: lambda a, b: a * b, arith.DivSIOp: lambda a, b: a // b,
             arith.RemSIOp: lambda a, b: a % b, arith.MinSIOp: min, arith.MaxSIOp: max}


def index_value(value: SSAValue, ivs: dict[SSAValue, int]) -> int:
    """The value of index arithmetic (constants, ``INDEX_OPS``) at loop indices ``ivs``."""
    if value in ivs:
        return ivs[value]
    assert not isinstance(value, BlockArgument), f"unbound block argument {value}"
    op = value.owner
    if isinstance(op, arith.ConstantOp):
        assert isinstance(op.value, IntegerAttr)
        return int(op.value.value.data)
    a, b = (index_value(v, ivs) for v in op.operands)
    return int(INDEX_OPS[type(op)](a, b))


def kernel_a_projection(k: int, n: int) -> ModuleOp:
    """spec §5 kernel A: ``(x @ q.T) * scale`` with ``q`` int8 ``[n, k]``, the
    matmul in the ``blocks32`` order, lowered to one kernel."""
    gb = GraphBuilder("kernel_a")
    x = gb.input("x", "f32", ["seq", k])
    q = gb.weight("q", [n, k], "i8")
    scale = gb.weight("scale", [n])
    dot = gb.add(g.MatmulOp(x.value, q.cast("f32").T.value, order="blocks32"))
    gb.output("y", dot * scale.reshape(1, n).broadcast_to("seq", n))
    return lower_to_loop(optimize_graph(gb.finish_module()))


def f32_projection(k: int, n: int) -> ModuleOp:
    """``x @ w.T + b`` with f32 ``w`` ``[n, k]``, lowered to one kernel."""
    gb = GraphBuilder("proj")
    x = gb.input("x", "f32", ["seq", k])
    gb.output("y", linear(x, gb.weight("w", [n, k]), gb.weight("b", [n])))
    return lower_to_loop(optimize_graph(gb.finish_module()))


def bf16_projection(k: int, n: int) -> ModuleOp:
    """``x @ w.T`` with bf16 ``w`` ``[n, k]`` widened in the kernel."""
    gb = GraphBuilder("proj")
    x = gb.input("x", "f32", ["seq", k])
    gb.output("y", linear(x, gb.weight("w", [n, k], "bf16").cast("f32")))
    return lower_to_loop(optimize_graph(gb.finish_module()))


def kernel_b_projection(k: int, n: int) -> ModuleOp:
    """spec §5 kernel B's integer core and per-block FMA (``graph.matmul_i8``):
    ``total`` of quantized activations ``xq`` (i8 ``[seq, k]``) with their
    block scales ``xs`` (f32 ``[seq, ceil(k / 32)]``) against an int8 weight
    ``q`` ``[n, k]``, lowered to one kernel."""
    gb = GraphBuilder("kernel_b")
    xq = gb.input("xq", "i8", ["seq", k])
    xs = gb.input("xs", "f32", ["seq", -(-k // 32)])
    q = gb.weight("q", [n, k], "i8")
    gb.output("y", gb.add(g.MatmulI8Op(xq.value, xs.value, q.T.value)))
    return lower_to_loop(optimize_graph(gb.finish_module()))


def projection_weights(fmt: str, rng: np.random.Generator, n: int, k: int
                       ) -> dict[str, np.ndarray]:
    """Random weights of an ``fmt`` projection ("f32", "bf16" or "kernel A")."""
    if fmt == "f32":
        return {"w": random_f32(rng, (n, k), specials=False),
                "b": random_f32(rng, (n,), specials=False)}
    if fmt == "bf16":
        bits = random_f32(rng, (n, k), specials=False).view(np.uint32) >> 16
        return {"w": bits.astype(np.uint16)}
    q, scale = quantize_rows((rng.standard_normal((n, k)) * 0.05).astype(np.float32))
    return {"q": q, "scale": scale}


def projection_reference(fmt: str, x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    """The independent reference of an ``fmt`` projection: ``lanes_matmul`` (plus
    the bias for f32; on the bf16 weights widened by a shift), or kernel A's."""
    if fmt == "f32":
        return (lanes_matmul(x, w["w"].T) + w["b"]).astype(np.float32)
    if fmt == "bf16":
        widened = (w["w"].astype(np.uint32) << 16).view(np.float32)
        return lanes_matmul(x, widened.T).astype(np.float32)
    return kernel_a(x, w["q"], w["scale"])


def assert_projection_bitwise(scheduled: ModuleOp, fmt: str, n: int, k: int,
                              rng: np.random.Generator, label: str) -> None:
    """``scheduled`` (an ``fmt`` projection of ``n`` columns over ``k``) gives the
    bits of ``projection_reference`` at 1, 2 and 3 threads and 1, 2, 3 and 7
    rows, on random weights and inputs from ``rng``."""
    w = projection_weights(fmt, rng, n, k)
    program = compile_loop(scheduled, w)
    for threads in (1, 2, 3):
        assert program.set_threads(threads) == threads
        for seq in (1, 2, 3, 7):
            x = random_f32(rng, (seq, k), specials=False)
            assert_bitwise(program.run({"x": x})["y"], projection_reference(fmt, x, w),
                           f"{label}, seq {seq}, {threads} threads")

"""Helpers the schedule tests share: a module parsed from text, a module's one
kernel, a loop by name, a copy of a module with directives applied, a refusal
that leaves the kernel as it was, the value of index arithmetic at given loop
indices, spec §5 kernel A's projection as a one-kernel module, and a plain
row-dot kernel in Loop IR text (``ROWS_KERNEL``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, ModuleOp
from xdsl.ir import BlockArgument, SSAValue
from xdsl.parser import Parser

from nanocompile.compiler import lower_to_loop, optimize_graph
from nanocompile.dialects import get_all_dialects, loop, sched
from nanocompile.dialects import graph as g
from nanocompile.frontend import GraphBuilder
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

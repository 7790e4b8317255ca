"""The reference interpreter: the definition of what a graph means.

Each primitive is the obvious NumPy call (spec §2.2). Arguments are checked
against the graph's signature before anything runs, and every node's result
is checked against the type the verifier inferred (evaluated with the run's
symbol bindings; a 0-d result must stay 0-d). Keep this module unoptimized
and obvious: every other backend is tested against it.

A ``graph.matmul`` that states an order (``order = "blocks32"``, spec §5
kernel A's) means that order exactly, in every mode (``exact.blocks32_matmul``);
so do a ``graph.reduce_sum`` that states one (``order = "sequential"``,
``exact.sequential_sum``) and spec §5 kernel B's ``graph.matmul_i8``
(``exact.blocks_i8_matmul``). ``graph.round`` is C's ``roundf``, exactly, in
every mode (``exact.round_half_away``).

``exact=True`` (``run_graph``, ``InterpreterBackend``) computes what the
generated C computes, bit for bit: every other matmul and every f32
``reduce_sum`` in the compiler's default order (16 lanes and their halving
tree, FMA chains for matmuls), ``exp`` as the model defines it (``ir/expf.py``:
one f32 algorithm, the C target's ``nc_expf``), and ``sin``, ``cos`` through
the C library's ``sinf``, ``cosf`` (``interpreter/exact.py``). Everything
else is exact in both modes (correctly rounded f32 operations, integers,
movement). The default mode is the obvious NumPy call: NumPy's (BLAS's) order
and NumPy's ``exp``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from nanocompile.dialects import graph as g
from nanocompile.dialects.graph.signature import ArgumentError, Signature, check_value
from nanocompile.interpreter.exact import (
    LIBM,
    blocks32_matmul,
    blocks_i8_matmul,
    lanes_matmul,
    lanes_sum,
    round_half_away,
    sequential_sum,
)
from nanocompile.ir.dtypes import bf16_bits_to_f32, numpy_dtype
from nanocompile.ir.expf import expf


class InterpreterError(RuntimeError):
    """A graph could not be evaluated on the given data (e.g. a gather id out of range)."""


Bindings = Mapping[str, int]
Kernel = Callable[[Any, list[np.ndarray], Bindings], np.ndarray]


def _gather(op: g.GatherOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    table, ids = args
    rows = table.shape[0]
    bad = ids[(ids < 0) | (ids >= rows)]
    if bad.size:
        raise InterpreterError(f"graph.gather: id {int(bad[0])} is out of range [0, {rows})")
    return table[ids]


def _slice(op: g.SliceOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    (x,) = args
    axis = op.axis.data
    start, stop = op.start.data.evaluate(b), op.stop.data.evaluate(b)
    if not 0 <= start <= stop <= x.shape[axis]:
        raise InterpreterError(
            f"graph.slice: bounds [{start}, {stop}) do not fit axis {axis} of size "
            f"{x.shape[axis]} ({op.start.data} .. {op.stop.data})"
        )
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, stop)
    return x[tuple(index)]


def _update_slice(op: g.UpdateSliceOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    dest, update = args
    offsets = [o.evaluate(b) for o in op.offset_exprs]
    for axis, (off, n, size) in enumerate(zip(offsets, update.shape, dest.shape, strict=True)):
        if not 0 <= off <= size - n:
            raise InterpreterError(
                f"graph.update_slice: {n} elements at offset {off} do not fit axis {axis} of "
                f"size {size} ({op.offset_exprs[axis]})")
    out = dest.copy()  # functional: the operand is never written
    out[tuple(slice(off, off + n) for off, n in zip(offsets, update.shape, strict=True))] = update
    return out


def _iota(op: g.IotaOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    spec = op.result.type.spec
    shape = [d.evaluate(b) for d in spec.shape]
    axis = op.axis.data
    line = np.arange(shape[axis], dtype=numpy_dtype(spec.dtype))
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return np.broadcast_to(line.reshape(view), shape)


def _reduce_max(op: g.ReduceMaxOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    (x,) = args
    axis = op.axis.data
    if x.shape[axis] == 0:  # the identity: -inf for floats, the minimum for ints
        identity = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        shape = list(x.shape)
        shape[axis] = 1
        return np.full(shape, identity, dtype=x.dtype)
    return np.max(x, axis=axis, keepdims=True)


def _cast(op: g.CastOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    (x,) = args
    src, dst = g.tensor_type(op.operand).dtype.data, op.result.type.dtype.data
    if src == "bf16":
        return bf16_bits_to_f32(x)
    if dst == "bool":
        return x != 0
    with np.errstate(invalid="ignore"):
        return x.astype(numpy_dtype(dst))


def _matmul(op: g.MatmulOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    """The obvious ``np.matmul``, unless the op states its order."""
    if op.order_name is None:
        return np.matmul(args[0], args[1])
    return _ordered_matmul(op, args)


def _ordered_matmul(op: g.MatmulOp, args: list[np.ndarray]) -> np.ndarray:
    if op.order_name == "blocks32":
        return blocks32_matmul(args[0], args[1])
    raise InterpreterError(f"graph.matmul: the interpreter has no semantics for order "
                           f"\"{op.order_name}\"")


def _exact_matmul(op: g.MatmulOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    """The stated order, or the compiler's default one (``lanes_matmul``)."""
    if op.order_name is None:
        return lanes_matmul(args[0], args[1])
    return _ordered_matmul(op, args)


def _sum(op: g.ReduceSumOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    """The obvious ``np.sum``, unless the op states its order."""
    if op.order_name is not None:
        return _ordered_sum(op, args)
    return np.sum(args[0], axis=op.axis.data, keepdims=True, dtype=args[0].dtype)


def _ordered_sum(op: g.ReduceSumOp, args: list[np.ndarray]) -> np.ndarray:
    if op.order_name == "sequential":
        return sequential_sum(args[0], op.axis.data)
    raise InterpreterError(f"graph.reduce_sum: the interpreter has no semantics for order "
                           f"\"{op.order_name}\"")


def _exact_sum(op: g.ReduceSumOp, args: list[np.ndarray], b: Bindings) -> np.ndarray:
    """The stated order; else f32 sums in the compiler's lanes order, integer sums
    wrap, in any order."""
    (x,) = args
    if op.order_name is not None:
        return _ordered_sum(op, args)
    if x.dtype == np.float32:
        return lanes_sum(x, op.axis.data)
    return np.sum(x, axis=op.axis.data, keepdims=True, dtype=x.dtype)


def _shape_of(op: Operation, b: Bindings) -> list[int]:
    return [d.evaluate(b) for d in g.tensor_type(op.results[0]).dims]


KERNELS: dict[type[Operation], Kernel] = {
    g.ConstOp: lambda op, a, b: op.to_array(),
    g.IotaOp: _iota,
    g.DimOp: lambda op, a, b: np.array(op.expr.data.evaluate(b), dtype=np.int64),
    g.AddOp: lambda op, a, b: np.add(a[0], a[1]),
    g.SubOp: lambda op, a, b: np.subtract(a[0], a[1]),
    g.MulOp: lambda op, a, b: np.multiply(a[0], a[1]),
    g.DivOp: lambda op, a, b: np.divide(a[0], a[1]),
    g.LessEqualOp: lambda op, a, b: np.less_equal(a[0], a[1]),
    g.WhereOp: lambda op, a, b: np.where(a[0], a[1], a[2]),
    g.NegOp: lambda op, a, b: np.negative(a[0]),
    g.ExpOp: lambda op, a, b: np.exp(a[0]),
    g.SqrtOp: lambda op, a, b: np.sqrt(a[0]),
    g.ReciprocalOp: lambda op, a, b: np.divide(a[0].dtype.type(1), a[0]),
    g.SinOp: lambda op, a, b: np.sin(a[0]),
    g.CosOp: lambda op, a, b: np.cos(a[0]),
    g.RoundOp: lambda op, a, b: round_half_away(a[0]),
    g.CastOp: _cast,
    g.ReduceSumOp: _sum,
    g.ReduceMaxOp: _reduce_max,
    g.ReshapeOp: lambda op, a, b: np.reshape(a[0], _shape_of(op, b)),
    g.PermuteOp: lambda op, a, b: np.transpose(a[0], op.permutation),
    g.BroadcastOp: lambda op, a, b: np.broadcast_to(a[0], _shape_of(op, b)),
    g.SliceOp: _slice,
    g.ConcatOp: lambda op, a, b: np.concatenate(a, axis=op.axis.data),
    g.UpdateSliceOp: _update_slice,
    g.MatmulOp: _matmul,
    g.MatmulI8Op: lambda op, a, b: blocks_i8_matmul(a[0], a[1], a[2]),
    g.GatherOp: _gather,
}
"""The semantics of each primitive: the obvious NumPy call."""

EXACT_KERNELS: dict[type[Operation], Kernel] = {
    **KERNELS,
    g.MatmulOp: _exact_matmul,
    g.ReduceSumOp: _exact_sum,
    g.ExpOp: lambda op, a, b: expf(a[0]),
    g.SinOp: lambda op, a, b: LIBM["sin"](a[0]),
    g.CosOp: lambda op, a, b: LIBM["cos"](a[0]),
}
"""``exact=True``: the generated C's bits (see the module docstring)."""


def find_graph(module: ModuleOp | g.GraphFuncOp, name: str | None = None) -> g.GraphFuncOp:
    """The ``graph.func`` of a module (by name when the module holds several)."""
    if isinstance(module, g.GraphFuncOp):
        return module
    funcs = [op for op in module.ops if isinstance(op, g.GraphFuncOp)]
    if name is not None:
        funcs = [f for f in funcs if f.sym_name.data == name]
    if len(funcs) != 1:
        names = [f.sym_name.data for f in module.ops if isinstance(f, g.GraphFuncOp)]
        raise ArgumentError(f"expected exactly one graph.func{f' @{name}' if name else ''}, "
                            f"found {names}")
    return funcs[0]


def run_graph(module: ModuleOp | g.GraphFuncOp, inputs: Mapping[str, Any],
              weights: Mapping[str, np.ndarray], *, name: str | None = None,
              exact: bool = False) -> dict[str, np.ndarray]:
    """Evaluate a graph with NumPy; returns its outputs by name (``inputs`` also
    holds the graph's scalars, as integers). ``exact``: the compiled C's bits
    (``EXACT_KERNELS``, see the module docstring). A state (an input returned
    under its own name, updated) is returned as a new array: the input is
    never written."""
    func = find_graph(module, name)
    bindings = Signature.of(func).bind(inputs)
    kernels = EXACT_KERNELS if exact else KERNELS
    ops = list(func.body.block.ops)
    last_use = {v: i for i, op in enumerate(ops) for v in op.operands}
    values: dict[SSAValue, np.ndarray] = {}
    for i, op in enumerate(ops):
        if isinstance(op, g.ReturnOp):
            return {n: np.asarray(values[v]) for n, v in zip(op.names, op.outputs, strict=True)}
        values[op.results[0]] = _evaluate(op, values, inputs, weights, bindings, kernels)
        for v in op.operands:  # a value no later op reads is dropped (its memory freed)
            if last_use[v] == i:
                values.pop(v, None)
    raise InterpreterError(f"graph.func @{func.sym_name.data} has no graph.return")


def _evaluate(op: Operation, values: dict[SSAValue, np.ndarray],
              inputs: Mapping[str, Any], weights: Mapping[str, np.ndarray],
              bindings: Bindings, kernels: Mapping[type[Operation], Kernel]) -> np.ndarray:
    spec = g.tensor_spec(op.results[0])
    if isinstance(op, g.InputOp):
        return inputs[op.arg_name.data]
    if isinstance(op, g.WeightOp):
        name = op.weight_name.data
        if name not in weights:
            raise ArgumentError(f"missing weight '{name}'")
        check_value(f"weight '{name}'", spec, weights[name], {})
        return weights[name]
    if isinstance(op, g.FusedOp):
        return _run_region(op, [values[v] for v in op.operands], bindings, kernels)
    kernel = kernels.get(type(op))
    if kernel is None:
        raise InterpreterError(f"the interpreter has no semantics for {op.name}")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        result = np.asarray(kernel(op, [values[v] for v in op.operands], bindings))
    name = f"%{op.results[0].name_hint}" if op.results[0].name_hint else "its result"
    try:
        check_value(f"{op.name} ({name})", spec, result, bindings)
    except ArgumentError as e:
        raise InterpreterError(f"result does not match its declared type: {e}") from None
    return result


def _run_region(op: g.FusedOp, args: list[np.ndarray], bindings: Bindings,
                kernels: Mapping[type[Operation], Kernel]) -> np.ndarray:
    """A fused region means exactly its ops, run one after another."""
    values: dict[SSAValue, np.ndarray] = dict(zip(op.block.args, args, strict=True))
    for inner in op.block.ops:
        if isinstance(inner, g.FusedYieldOp):
            return values[inner.value]
        values[inner.results[0]] = _evaluate(inner, values, {}, {}, bindings, kernels)
    raise InterpreterError("graph.fused region has no graph.yield")


class InterpreterBackend:
    """The interpreter as an engine backend: one graph, one set of weights
    (``exact``: the compiled C's bits, see the module docstring)."""

    def __init__(self, module: ModuleOp | g.GraphFuncOp,
                 weights: Mapping[str, np.ndarray], *, exact: bool = False) -> None:
        self.func = find_graph(module)
        self.weights = weights
        self.exact = exact

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return run_graph(self.func, inputs, self.weights, exact=self.exact)

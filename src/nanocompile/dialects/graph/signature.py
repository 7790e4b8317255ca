"""Checking a graph's run-time arguments against its signature.

One checker for every backend (the interpreter now, the compiled runtime
later): names, dtypes, ranks, concrete dims, and symbol bindings. A dim that
is exactly one symbol binds it (first binding wins; every later occurrence
must agree); any other symbolic dim is evaluated and compared. Each backend
checks its weights the same way, by name, with ``check_value``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from nanocompile.dialects import graph as g
from nanocompile.ir.dtypes import numpy_dtype
from nanocompile.ir.shapes import TensorSpec, shape_text


class ArgumentError(ValueError):
    """A run-time argument does not match the graph's signature."""


@dataclass(frozen=True)
class Signature:
    """The named inputs, weights and outputs of a ``graph.func``, and its
    scalars: symbols the caller binds by value (``inputs[name]``, an integer),
    not through a shape. An input and an output of one name and type are a
    *state* (e.g. the KV cache): a compiled program updates it in place."""

    name: str
    inputs: tuple[tuple[str, TensorSpec], ...]
    weights: tuple[tuple[str, TensorSpec], ...]
    outputs: tuple[tuple[str, TensorSpec], ...]
    scalars: tuple[str, ...] = ()

    @staticmethod
    def of(func: g.GraphFuncOp) -> Signature:
        ret = func.return_op()
        return Signature(
            func.sym_name.data,
            tuple((op.arg_name.data, op.result.type.spec) for op in func.inputs()),
            tuple((op.weight_name.data, op.result.type.spec) for op in func.weights()),
            tuple((n, g.tensor_spec(v)) for n, v in zip(ret.names, ret.outputs, strict=True)),
            func.scalars,
        )

    @property
    def states(self) -> tuple[str, ...]:
        """The names that are both an input and an output of the same type."""
        outputs = dict(self.outputs)
        return tuple(n for n, spec in self.inputs if outputs.get(n) == spec)

    def bind(self, inputs: Mapping[str, object]) -> dict[str, int]:
        """Check ``inputs`` and return the symbol bindings they imply."""
        expected: dict[str, object] = {**dict(self.inputs), **{s: None for s in self.scalars}}
        unknown = sorted(set(inputs) - set(expected))
        if unknown:
            raise ArgumentError(
                f"@{self.name}: unknown input(s) {unknown}; expected {sorted(expected)}"
            )
        missing = [n for n in expected if n not in inputs]
        if missing:
            raise ArgumentError(f"@{self.name}: missing input(s) {missing}")
        bindings: dict[str, int] = {s: _scalar(self.name, s, inputs[s]) for s in self.scalars}
        for name, spec in self.inputs:
            _bind_symbols(f"input '{name}'", spec, inputs[name], bindings)
        for name, spec in self.inputs:
            check_value(f"input '{name}'", spec, inputs[name], bindings)
        return bindings


def _scalar(func: str, name: str, value: object) -> int:
    """A scalar symbol's value: a non-negative integer (or a 0-d integer array)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ArgumentError(f"@{func}: scalar '{name}' must be a non-negative integer, "
                            f"got {value!r}")
    return int(value)


def _as_array(what: str, value: object) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise ArgumentError(f"{what}: expected a numpy array, got {type(value).__name__}")
    return value


def _bind_symbols(what: str, spec: TensorSpec, value: object,
                  bindings: dict[str, int]) -> None:
    arr = _as_array(what, value)
    if arr.ndim != spec.rank:
        raise ArgumentError(
            f"{what}: expected rank {spec.rank} {shape_text(spec.shape)}, "
            f"got shape {list(arr.shape)}"
        )
    for dim, size in zip(spec.shape, arr.shape, strict=True):
        sym = dim.single_symbol
        if sym is not None and sym not in bindings:
            bindings[sym] = int(size)


def check_value(what: str, spec: TensorSpec, value: object, bindings: Mapping[str, int]) -> None:
    """Raise ``ArgumentError`` unless ``value`` has ``spec``'s dtype and shape."""
    arr = _as_array(what, value)
    want = numpy_dtype(spec.dtype)
    if arr.dtype != want:
        raise ArgumentError(f"{what}: expected dtype {spec.dtype} ({want}), got {arr.dtype}")
    if arr.ndim != spec.rank:
        raise ArgumentError(
            f"{what}: expected rank {spec.rank} {shape_text(spec.shape)}, "
            f"got shape {list(arr.shape)}"
        )
    for axis, (dim, size) in enumerate(zip(spec.shape, arr.shape, strict=True)):
        expected = dim.evaluate(bindings)
        if expected != size:
            bound = ", ".join(f"{k}={v}" for k, v in sorted(bindings.items()))
            raise ArgumentError(
                f"{what}: dim {axis} is {size}, expected {dim} = {expected}"
                + (f" (with {bound})" if bound else "")
            )

"""Random valid graphs of primitives with symbolic dims: the compiler's differential fuzzer.

`generate(gb, seed)` appends one random graph to a `GraphBuilder`: a few
inputs and weights over the symbols ``a b c``, then 3-12 random primitive
applications (every compute and movement primitive, every dtype), built with
the frontend so every result type is inferred and every op is valid by
construction. The graph is fully determined by its seed and independent of
what else the builder holds, so several graphs share one compiled library
(`build_batch`) and a failing one replays alone (``tools/fuzz.py graphs
--replay SEED``).

Validity at *every* binding of the symbols is by construction too: a slice's
bounds are sub-sums of the axis's terms (``[a, a+1)`` of ``a+b+2``), a
gather's table has at least one row for every binding and its ids are drawn
in range, and an f32 value is clamped with ``where`` before a cast to an
integer type (float -> int casts are claimed only in range).

`check_batch` compiles nothing: given the compiled programs of a batch
(`PIPELINES`: ``fuse=False``, ``fuse=True``, and ``fuse=True, schedule=True``)
it runs them at several bindings, always in a `GuardedArena`, against the
interpreter, and classifies every output (`Check`):

* ``exact``: the result only passes through primitives that are one
  correctly rounded operation or none (everything but exp sin cos, f32
  reduce_sum, matmul and f32 reduce_max): bitwise equal to the interpreter,
  -0.0 included, except that any NaN equals any NaN (IEEE 754 leaves the
  payload of a two-NaN add/mul open, and it propagates; see
  ``test_primitives_c.test_commutative_two_nans``);
* ``ulp`` / ``sum`` / ``matmul`` / ``max``: an inexact primitive applied to
  exact operands (a *probe* output placed right after it): within the bounds
  of ``test_primitives_c`` (3 ulp for exp, 2 for sin/cos; 2·n·u·Σ|x| for sums
  and matmuls; reduce_max equal up to the sign of a zero tie), computed from
  the operands' values, which the interpreter gets as extra outputs of an
  *oracle* copy of the graph (the compiled graph does not have them, so they
  do not change what is fused);
* ``approx``: anything downstream of an inexact primitive: only the
  pipeline claims below.

And always: every output of the fused program equals the unfused program's
bit for bit, and the scheduled program's equals the fused program's, NaN
signs included; the one stated limit of those claims (README: where both
operands of an add or mul are NaN, which payload comes out is gcc's operand
order) is allowed and counted (`BatchReport.two_nan_payloads`: outputs that
differ only in the payloads of NaNs, ``test_scheduled_matmul_keeps_nan_payloads``
shows one). The optimized graph interprets to the same bits as the original;
and one run per binding with an out-of-range id in a gather whose result is
used must raise in the interpreter and in every program.

A difference is reported as a `Finding` whose kind says what it looks like
(``fold-inexact`` when the output depends on an inexact primitive of
constants, ``fused-nan-sign`` when only NaN signs differ, ...): the kinds of
the bugs found so far, each pinned by the regression test `REGRESSION_TESTS`
names. Every finding is a failure.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict, TypeVar

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from nanocompile.backend.guarded_arena import ArenaGuardError, GuardedArena
from nanocompile.backend.runtime import CompiledProgram, KernelError
from nanocompile.compiler import optimize_graph
from nanocompile.dialects import graph as g
from nanocompile.dialects.graph.signature import ArgumentError
from nanocompile.frontend import GraphBuilder, Tensor, concat, gather, where
from nanocompile.frontend.tensor import broadcast_shapes, update_slice
from nanocompile.interpreter import InterpreterError, run_graph
from nanocompile.ir.dtypes import numpy_dtype
from nanocompile.ir.shapes import ShapeError
from nanocompile.ir.symbolic import Expr

SYMBOLS = ("a", "b", "c")
CONST_DIMS = (1, 2, 3, 4, 5)
NUMERIC = ("f32", "i64", "i32", "i8")
F32_U = 2.0**-24
F32_MAX = float(np.finfo(np.float32).max)
# f32 -> int casts are claimed for in-range values only: clamp to these first
F32_INT_RANGE = {"i8": (-128.0, 127.0), "i32": (-2147483648.0, 2147483520.0),
                 "i64": (-9223372036854775808.0, 9223371487098961920.0)}
ULP_BOUND = {"exp": 3, "sin": 2, "cos": 2}  # as in test_primitives_c
ULP_RANGE = {"exp": (-87.0, 88.0), "sin": (-200.0, 200.0), "cos": (-200.0, 200.0)}

OP_WEIGHTS = {
    "unary": 10, "binary": 16, "where": 5, "cast": 7, "reduce": 8, "reshape": 7,
    "permute": 5, "broadcast": 4, "slice": 6, "concat": 6, "update_slice": 3, "matmul": 5,
    "gather": 5,
    "iota": 2, "dim": 3, "const": 2, "weight": 2, "input": 3,
}


@dataclass(frozen=True)
class Check:
    """How one output is compared with the interpreter (see the module docstring)."""

    kind: str  # exact | approx | ulp | sum | max | matmul
    op: str = ""  # the primitive of a probe
    operands: tuple[str, ...] = ()  # oracle outputs holding the probe's operands
    axis: int = 0


@dataclass(frozen=True)
class InputInfo:
    name: str
    dtype: str
    shape: tuple[Expr, ...]
    rows: Expr | None = None  # gather ids into a table with this many rows


@dataclass
class GraphSpec:
    """One generated graph: what its inputs need and how its outputs are checked."""

    seed: int
    inputs: list[InputInfo] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: dict[str, Check] = field(default_factory=dict)
    oracle: list[tuple[str, SSAValue]] = field(default_factory=list)
    gathers: list[tuple[str, SSAValue]] = field(default_factory=list)  # (ids input, result)
    folded: set[str] = field(default_factory=set)  # outputs that depend on a folded inexact op
    ops: collections.Counter[str] = field(default_factory=collections.Counter)


@dataclass
class _Node:
    t: Tensor
    exact: bool  # compiled == interpreter claimed (NaN-equivalent)
    const: bool = False  # fold-constants turns it into a constant
    folded: bool = False  # depends on an inexact primitive fold-constants evaluates in NumPy


@dataclass(frozen=True)
class _ScalarOperand:
    """A Python scalar operand: exact and constant, it folds nothing inexact."""

    exact: bool = True
    const: bool = True
    folded: bool = False


_SCALAR = _ScalarOperand()
_Operand = _Node | _ScalarOperand
T = TypeVar("T")


class _Generator:
    def __init__(self, gb: GraphBuilder, seed: int) -> None:
        self.gb = gb
        self.rng = np.random.default_rng([0x6E63, seed])
        self.prefix = f"s{seed}_"
        self.spec = GraphSpec(seed)
        self.nodes: list[_Node] = []
        self.symbols = sorted(self.rng.choice(SYMBOLS, int(self.rng.integers(1, 4)),
                                              replace=False).tolist())
        self._oracle_of: dict[int, str] = {}
        self._names = collections.Counter[str]()

    # -- helpers ---------------------------------------------------------------
    def name(self, kind: str) -> str:
        self._names[kind] += 1
        return f"{self.prefix}{kind}{self._names[kind]}"

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, seq: Sequence[T]) -> T:
        return seq[int(self.rng.integers(len(seq)))]

    def dim(self, zero: float = 0.06) -> Expr:
        r = self.rng.random()
        if r < 0.45:
            return Expr.sym(str(self.choice(self.symbols)))
        if r < 0.45 + zero:
            return Expr.const(0)
        return Expr.const(int(self.choice(CONST_DIMS)))

    def shape(self, rank: int | None = None) -> tuple[Expr, ...]:
        rank = int(self.choice((0, 1, 1, 2, 2, 2, 3, 3))) if rank is None else rank
        return tuple(self.dim() for _ in range(rank))

    def pick(self, pred: Callable[[_Node], bool]) -> _Node | None:
        """A node satisfying ``pred``, recent ones more likely (deeper graphs)."""
        cands = [i for i, n in enumerate(self.nodes) if pred(n)]
        if not cands:
            return None
        weights = np.array([1.0 + i for i in cands])
        return self.nodes[cands[int(self.rng.choice(len(cands), p=weights / weights.sum()))]]

    def add(self, t: Tensor, exact: bool, *parents: _Operand, inexact: bool = False,
            const: bool | None = None) -> _Node:
        """Record a new value. ``parents`` are its operands; ``inexact`` marks a
        primitive whose NumPy result (used when fold-constants evaluates it) may
        differ from the compiled kernel's (exp sin cos, f32 sum/max/matmul, and
        f32 add/mul, whose two-NaN payload NumPy and gcc may pick differently)."""
        node = self.node(t, exact, *parents, inexact=inexact, const=const)
        self.nodes.append(node)
        return node

    def node(self, t: Tensor, exact: bool, *parents: _Operand, inexact: bool = False,
             const: bool | None = None) -> _Node:
        if const is None:
            const = bool(parents) and all(p.const for p in parents) and all(
                d.is_const for d in t.shape)
        folded = any(p.folded for p in parents) or (inexact and const)
        return _Node(t, exact, const, folded)

    def oracle(self, node: _Node) -> str:
        key = id(node.t.value)
        if key not in self._oracle_of:
            name = self.name("q")
            self.spec.oracle.append((name, node.t.value))
            self._oracle_of[key] = name
        return self._oracle_of[key]

    def probe(self, node: _Node, check: Check) -> None:
        self.output(node, check, "p")

    def output(self, node: _Node, check: Check, kind: str = "o") -> None:
        name = self.name(kind)
        self.gb.output(name, node.t)
        self.spec.outputs[name] = check
        if node.folded:
            self.spec.folded.add(name)

    def scalar(self, dtype: str) -> float | int:
        if dtype == "f32":
            return float(self.choice((0.5, -1.5, 2.0, 0.0, 3.25, 1e-3, 100.0, -7.0)))
        return int(self.rng.integers(-5, 6))

    # -- sources ---------------------------------------------------------------
    def new_input(self, dtype: str, shape: Sequence[Expr], rows: Expr | None = None) -> Tensor:
        name = self.name("x")
        self.spec.inputs.append(InputInfo(name, dtype, tuple(shape), rows))
        return self.gb.input(name, dtype, list(shape))

    def new_weight(self, dtype: str, shape: Sequence[int]) -> Tensor:
        name = self.name("w")
        self.spec.weights[name] = random_array(self.rng, dtype, tuple(shape))
        return self.gb.weight(name, list(shape), dtype)

    def random_dtype(self) -> str:
        return str(self.choice(("f32", "f32", "f32", "f32", "i64", "i32", "i8", "bool")))

    def start(self) -> None:
        """One input binding every symbol of the graph, then 0-2 more."""
        first = [Expr.sym(s) for s in self.symbols]
        if len(first) < 3 and self.chance(0.5):
            first.insert(int(self.rng.integers(len(first) + 1)), self.dim(zero=0))
        self.add(self.new_input(self.random_dtype(), first), True, const=False)
        for _ in range(int(self.rng.integers(0, 3))):
            self.add(self.new_input(self.random_dtype(), self.shape()), True, const=False)

    # -- primitives ------------------------------------------------------------
    def op_unary(self) -> _Node | None:
        n = self.pick(lambda n: n.t.dtype in NUMERIC)
        if n is None:
            return None
        ops = ("neg", "exp", "sqrt", "reciprocal", "sin", "cos") if n.t.dtype == "f32" else ("neg",)
        op = str(self.choice(ops))
        t = -n.t if op == "neg" else getattr(n.t, op)()
        if op in ULP_BOUND:
            node = self.add(t, False, n, inexact=True)
            if n.exact:
                self.probe(node, Check("ulp", op, (self.oracle(n),)))
            return node
        return self.add(t, n.exact, n)

    def partner(self, a: _Node) -> tuple[Tensor | float | int, _Operand]:
        """A second operand for ``a``: a scalar, a broadcast-compatible node or a new input."""
        r = self.rng.random()
        if r < 0.3:
            return self.scalar(a.t.dtype), _SCALAR

        def fits(n: _Node) -> bool:
            if n.t.dtype != a.t.dtype:
                return False
            try:
                broadcast_shapes(a.t.shape, n.t.shape)
            except ShapeError:
                return False
            return True

        b = self.pick(fits) if r < 0.75 else None
        if b is not None:
            return b.t, b
        shape = [Expr.const(1) if self.chance(0.3) else d for d in a.t.shape]
        if shape and self.chance(0.2):
            shape = shape[int(self.rng.integers(len(shape) + 1)):]
        t = self.new_input(a.t.dtype, shape)
        return t, _Node(t, True)

    def op_binary(self) -> _Node | None:
        a = self.pick(lambda n: n.t.dtype in NUMERIC)
        if a is None:
            return None
        b, bn = self.partner(a)
        ops = ["add", "sub", "mul", "le"] + (["div"] if a.t.dtype == "f32" else [])
        op = str(self.choice(ops))
        x, y = (a.t, b) if self.chance(0.6) else (b, a.t)
        fn = {"add": lambda p, q: p + q, "sub": lambda p, q: p - q,
              "mul": lambda p, q: p * q, "div": lambda p, q: p / q,
              "le": lambda p, q: p <= q}[op]
        self.spec.ops[op] += 1
        two_nans = a.t.dtype == "f32" and op in ("add", "mul")
        return self.add(fn(x, y), a.exact and bn.exact, a, bn, inexact=two_nans)

    def op_where(self) -> _Node | None:
        cond = self.pick(lambda n: n.t.dtype == "bool")
        if cond is None or self.chance(0.3):
            base = self.pick(lambda n: n.t.dtype in NUMERIC)
            if base is None:
                return None
            cond = self.add(base.t <= self.scalar(base.t.dtype), base.exact, base, _SCALAR)
        a = self.pick(lambda n: n.t.dtype in NUMERIC)
        if a is None:
            return None
        b, bn = self.partner(a)
        return self.add(where(cond.t, a.t, b), cond.exact and a.exact and bn.exact, cond, a, bn)

    def op_cast(self) -> _Node | None:
        n = self.pick(lambda n: True)
        if n is None:
            return None
        src = n.t.dtype
        dst = "f32" if src == "bf16" else str(self.choice(("f32", "i64", "i32", "i8", "bool")))
        t = n.t
        if src == "f32" and dst in F32_INT_RANGE:  # in range: clamp (NaN -> lo) first
            lo, hi = F32_INT_RANGE[dst]
            t = where(t >= lo, t, lo)
            t = where(t <= hi, t, hi)
        self.spec.ops[f"cast_{src}_{dst}"] += 1
        return self.add(self.gb.add(g.CastOp(t.value, dst)), n.exact, n)

    def op_reduce(self) -> _Node | None:
        n = self.pick(lambda n: n.t.dtype in NUMERIC and n.t.rank >= 1)
        if n is None:
            return None
        axis = int(self.rng.integers(-n.t.rank, n.t.rank))
        op = str(self.choice(("sum", "max")))
        t = n.t.sum(axis) if op == "sum" else n.t.max(axis)
        self.spec.ops[f"reduce_{op}"] += 1
        if n.t.dtype != "f32":
            return self.add(t, n.exact, n)
        node = self.add(t, False, n, inexact=True)
        if n.exact:
            if op == "sum":
                self.probe(node, Check("sum", "reduce_sum", (self.oracle(n),), axis % n.t.rank))
            else:
                self.probe(node, Check("max", "reduce_max"))
        return node

    def op_reshape(self) -> _Node | None:
        n = self.pick(lambda n: True)
        if n is None:
            return None
        shape = list(n.t.shape)
        how = str(self.choice(("merge", "split", "unit", "drop", "flatten")))
        if how == "merge" and len(shape) >= 2:
            i = int(self.rng.integers(len(shape) - 1))
            shape[i:i + 2] = [shape[i] * shape[i + 1]]
        elif how == "split" and shape:
            i = int(self.rng.integers(len(shape)))
            d = shape[i]
            splits = [(f, q) for f in (2, 3) if (q := d.exact_div(f)) is not None and d != 0]
            if splits and self.chance(0.7):
                factor, quotient = splits[0]
                shape[i:i + 1] = [Expr.const(factor), quotient]
            else:
                shape[i:i + 1] = [Expr.const(1), d] if self.chance(0.5) else [d, Expr.const(1)]
        elif how == "drop" and Expr.const(1) in shape:
            shape.remove(Expr.const(1))
        elif how == "flatten":
            total = Expr.const(1)
            for d in shape:
                total = total * d
            shape = [total]
        else:
            shape.insert(int(self.rng.integers(len(shape) + 1)), Expr.const(1))
        self.spec.ops[f"reshape_{how}"] += 1
        return self.add(n.t.reshape(*shape), n.exact, n)

    def op_permute(self) -> _Node | None:
        n = self.pick(lambda n: n.t.rank >= 2)
        if n is None:
            return None
        perm = [int(p) for p in self.rng.permutation(n.t.rank)]
        return self.add(n.t.permute(*perm), n.exact, n)

    def op_broadcast(self) -> _Node | None:
        n = self.pick(lambda n: Expr.const(1) in n.t.shape or n.t.rank < 3)
        if n is None:
            return None
        shape = [self.dim() if d == 1 and self.chance(0.8) else d for d in n.t.shape]
        if len(shape) < 3 and self.chance(0.4):
            shape.insert(0, self.dim())
        return self.add(n.t.broadcast_to(*shape), n.exact, n)

    def sub_range(self, size: Expr) -> tuple[Expr, Expr]:
        """``[start, stop)`` inside ``[0, size)`` for every binding: sub-sums of its terms."""
        start, length = Expr.const(0), Expr.const(0)
        for monomial, coeff in size.terms:
            if coeff <= 0:
                continue
            term = Expr.const(1)
            for sym, power in monomial:
                for _ in range(power):
                    term = term * Expr.sym(sym)
            s = int(self.rng.integers(0, coeff + 1))
            n = int(self.rng.integers(0, coeff - s + 1))
            start, length = start + term * s, length + term * n
        return start, start + length

    def op_slice(self) -> _Node | None:
        n = self.pick(lambda n: n.t.rank >= 1)
        if n is None:
            return None
        axis = int(self.rng.integers(n.t.rank))
        start, stop = self.sub_range(n.t.shape[axis])
        return self.add(n.t.slice(axis if self.chance(0.8) else axis - n.t.rank, start, stop),
                        n.exact, n)

    def op_concat(self) -> _Node | None:
        n = self.pick(lambda n: n.t.rank >= 1)
        if n is None:
            return None
        axis = int(self.rng.integers(n.t.rank))
        pieces: list[_Node] = [n]
        for _ in range(int(self.rng.integers(1, 3))):
            r = self.rng.random()
            if r < 0.3:
                pieces.append(n)
            elif r < 0.55:
                start, stop = self.sub_range(n.t.shape[axis])
                pieces.append(self.node(n.t.slice(axis, start, stop), n.exact, n))
            else:
                shape = list(n.t.shape)
                shape[axis] = Expr.const(0) if self.chance(0.3) else self.dim()
                pieces.append(_Node(self.new_input(n.t.dtype, shape), True))  # not const
        order = [int(i) for i in self.rng.permutation(len(pieces))]
        pieces = [pieces[i] for i in order]
        ax = axis if self.chance(0.8) else axis - n.t.rank
        return self.add(concat([p.t for p in pieces], ax), all(p.exact for p in pieces), *pieces)

    def op_update_slice(self) -> _Node | None:
        """``n`` with a block of itself (a slice along one axis) written back at the
        slice's own offset or at 0 (both fit for every binding)."""
        n = self.pick(lambda n: n.t.rank >= 1)
        if n is None:
            return None
        axis = int(self.rng.integers(n.t.rank))
        start, stop = self.sub_range(n.t.shape[axis])
        block = self.node(n.t.slice(axis, start, stop), n.exact, n)
        offsets: list[Expr] = [Expr.const(0)] * n.t.rank
        offsets[axis] = start if self.chance(0.5) else Expr.const(0)
        return self.add(update_slice(n.t, block.t, offsets), n.exact, n, block)

    def op_matmul(self) -> _Node | None:
        a = self.pick(lambda n: n.t.dtype == "f32" and n.t.rank >= 2)
        if a is None:
            return None
        rank = a.t.rank
        swap = [*range(rank - 2), rank - 1, rank - 2]
        batch, k = list(a.t.shape[:-2]), a.t.shape[-1]
        r = self.rng.random()
        if r < 0.3:
            b = self.node(a.t.permute(*swap), a.exact, a)
        elif r < 0.5 and all(d.is_const for d in (*batch, k)):
            w = self.new_weight("f32", [d.const_value for d in (*batch, k)]
                                + [int(self.choice(CONST_DIMS))])
            b = _Node(w, True)
        elif r < 0.75:
            b = _Node(self.new_input("f32", [*batch, k, self.dim()]), True)
        else:
            b = _Node(self.new_input("f32", [*batch, self.dim(), k]).permute(*swap), True)
        node = self.add(a.t @ b.t, False, a, b, inexact=True)
        if a.exact and b.exact:
            self.probe(node, Check("matmul", "matmul", (self.oracle(a), self.oracle(b))))
        return node

    def op_gather(self) -> _Node | None:
        def has_rows(n: _Node) -> bool:  # at least one row at every binding
            if n.t.rank < 1:
                return False
            rows = n.t.shape[0]
            return rows.const_value >= 1 and rows.provably_nonnegative()

        table = self.pick(has_rows) if self.chance(0.5) else None
        if table is None:
            dtype = str(self.choice(("f32", "f32", "bf16", "i8", "i32", "i64", "bool")))
            dims = [int(self.rng.integers(1, 8))] + [int(self.choice(CONST_DIMS))
                                                     for _ in range(int(self.rng.integers(0, 3)))]
            table = _Node(self.new_weight(dtype, dims), True)
        ids_dtype = str(self.choice(("i64", "i64", "i32", "i8")))
        ids_shape = self.shape(int(self.choice((0, 1, 1, 2))))
        ids = self.new_input(ids_dtype, ids_shape, rows=table.t.shape[0])
        t = gather(table.t, ids)
        self.spec.gathers.append((self.spec.inputs[-1].name, t.value))
        return self.add(t, table.exact, table, _Node(ids, True))

    def op_iota(self) -> _Node | None:
        shape = self.shape(int(self.choice((1, 2, 2, 3))))
        dtype = str(self.choice(NUMERIC))
        t = self.gb.iota(shape, int(self.rng.integers(len(shape))), dtype)
        return self.add(t, True, const=all(d.is_const for d in shape))

    def op_dim(self) -> _Node | None:
        s = [Expr.sym(x) for x in self.symbols]
        expr = self.choice(s)
        if self.chance(0.5):
            expr = expr * self.choice(s) + int(self.rng.integers(0, 4))
        d = self.gb.dim(expr)
        n = self.pick(lambda n: n.t.dtype in NUMERIC)
        if n is not None and self.chance(0.7):
            return self.add(n.t + d.cast(n.t.dtype), n.exact, n, _Node(d, True))
        return self.add(d, True, const=False)

    def op_const(self) -> _Node | None:
        dtype = self.random_dtype()
        shape = tuple(int(self.choice(CONST_DIMS[:3])) for _ in range(int(self.rng.integers(3))))
        return self.add(self.gb.const(random_array(self.rng, dtype, shape), dtype), True,
                        const=True)

    def op_weight(self) -> _Node | None:
        dtype = str(self.choice(("f32", "f32", "bf16", "i8", "i32", "i64", "bool")))
        shape = [int(self.choice(CONST_DIMS)) for _ in range(int(self.rng.integers(1, 3)))]
        return self.add(self.new_weight(dtype, shape), True, const=False)

    def op_input(self) -> _Node | None:
        return self.add(self.new_input(self.random_dtype(), self.shape()), True, const=False)

    # -- driver ---------------------------------------------------------------
    def run(self) -> GraphSpec:
        self.start()
        kinds = list(OP_WEIGHTS)
        p = np.array([OP_WEIGHTS[k] for k in kinds], float)
        target = int(self.rng.integers(3, 13))
        applied = attempts = 0
        while applied < target and attempts < 4 * target:
            attempts += 1
            kind = kinds[int(self.rng.choice(len(kinds), p=p / p.sum()))]
            try:
                node = getattr(self, f"op_{kind}")()
            except ShapeError:
                node = None  # a combination the frontend rejects: try another op
            if node is not None:
                applied += 1
                self.spec.ops[kind] += 1
        chosen = {id(self.nodes[-1].t.value): self.nodes[-1]}
        for node in self.nodes[:-1]:
            if self.chance(0.3):
                chosen.setdefault(id(node.t.value), node)
        for node in chosen.values():
            self.output(node, Check("exact" if node.exact else "approx"))
        return self.spec


def generate(gb: GraphBuilder, seed: int) -> GraphSpec:
    """Append the graph of ``seed`` to ``gb`` (its names start with ``s<seed>_``)."""
    return _Generator(gb, seed).run()


# --------------------------------------------------------------------------
# batches: several graphs in one module, and their oracle copy
# --------------------------------------------------------------------------


@dataclass
class Batch:
    """Several generated graphs as one ``graph.func`` (one library per pipeline)."""

    seeds: list[int]
    module: ModuleOp  # what gets compiled
    oracle: ModuleOp  # the same ops, plus the probes' operands as outputs (interpreter only)
    specs: list[GraphSpec]
    live_gathers: list[tuple[str, int, tuple[Expr, ...]]]  # (ids input, spec, result shape)

    @property
    def weights(self) -> dict[str, np.ndarray]:
        return {k: v for s in self.specs for k, v in s.weights.items()}

    @property
    def symbols(self) -> list[str]:
        return sorted({str(s) for spec in self.specs for i in spec.inputs
                       for d in i.shape for s in d.symbols})


def build_batch(seeds: Sequence[int], name: str = "fuzz") -> Batch:
    gb = GraphBuilder(name)
    specs = [generate(gb, seed) for seed in seeds]
    module = gb.finish_module()
    module.verify()
    func = _func(module)
    ops = list(func.body.block.ops)
    position = {op: i for i, op in enumerate(ops)}
    oracle = module.clone()
    ofunc = _func(oracle)
    oops = list(ofunc.body.block.ops)
    ret = ofunc.return_op()
    extras = [(n, oops[position[_owner(v)]].results[0]) for s in specs for n, v in s.oracle]
    outputs = list(zip(ret.names, ret.outputs, strict=True))
    new_ret = g.ReturnOp([*outputs, *extras])
    ofunc.body.block.insert_op_before(new_ret, ret)
    ret.detach()
    ret.erase()
    oracle.verify()
    live = _live_ops(func)
    gathers = [(ids, k, g.tensor_type(v).dims) for k, s in enumerate(specs) for ids, v in s.gathers
               if _owner(v) in live]
    return Batch(list(seeds), module, oracle, specs, gathers)


def _func(module: ModuleOp) -> g.GraphFuncOp:
    return next(op for op in module.ops if isinstance(op, g.GraphFuncOp))


def _owner(value: SSAValue) -> Operation:
    owner = value.owner
    assert isinstance(owner, Operation)
    return owner


def _live_ops(func: g.GraphFuncOp) -> set[Operation]:
    """Ops some output depends on."""
    live: set[Operation] = set()
    stack = [_owner(v) for v in func.return_op().outputs]
    while stack:
        op = stack.pop()
        if op in live:
            continue
        live.add(op)
        stack.extend(_owner(v) for v in op.operands)
    return live


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------


def random_f32(rng: np.random.Generator, shape: tuple[int, ...],
               specials: float = 0.05) -> np.ndarray:
    """Normals at several magnitudes; a fraction of ±0, ±inf, subnormals and NaNs
    (random payloads and signs)."""
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-1, 2, shape)).astype(np.float32)
    if not x.size or not specials:
        return x
    pick = rng.random(shape)
    payload = rng.integers(1, 1 << 22, shape, dtype=np.uint32)
    sign = rng.integers(0, 2, shape, dtype=np.uint32) << np.uint32(31)
    nan = (sign | np.uint32(0x7FC00000) | payload).view(np.float32)
    table = np.array([0.0, -0.0, np.inf, -np.inf, 1e-40, -3e-39, 1.0, -1.0], np.float32)
    special = table[rng.integers(0, len(table), shape)]
    x = np.where(pick < specials * 0.3, nan, x)
    return np.where((pick >= specials * 0.3) & (pick < specials), special, x).astype(np.float32)


def random_array(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random values of ``dtype`` (an ndarray also for shape ``()``)."""
    return np.asarray(_random_values(rng, dtype, shape), dtype=numpy_dtype(dtype))


def _random_values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> object:
    if dtype == "f32":
        return random_f32(rng, shape)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "bf16":
        return rng.integers(0, 1 << 16, shape, dtype=np.uint16)
    dt = numpy_dtype(dtype)
    info = np.iinfo(dt)
    small = rng.integers(-100, 101, shape).astype(dt)
    wide = rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    edges = np.array([info.min, info.max, -1, 0, 1], dt)[rng.integers(0, 5, shape)]
    pick = rng.random(shape)
    return np.where(pick < 0.7, small, np.where(pick < 0.85, wide, edges)).astype(dt)


def make_inputs(batch: Batch, bindings: Mapping[str, int],
                rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for spec in batch.specs:
        for info in spec.inputs:
            shape = tuple(d.evaluate(bindings) for d in info.shape)
            if info.rows is None:
                out[info.name] = random_array(rng, info.dtype, shape)
            else:
                rows = info.rows.evaluate(bindings)
                out[info.name] = np.asarray(rng.integers(0, rows, shape),
                                            dtype=numpy_dtype(info.dtype))
    return out


def binding_sets(symbols: Sequence[str], rng: np.random.Generator,
                 count: int = 4) -> list[dict[str, int]]:
    """All ones, then 0-2 each, then larger random values (0 and 1 always appear)."""
    sets = [dict.fromkeys(symbols, 1)]
    if count > 1:
        zeros = {s: int(rng.integers(0, 3)) for s in symbols}
        if symbols:
            zeros[symbols[int(rng.integers(len(symbols)))]] = 0
        sets.append(zeros)
    while len(sets) < count:
        sets.append({s: int(rng.integers(0, 8)) for s in symbols})
    return sets


# --------------------------------------------------------------------------
# comparisons
# --------------------------------------------------------------------------


def bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32) if x.dtype == np.float32 else x


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(bits(a), bits(b))


def nan_equivalent(got: np.ndarray, want: np.ndarray) -> bool:
    """Bitwise (-0.0 included), except that any NaN equals any NaN."""
    if got.dtype != np.float32:
        return np.array_equal(got, want)
    both = np.isnan(got) & np.isnan(want)
    return np.array_equal(np.where(both, 0, bits(got)), np.where(both, 0, bits(want)))


def nan_sign_only(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` and ``b`` differ only in the sign bit of NaNs that are NaN in both."""
    if a.dtype != np.float32:
        return False
    both = np.isnan(a) & np.isnan(b)
    mask = np.uint32(0x7FFFFFFF)
    return np.array_equal(np.where(both, bits(a) & mask, bits(a)),
                          np.where(both, bits(b) & mask, bits(b)))


def two_nan_payload(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` and ``b`` differ only where both are NaN, and there in the payload (not
    only in the sign): what a two-NaN add or mul may do (README: "where both
    operands of an add or mul are NaN, which operand's payload comes out is x86's
    choice of operand order"). A NaN whose sign alone flipped is not this."""
    if a.dtype != np.float32 or not nan_equivalent(a, b):
        return False
    differ = bits(a) != bits(b)
    mask = np.uint32(0x7FFFFFFF)
    return bool(np.all((bits(a)[differ] & mask) != (bits(b)[differ] & mask)))


def _ordered(x: np.ndarray) -> np.ndarray:
    i = x.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def _first_bad(bad: np.ndarray, got: np.ndarray, want: np.ndarray) -> str:
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())} of {bad.size} elements; first at {idx}: got {got[idx]!r}, "
            f"want {want[idx]!r}")


def check_ulp(op: str, got: np.ndarray, want: np.ndarray, x: np.ndarray) -> str | None:
    lo, hi = ULP_RANGE[op]
    inside = np.isfinite(x) & (x >= lo) & (x <= hi)
    ulps = np.abs(_ordered(got) - _ordered(want))
    bad = inside & ~((ulps <= ULP_BOUND[op]) & np.isfinite(got))
    # outside the range: NaN where NaN, the same infinities, else finite
    outside = ~inside
    same_class = (np.isnan(got) == np.isnan(want)) & (np.isinf(got) == np.isinf(want))
    infs = np.isinf(want)
    same_class &= ~infs | (got == want)
    if op == "exp":  # below the range: underflow to [0, 2**-125] in both
        tiny = np.isfinite(x) & (x < lo)
        same_class &= ~tiny | ((got >= 0) & (got <= 2.0**-125) & (want >= 0))
    bad |= outside & ~same_class
    return _first_bad(bad, got, want) if bad.any() else None


def check_sum(got: np.ndarray, want: np.ndarray, x: np.ndarray, axis: int) -> str | None:
    x64 = x.astype(np.float64)
    n = x.shape[axis]
    finite = np.all(np.isfinite(x), axis=axis, keepdims=True)
    mag = np.sum(np.where(np.isfinite(x64), np.abs(x64), 0.0), axis=axis, keepdims=True)
    sane = mag <= F32_MAX / 4  # no partial sum can overflow in either order
    bound = 2.0 * n * F32_U * mag
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bad = finite & sane & ~(np.isfinite(got) & (diff <= bound))
    # a row with inf/NaN: +inf alone gives +inf in any order, NaN or ±inf give NaN
    bad |= ~finite & sane & ~((np.isnan(got) & np.isnan(want)) | (got == want))
    return _first_bad(bad, got, want) if bad.any() else None


def check_matmul(got: np.ndarray, want: np.ndarray, a: np.ndarray, b: np.ndarray) -> str | None:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    finite = (np.all(np.isfinite(a), axis=-1)[..., :, None]
              & np.all(np.isfinite(b), axis=-2)[..., None, :])
    mag = np.matmul(np.where(np.isfinite(a64), np.abs(a64), 0.0),
                    np.where(np.isfinite(b64), np.abs(b64), 0.0))
    bound = 2.0 * a.shape[-1] * F32_U * mag
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bad = finite & (mag <= F32_MAX / 4) & ~(np.isfinite(got) & (diff <= bound))
    return _first_bad(bad, got, want) if bad.any() else None


def check_output(check: Check, got: np.ndarray, want: np.ndarray,
                 oracle: Mapping[str, np.ndarray]) -> str | None:
    """None if ``got`` (compiled) agrees with ``want`` (interpreter) as ``check`` claims."""
    with np.errstate(invalid="ignore", over="ignore"):
        return _check_output(check, got, want, oracle)


def _check_output(check: Check, got: np.ndarray, want: np.ndarray,
                  oracle: Mapping[str, np.ndarray]) -> str | None:
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"dtype/shape {got.dtype}{got.shape} != {want.dtype}{want.shape}"
    if check.kind == "exact":
        if nan_equivalent(got, want):
            return None
        return _first_bad(~((bits(got) == bits(want)) | (np.isnan(got) & np.isnan(want))
                            if got.dtype == np.float32 else got == want), got, want)
    if check.kind == "approx":
        return None
    if check.kind == "ulp":
        return check_ulp(check.op, got, want, oracle[check.operands[0]])
    if check.kind == "sum":
        return check_sum(got, want, oracle[check.operands[0]], check.axis)
    if check.kind == "matmul":
        return check_matmul(got, want, oracle[check.operands[0]], oracle[check.operands[1]])
    if check.kind == "max":
        ok = np.array_equal(got, want, equal_nan=True)
        return None if ok else _first_bad(~((got == want) | (np.isnan(got) & np.isnan(want))),
                                          got, want)
    raise ValueError(f"unknown check kind {check.kind!r}")


# --------------------------------------------------------------------------
# one batch against the interpreter
# --------------------------------------------------------------------------


# Bugs found (all fixed), by the finding kind they produced: the test that pins each.
REGRESSION_TESTS = {
    "fused-nan-sign": "test/py/targets/test_primitives_c.py::test_fused_negation_keeps_nan_sign",
    "fold-inexact":
        "test/py/testing/test_fuzz.py::test_fold_constants_inexact_primitives_match_unfused",
    "fuse-erased-value":
        "test/py/testing/test_fuzz.py::test_fuse_index_output_read_by_another_region",
    "id-unchecked": "test/py/testing/test_fuzz.py::test_gather_checks_ids_when_rows_are_empty",
}


@dataclass
class Finding:
    """One disagreement or failure, with what it takes to reproduce it."""

    kind: str  # mismatch | fused-unfused | optimized | error | guard | compile | ...
    seed: int | None  # the graph's seed (None: the batch as a whole)
    output: str
    bindings: dict[str, int]
    message: str

    def __str__(self) -> str:
        return (f"[{self.kind}] graph seed {self.seed} output {self.output or '-'} at "
                f"{self.bindings}: {self.message}")


@dataclass
class BatchReport:
    graphs: int = 0
    runs: int = 0
    outputs: collections.Counter[str] = field(default_factory=collections.Counter)
    ops: collections.Counter[str] = field(default_factory=collections.Counter)
    errors_agreed: int = 0
    findings: list[Finding] = field(default_factory=list)
    # differences the project states as allowed (not findings), by kind: outputs
    two_nan_payloads: collections.Counter[str] = field(default_factory=collections.Counter)

    def merge(self, other: BatchReport) -> None:
        self.graphs += other.graphs
        self.runs += other.runs
        self.outputs.update(other.outputs)
        self.ops.update(other.ops)
        self.errors_agreed += other.errors_agreed
        self.findings += other.findings
        self.two_nan_payloads.update(other.two_nan_payloads)


def _seed_of(batch: Batch, output: str) -> int | None:
    for spec in batch.specs:
        if output.startswith(f"s{spec.seed}_"):
            return spec.seed
    return None


class PipelineOptions(TypedDict, total=False):
    """The keyword arguments of ``compile_program`` that select a pipeline."""

    fuse: bool
    schedule: bool


PIPELINES: dict[str, PipelineOptions] = {"unfused": {"fuse": False}, "fused": {"fuse": True},
                                         "scheduled": {"fuse": True, "schedule": True}}


def compile_programs(module: ModuleOp, weights: Mapping[str, np.ndarray], *,
                     sanitize: bool | None = None) -> dict[str, CompiledProgram]:
    """The program of every pipeline: ``compile_program`` unfused (phase 2), fused
    (phase 3) and fused + the default schedules (phase 4, what the API runs)."""
    from nanocompile.compiler import compile_program

    return {name: compile_program(module, weights, sanitize=sanitize, **options)
            for name, options in PIPELINES.items()}


def _compile_failure(seed: int | None, error: Exception) -> Finding:
    text = f"{type(error).__name__}: {error}"
    kind = "fuse-erased-value" if "Erased SSA value is used" in text else "compile"
    return Finding(kind, seed, "", {}, text[:2000])


def fuzz_graphs(seeds: Sequence[int], *, data_seed: int, bindings_count: int = 4,
                sanitize: bool | None = None) -> BatchReport:
    """Generate the graphs of ``seeds``, compile them as one batch (every pipeline)
    and `check_batch` them. A graph the compiler fails on is reported and left out
    (found by compiling the graphs one by one), so one bug does not hide the rest."""
    report = BatchReport(graphs=len(seeds))
    keep = list(seeds)
    for attempt in range(2):
        batch = build_batch(keep)
        try:
            programs = compile_programs(batch.module, batch.weights, sanitize=sanitize)
            break
        except Exception as e:  # a compiler bug: find the graphs that trigger it
            if attempt:
                report.findings.append(_compile_failure(None, e))
                return report
            survivors = []
            for seed in keep:
                single = build_batch([seed])
                try:
                    optimize_graph(single.module)
                    compile_programs(single.module, single.weights, sanitize=sanitize)
                except Exception as e1:
                    report.findings.append(_compile_failure(seed, e1))
                else:
                    survivors.append(seed)
            if len(survivors) == len(keep):  # only the batch as a whole fails
                report.findings.append(_compile_failure(None, e))
                return report
            keep = survivors
            if not keep:
                return report
    for spec in batch.specs:
        report.ops.update(spec.ops)
    result = check_batch(batch, programs, data_seed=data_seed, bindings_count=bindings_count)
    result.graphs = 0
    report.merge(result)
    return report


def check_batch(batch: Batch, programs: Mapping[str, CompiledProgram], *,
                data_seed: int, bindings_count: int = 4) -> BatchReport:
    """Run ``programs`` (``{"unfused": ..., "fused": ..., "scheduled": ...}``) of
    ``batch`` at several bindings in guarded arenas and compare as the module
    docstring says."""
    report = BatchReport(graphs=len(batch.specs))
    rng = np.random.default_rng([0xDA7A, data_seed])
    guarded = {k: GuardedArena(p, seed=data_seed) for k, p in programs.items()}
    optimized = optimize_graph(batch.module)
    checks = {n: c for spec in batch.specs for n, c in spec.outputs.items()}
    folded = {n for spec in batch.specs for n in spec.folded}
    for bindings in binding_sets(batch.symbols, rng, bindings_count):
        inputs = make_inputs(batch, bindings, rng)
        report.runs += 1
        report.findings += _compare_run(batch, guarded, optimized, checks, folded, inputs,
                                        bindings, report)
        error = _error_run(batch, guarded, inputs, bindings, rng)
        if isinstance(error, Finding):
            report.findings.append(error)
        elif error:
            report.errors_agreed += 1
    return report


def _run_all(guarded: Mapping[str, GuardedArena], inputs: Mapping[str, np.ndarray]
             ) -> Iterator[tuple[str, dict[str, np.ndarray] | Exception]]:
    for pipeline, program in guarded.items():
        try:
            yield pipeline, program.run(inputs)
        except (KernelError, ArgumentError, ArenaGuardError) as e:
            yield pipeline, e


def _compare_run(batch: Batch, guarded: Mapping[str, GuardedArena], optimized: ModuleOp,
                 checks: Mapping[str, Check], folded: set[str],
                 inputs: Mapping[str, np.ndarray], bindings: dict[str, int],
                 report: BatchReport) -> list[Finding]:
    weights = batch.weights
    want_error: Exception | None = None
    try:
        want = run_graph(batch.oracle, inputs, weights)
    except InterpreterError as e:
        want_error, want = e, {}
    runs = dict(_run_all(guarded, inputs))
    out = _failures(runs, want_error, bindings)
    results = {name: r for name, r in runs.items() if isinstance(r, dict)}
    if want_error is not None or len(results) != len(runs):
        return out
    opt = run_graph(optimized, inputs, weights)
    for name in opt:
        if not same_bits(opt[name], want[name]):
            out.append(Finding("optimized", _seed_of(batch, name), name, bindings,
                               "the optimized graph interprets differently"))
    for name, check in checks.items():
        report.outputs[check.kind] += 1
        seed = _seed_of(batch, name)
        for a, b in PIPELINE_PAIRS:
            if a in results and not same_bits(results[a][name], results[b][name]):
                x, y = results[a][name], results[b][name]
                if two_nan_payload(x, y):  # the stated limit: counted, not a finding
                    report.two_nan_payloads[f"{a} vs {b}"] += 1
                    continue
                out.append(Finding(_difference_kind(a, name, folded, x, y), seed, name,
                                   bindings, f"{a} != {b} bitwise: "
                                   + _first_bad(bits(x) != bits(y), x, y)))
        for pipeline, got in results.items():
            message = check_output(check, got[name], want[name], want)
            if message is not None:
                out.append(Finding("mismatch", seed, name, bindings,
                                   f"{pipeline} vs interpreter ({check.kind}): {message}"))
    return out


# Pipelines that must agree bit for bit: fusion, and the schedules on top of it.
PIPELINE_PAIRS = (("fused", "unfused"), ("scheduled", "fused"))


def _difference_kind(pipeline: str, name: str, folded: set[str], x: np.ndarray,
                     y: np.ndarray) -> str:
    if name in folded and pipeline == "fused":
        return "fold-inexact"
    if nan_sign_only(x, y):
        return f"{pipeline}-nan-sign"
    return f"{pipeline}-{'unfused' if pipeline == 'fused' else 'fused'}"


def _failures(runs: Mapping[str, dict[str, np.ndarray] | Exception],
              want_error: Exception | None, bindings: dict[str, int]) -> list[Finding]:
    """Guard violations, and errors raised on one side only."""
    out = []
    for pipeline, got in runs.items():
        if isinstance(got, ArenaGuardError):
            out.append(Finding("guard", None, "", bindings, f"{pipeline}: {got}"))
        elif isinstance(got, Exception) and want_error is None:
            out.append(Finding("error", None, "", bindings,
                               f"{pipeline} raised {type(got).__name__}: {got}; "
                               "the interpreter ran"))
        elif not isinstance(got, Exception) and want_error is not None:
            out.append(Finding("error", None, "", bindings,
                               f"the interpreter raised {want_error}; {pipeline} ran"))
    return out


def _error_run(batch: Batch, guarded: Mapping[str, GuardedArena],
               inputs: Mapping[str, np.ndarray], bindings: dict[str, int],
               rng: np.random.Generator) -> Finding | bool:
    """Put one out-of-range id into a used gather with a non-empty result: the
    interpreter and both programs must raise. False: no such gather."""
    usable = [(ids, k) for ids, k, dims in batch.live_gathers
              if inputs[ids].size and all(d.evaluate(bindings) for d in dims)]
    if not usable:
        return False
    ids, k = usable[int(rng.integers(len(usable)))]
    info = next(i for i in batch.specs[k].inputs if i.name == ids)
    assert info.rows is not None
    rows = info.rows.evaluate(bindings)
    dt = numpy_dtype(info.dtype)
    bad_values = [-1, rows, int(np.iinfo(dt).max), int(np.iinfo(dt).min)]
    bad = bad_values[int(rng.integers(len(bad_values)))]
    arr = inputs[ids].copy()
    arr.reshape(-1)[int(rng.integers(arr.size))] = bad
    corrupted = {**inputs, ids: arr}
    seed = batch.specs[k].seed
    try:
        run_graph(batch.oracle, corrupted, batch.weights)
    except InterpreterError:
        pass
    else:
        return Finding("error", seed, ids, bindings, f"the interpreter accepted id {bad}")
    for pipeline, got in _run_all(guarded, corrupted):
        if not isinstance(got, KernelError):
            what = f"{type(got).__name__}: {got}" if isinstance(got, Exception) else "ran"
            return Finding("id-unchecked", seed, ids, bindings,
                           f"{pipeline} did not raise KernelError for id {bad} ({what})")
    return True

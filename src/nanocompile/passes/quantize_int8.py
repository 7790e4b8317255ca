"""``quantize-int8``: spec §5's int8 weights (nanoinfer's kernel A, W8A32, and
kernel B, W8A8).

Each projection ``graph.matmul(x, permute[1, 0](W))``, where ``W`` is a
``graph.weight "name"`` f32 ``[N, K]`` (or a bf16 weight and its ``graph.cast``
to f32), becomes kernel A: int8 values, f32 activations, the sum in kernel A's
order, then one multiply by the row's scale::

    %q  = graph.weight "name.int8"  : !graph.tensor<[N, K], i8>
    %s  = graph.weight "name.scale" : !graph.tensor<[N], f32>
    %qf = graph.cast %q                                        (exact: f32(q))
    %qt = graph.permute %qf perm = [1, 0]
    %d  = graph.matmul %x, %qt order = "blocks32"              (kernel A's sum)
    %sr = graph.reshape %s -> [1, N];  %sb = graph.broadcast %sr -> [.., N]
    %y  = graph.mul %d, %sb                                    (y = dot * scale[n])

Whatever consumed the matmul (a bias add, a residual add, the graph's output)
consumes ``%y``: a bias is added after the scaled product, as in spec §5. The
values of ``name.int8`` and ``name.scale`` are ``checkpoint.int8.quantize_rows``
of ``W``'s f32 values; :func:`int8_sources` tells the loader which weight each
comes from.

The *embedding* weights are those read by a ``graph.gather`` (the token
embedding) and those whose projection is a graph output (the LM head): with
tied embeddings, Qwen2's ``model.embed_tokens.weight`` is both. Option
``embedding=int8`` (the default, as nanoinfer) quantizes them too, one int8
copy serving both uses; the lookup ``gather(W, ids)`` becomes ``f32(q[id]) *
scale[id]`` (one rounding)::

    %g  = graph.gather %qf, %ids
    %sv = graph.reshape %s -> [V, 1];  %sg = graph.gather %sv, %ids
    %y  = graph.mul %g, graph.broadcast(%sg)

``embedding=f32`` leaves every embedding weight, both uses, as it is.

Option ``kernel=b`` (spec §5 kernel B, W8A8 with integer dot products) rewrites
the projections that are not the LM head into kernel B instead; the embedding
(with ``embedding=int8``) is as above, its LM head kernel A, so the LM head
keeps f32 activations. Option ``head=b`` (with ``kernel=b`` and
``embedding=int8`` only: spec §5's switch) makes the LM head kernel B too, its
activations (the final norm's output) quantized like any other; the lookup
stays ``f32(q[id]) * scale[id]``. Each activation ``x`` f32 ``[M, K]`` read by kernel-B
projections is quantized once, right after it is computed (q, k and v share
one; ``nb = ceil(K / 32)``, ``Kp = 32 nb``)::

    %xp  = graph.concat %x, broadcast(const 0.0 [1, Kp - K])    (only if K mod 32 != 0)
    %xb  = graph.reshape %xp -> [M, nb, 32]                     (block b: xb[:, b])
    %ax  = graph.where(less_equal(%xb, neg %xb), neg %xb, %xb)  (|x|)
    %mx  = graph.reduce_max %ax axis = 2                        ([M, nb, 1])
    %xs3 = graph.where(less_equal(%mx, 0.0), 1.0, %mx / 127.0)  (xs_b)
    %r   = graph.round(%xb / broadcast(%xs3))                   (roundf: halves away)
    %c   = clamp of %r to [-127, 127] (two where / less_equal)
    %xq3 = graph.cast %c -> i8;  %xq = reshape -> [M, Kp] (and slice [0, K))
    %xs  = graph.reshape %xs3 -> [M, nb]
    %bs  = graph.reduce_sum(cast %xq3 -> i32) axis = 2          (sum of xq per block)
    %tm  = graph.mul(cast %bs -> f32, %xs3)  -> reshape [M, nb]
    %off = graph.reduce_sum %tm axis = 1, order = "sequential"  (block order, from +0.0)
    %o   = graph.mul %off, broadcast(128.0)                     (offset = 128 * off)

The zero columns of the padded tail change neither its scale (a max of ``|x|``)
nor any sum, so the tail block's scale is over its own columns, as spec §5 has
it; its term enters ``off`` last. Each projection then is::

    %qt = graph.permute %q perm = [1, 0]                        (i8 [K, N], a view)
    %t  = graph.matmul_i8 %xq, %xs, %qt                         (kernel B's total)
    %d  = graph.sub %t, broadcast(%o)
    %y  = graph.mul %d, broadcast(reshape(%s, [1, N]))          (y = (total - offset) * scale[n])

Untouched: a matmul whose right operand is not a transposed weight
(attention's two), a matmul that already states an order, and every weight
with a use other than a projection or a lookup (norms, biases; a projection
weight read some other way too keeps all its uses). Run it on the graph as
the frontend builds it, before ``fuse`` (the compiler does:
``CompileOptions.quantize``).

    nc-opt -p 'quantize-int8{embedding=f32}' model.mlir
    nc-opt -p 'quantize-int8{kernel=b}' model.mlir
    nc-opt -p 'quantize-int8{kernel=b head=b}' model.mlir
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nanocompile.dialects import graph as g
from nanocompile.ir.shapes import I8_BLOCK, i8_blocks
from nanocompile.ir.symbolic import Expr

KERNELS = ("a", "b")
"""spec §5's kernels this pass can target: ``a`` (W8A32), ``b`` (W8A8)."""
HEADS = KERNELS  # the LM head's kernel: ``b`` only with kernel b and the int8 embedding

EMBEDDINGS = ("int8", "f32")
ORDER = "blocks32"  # kernel A's order of the sum over k (graph.MATMUL_ORDERS)
OFFSET_ORDER = "sequential"  # kernel B's offset: its blocks in order (graph.REDUCE_ORDERS)
INT8_SUFFIX, SCALE_SUFFIX = ".int8", ".scale"
A_MAX = 127.0  # |xq| <= 127
U8_BIAS = 128.0  # kernel B's weights enter the integer sums as w + 128


@dataclass
class _Plan:
    """One weight to quantize and its uses."""

    weight: g.WeightOp
    casts: list[g.CastOp] = field(default_factory=list)  # bf16 -> f32 (none for an f32 weight)
    projections: list[tuple[g.PermuteOp, g.MatmulOp]] = field(default_factory=list)
    gathers: list[g.GatherOp] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.weight.weight_name.data

    @property
    def shape(self) -> tuple[int, int]:
        n, k = (d.const_value for d in self.weight.result.type.dims)
        return n, k


def _f32_values(weight: g.WeightOp) -> tuple[list[SSAValue], list[g.CastOp]] | None:
    """The f32 values of a rank-2 weight (itself, or its casts when bf16), or None."""
    spec = weight.result.type.spec
    if len(spec.shape) != 2:
        return None
    if spec.dtype == "f32":
        return [weight.result], []
    if spec.dtype != "bf16":
        return None
    casts = [u.operation for u in weight.result.uses]
    widening = [c for c in casts if isinstance(c, g.CastOp) and c.result.type.dtype.data == "f32"]
    if not casts or len(widening) != len(casts):
        return None
    return [c.result for c in widening], widening


def _is_projection(permute: Operation) -> bool:
    """A ``permute[1, 0]`` read only as the right operand of matmuls stating no order."""
    if not isinstance(permute, g.PermuteOp) or permute.permutation != (1, 0):
        return False
    uses = list(permute.result.uses)
    return bool(uses) and all(isinstance(u.operation, g.MatmulOp) and u.index == 1
                              and u.operation.order_name is None for u in uses)


def _plan(weight: g.WeightOp) -> _Plan | None:
    """How ``weight`` is quantized, or None when it stays as it is."""
    found = _f32_values(weight)
    if found is None:
        return None
    values, casts = found
    plan = _Plan(weight, casts)
    for value in values:
        for use in value.uses:
            user = use.operation
            if isinstance(user, g.GatherOp) and use.index == 0:
                plan.gathers.append(user)
            elif _is_projection(user):
                assert isinstance(user, g.PermuteOp)  # _is_projection checked it
                plan.projections += [(user, u.operation) for u in user.result.uses
                                     if isinstance(u.operation, g.MatmulOp)]
            else:
                return None  # read some other way: every use stays f32
    return plan if plan.projections or plan.gathers else None


def _is_embedding(plan: _Plan) -> bool:
    """A lookup table, or a projection that is a graph output (the LM head)."""
    return bool(plan.gathers) or any(
        isinstance(u.operation, g.ReturnOp) for _, m in plan.projections for u in m.result.uses)


def _replace(old: Operation, new: list[Operation]) -> None:
    """Put ``new`` before ``old``; the last one's result takes ``old``'s uses and name."""
    block = old.parent_block()
    assert block is not None  # an op of the graph.func's block
    block.insert_ops_before(new, old)
    result = new[-1].results[0]
    result.name_hint = old.results[0].name_hint
    old.results[0].replace_all_uses_with(result)
    block.erase_op(old)


@dataclass(frozen=True)
class _Activations:
    """An activation quantized for kernel B: ``xq`` i8 ``[M, K]``, ``xs`` f32
    ``[M, ceil(K / 32)]`` (its block scales) and ``offset`` f32 ``[M, 1]``
    (``128 * off``)."""

    xq: SSAValue
    xs: SSAValue
    offset: SSAValue


class _Ops:
    """New ops in order; ``add`` returns an op's result."""

    def __init__(self) -> None:
        self.ops: list[Operation] = []

    def add(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def const(self, value: float, shape: list[Expr]) -> SSAValue:
        """A one-element f32 const ``value`` broadcast to ``shape``."""
        one = self.add(g.ConstOp(np.full([1] * len(shape), value, np.float32), "f32"))
        return self.add(g.BroadcastOp(one, shape))


def _quantize_activations(x: SSAValue) -> tuple[list[Operation], _Activations]:
    """Kernel B's quantization of ``x`` f32 ``[M, K]`` (see the module docstring)."""
    m, k_dim = g.tensor_type(x).dims
    k = k_dim.const_value
    blocks = i8_blocks(k)
    padded = blocks * I8_BLOCK
    b = _Ops()
    xp = x
    if padded != k:
        zeros = b.const(0.0, [m, Expr.const(padded - k)])
        xp = b.add(g.ConcatOp([x, zeros], 1))
    xb = b.add(g.ReshapeOp(xp, [m, blocks, I8_BLOCK]))
    neg = b.add(g.NegOp(xb))
    # |x| = where(x <= -x, -x, x) (for x = +0 it is -0: only compared with 0 below)
    absolute = b.add(g.WhereOp(b.add(g.LessEqualOp(xb, neg)), neg, xb))
    peak = b.add(g.ReduceMaxOp(absolute, 2))  # [M, nb, 1]
    column = [m, Expr.const(blocks), Expr.const(1)]
    zero_block = b.add(g.LessEqualOp(peak, b.const(0.0, column)))  # all zero: xs = 1.0
    xs3 = b.add(g.WhereOp(zero_block, b.const(1.0, column),
                          b.add(g.DivOp(peak, b.const(A_MAX, column)))))
    wide = [m, Expr.const(blocks), Expr.const(I8_BLOCK)]
    rounded = b.add(g.RoundOp(b.add(g.DivOp(xb, b.add(g.BroadcastOp(xs3, wide))))))
    high, low = b.const(A_MAX, wide), b.const(-A_MAX, wide)
    clamped = b.add(g.WhereOp(b.add(g.LessEqualOp(rounded, high)), rounded, high))
    clamped = b.add(g.WhereOp(b.add(g.LessEqualOp(low, clamped)), clamped, low))
    xq3 = b.add(g.CastOp(clamped, "i8"))
    xq = b.add(g.ReshapeOp(xq3, [m, padded]))
    if padded != k:
        xq = b.add(g.SliceOp(xq, 1, 0, k))
    xs = b.add(g.ReshapeOp(xs3, [m, blocks]))
    sums = b.add(g.ReduceSumOp(b.add(g.CastOp(xq3, "i32")), 2))  # exact: |sum| <= 4064
    terms = b.add(g.MulOp(b.add(g.CastOp(sums, "f32")), xs3))
    off = b.add(g.ReduceSumOp(b.add(g.ReshapeOp(terms, [m, blocks])), 1, order=OFFSET_ORDER))
    offset = b.add(g.MulOp(off, b.const(U8_BIAS, [m, Expr.const(1)])))
    base = x.name_hint or "x"
    for value, suffix in ((xq, "q"), (xs, "xs"), (offset, "offset")):
        value.name_hint = f"{base}_{suffix}"
    return b.ops, _Activations(xq, xs, offset)


class _ActivationCache:
    """Each activation quantized once, its ops right after the op computing it."""

    def __init__(self) -> None:
        self._done: dict[SSAValue, _Activations] = {}

    def get(self, x: SSAValue) -> _Activations:
        if x not in self._done:
            ops, quantized = _quantize_activations(x)
            owner = x.owner
            assert isinstance(owner, Operation)  # a graph.func's values are op results
            block = owner.parent_block()
            assert block is not None
            block.insert_ops_after(ops, owner)
            self._done[x] = quantized
        return self._done[x]


def _kernel_a(matmul: g.MatmulOp, qf: SSAValue, scale: SSAValue) -> list[Operation]:
    """``mul(matmul(x, permute(f32(q)), order="blocks32"), broadcast(scale))``."""
    n = g.tensor_type(scale).dims[0]
    qt = g.PermuteOp(qf, [1, 0])
    dot = g.MatmulOp(matmul.lhs, qt.results[0], order=ORDER)
    row = g.ReshapeOp(scale, [1, n])
    wide = g.BroadcastOp(row.results[0], matmul.result.type.dims)
    return [qt, dot, row, wide, g.MulOp(dot.results[0], wide.results[0])]


def _kernel_b(matmul: g.MatmulOp, q: SSAValue, scale: SSAValue,
              x: _Activations) -> list[Operation]:
    """``(matmul_i8(xq, xs, permute(q)) - broadcast(offset)) * broadcast(scale)``."""
    n = g.tensor_type(scale).dims[0]
    dims = matmul.result.type.dims
    b = _Ops()
    total = b.add(g.MatmulI8Op(x.xq, x.xs, b.add(g.PermuteOp(q, [1, 0]))))
    diff = b.add(g.SubOp(total, b.add(g.BroadcastOp(x.offset, dims))))
    row = b.add(g.BroadcastOp(b.add(g.ReshapeOp(scale, [1, n])), dims))
    b.add(g.MulOp(diff, row))
    return b.ops


def _quantize(plan: _Plan, kernel_b: _ActivationCache | None = None) -> None:
    """Rewrite ``plan``'s weight and its uses (see the module docstring): its
    projections into kernel B when ``kernel_b`` (the activations quantized so
    far) is given, else into kernel A."""
    n, k = plan.shape
    block = plan.weight.parent_block()
    assert block is not None
    q = g.WeightOp(plan.name + INT8_SUFFIX, [n, k], "i8")
    scale = g.WeightOp(plan.name + SCALE_SUFFIX, [n], "f32")
    block.insert_ops_before([q, scale], plan.weight)
    qf: SSAValue | None = None
    if kernel_b is None or plan.gathers:  # kernel A and the lookup read f32(q)
        cast = g.CastOp(q.result, "f32")
        block.insert_ops_before([cast], plan.weight)
        qf = cast.results[0]
    for permute, matmul in plan.projections:
        if kernel_b is None:
            assert qf is not None
            _replace(matmul, _kernel_a(matmul, qf, scale.result))
        else:
            activations = kernel_b.get(matmul.lhs)
            _replace(matmul, _kernel_b(matmul, q.result, scale.result, activations))
        if not permute.result.uses:
            block.erase_op(permute)
    for gather in plan.gathers:
        assert qf is not None
        rows = g.GatherOp(qf, gather.ids)
        column = g.ReshapeOp(scale.result, [n, 1])
        picked = g.GatherOp(column.results[0], gather.ids)
        wide = g.BroadcastOp(picked.results[0], gather.result.type.dims)
        _replace(gather, [rows, column, picked, wide, g.MulOp(rows.results[0], wide.results[0])])
    for cast in plan.casts:
        block.erase_op(cast)
    block.erase_op(plan.weight)


def check_options(kernel: str, embedding: bool, head: str) -> None:
    """A ValueError unless ``kernel``, ``embedding`` and ``head`` go together."""
    if kernel not in KERNELS:
        raise ValueError(f"quantize-int8: expected kernel {' or '.join(KERNELS)}, "
                         f"got {kernel!r}")
    if head not in HEADS:
        raise ValueError(f"quantize-int8: expected head {' or '.join(HEADS)}, got {head!r}")
    if head == "b" and (kernel != "b" or not embedding):
        raise ValueError("quantize-int8: head=b (the LM head kernel B) needs kernel=b and "
                         "embedding=int8")


def quantize_func(func: g.GraphFuncOp, embedding: bool = True, kernel: str = "a",
                  head: str = "a") -> list[str]:
    """Quantize ``func``'s projections (and with ``embedding`` its embedding
    weights) in place, the projections other than the embedding's into spec §5's
    ``kernel`` (``"a"`` or ``"b"``), the embedding's LM head into ``head``
    (kernel A unless ``"b"``, which needs kernel ``"b"`` and ``embedding``);
    the names of the weights quantized, in graph order."""
    check_options(kernel, embedding, head)
    taken = {w.weight_name.data for w in func.weights()}
    plans = [p for w in func.weights() if (p := _plan(w)) is not None
             and (embedding or not _is_embedding(p))]
    for plan in plans:
        for suffix in (INT8_SUFFIX, SCALE_SUFFIX):
            if plan.name + suffix in taken:
                raise PassFailedException(f"quantize-int8: weight '{plan.name}' cannot be "
                                          f"quantized: the graph already has a weight "
                                          f"'{plan.name + suffix}'")
    activations = _ActivationCache()
    for plan in plans:
        kernel_b = kernel == "b" and (head == "b" or not _is_embedding(plan))
        _quantize(plan, activations if kernel_b else None)
    return [p.name for p in plans]


def int8_sources(module: ModuleOp | g.GraphFuncOp) -> dict[str, tuple[str, str]]:
    """The weights ``quantize-int8`` made in ``module``: each one's name -> (the
    weight it is computed from, ``"int8"`` or ``"scale"``), i.e. ``"W.int8"`` ->
    ``("W", "int8")`` (``quantize_rows(W)[0]``), ``"W.scale"`` -> ``("W",
    "scale")`` (``[1]``). A weight is listed when its pair is there too: an i8
    ``[N, K]`` named ``W.int8`` and an f32 ``[N]`` named ``W.scale``."""
    weights = {op.weight_name.data: op.result.type.spec for op in module.walk()
               if isinstance(op, g.WeightOp)}
    out: dict[str, tuple[str, str]] = {}
    for name, spec in weights.items():
        source = name.removesuffix(INT8_SUFFIX)
        scale = weights.get(source + SCALE_SUFFIX)
        if source == name or spec.dtype != "i8" or len(spec.shape) != 2 or scale is None:
            continue
        if scale.dtype == "f32" and tuple(scale.shape) == tuple(spec.shape[:1]):
            out[name] = (source, "int8")
            out[source + SCALE_SUFFIX] = (source, "scale")
    return out


@dataclass(frozen=True)
class QuantizeInt8Pass(ModulePass):
    """spec §5's int8 projections (and embedding) on every ``graph.func``."""

    name = "quantize-int8"

    kernel: str = "a"
    """spec §5's kernel of the projections: ``a`` (W8A32, the sum in ``blocks32``
    order) or ``b`` (W8A8: ``graph.matmul_i8``; the LM head kernel A unless ``head=b``)."""

    embedding: str = "int8"
    """``int8``: the embedding lookup and the LM head int8 too; ``f32``: left as they are."""

    head: str = "a"
    """spec §5's kernel of the int8 LM head: ``a`` (f32 activations, the default)
    or ``b`` (its activations quantized: needs ``kernel=b embedding=int8``)."""

    def __post_init__(self) -> None:
        if self.embedding not in EMBEDDINGS:
            raise ValueError(f"quantize-int8: expected embedding {' or '.join(EMBEDDINGS)}, "
                             f"got {self.embedding!r}")
        check_options(self.kernel, self.embedding == "int8", self.head)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.walk() if isinstance(f, g.GraphFuncOp)]:
            quantize_func(func, embedding=self.embedding == "int8", kernel=self.kernel,
                          head=self.head)

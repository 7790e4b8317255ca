"""``quantize-int8``: spec §5's int8 weights (nanoinfer's kernel A, W8A32).

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

Untouched: a matmul whose right operand is not a transposed weight
(attention's two), a matmul that already states an order, and every weight
with a use other than a projection or a lookup (norms, biases; a projection
weight read some other way too keeps all its uses). Option ``kernel``: ``a``,
the only kernel so far. Run it on the graph as the frontend builds it, before
``fuse`` (the compiler does: ``CompileOptions.quantize``).

    nc-opt -p 'quantize-int8{embedding=f32}' model.mlir
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from nanocompile.dialects import graph as g

KERNELS = ("a",)
"""spec §5's kernels this pass can target: ``a`` (W8A32)."""

EMBEDDINGS = ("int8", "f32")
ORDER = "blocks32"  # kernel A's order of the sum over k (graph.MATMUL_ORDERS)
INT8_SUFFIX, SCALE_SUFFIX = ".int8", ".scale"


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


def _quantize(plan: _Plan) -> None:
    """Rewrite ``plan``'s weight and its uses (see the module docstring)."""
    n, k = plan.shape
    block = plan.weight.parent_block()
    assert block is not None
    q = g.WeightOp(plan.name + INT8_SUFFIX, [n, k], "i8")
    scale = g.WeightOp(plan.name + SCALE_SUFFIX, [n], "f32")
    qf = g.CastOp(q.result, "f32")
    block.insert_ops_before([q, scale, qf], plan.weight)
    for permute, matmul in plan.projections:
        qt = g.PermuteOp(qf.results[0], [1, 0])
        dot = g.MatmulOp(matmul.lhs, qt.results[0], order=ORDER)
        row = g.ReshapeOp(scale.result, [1, n])
        wide = g.BroadcastOp(row.results[0], matmul.result.type.dims)
        _replace(matmul, [qt, dot, row, wide, g.MulOp(dot.results[0], wide.results[0])])
        if not permute.result.uses:
            block.erase_op(permute)
    for gather in plan.gathers:
        rows = g.GatherOp(qf.results[0], gather.ids)
        column = g.ReshapeOp(scale.result, [n, 1])
        picked = g.GatherOp(column.results[0], gather.ids)
        wide = g.BroadcastOp(picked.results[0], gather.result.type.dims)
        _replace(gather, [rows, column, picked, wide, g.MulOp(rows.results[0], wide.results[0])])
    for cast in plan.casts:
        block.erase_op(cast)
    block.erase_op(plan.weight)


def quantize_func(func: g.GraphFuncOp, embedding: bool = True) -> list[str]:
    """Quantize ``func``'s projections (and with ``embedding`` its embedding
    weights) in place; the names of the weights quantized, in graph order."""
    taken = {w.weight_name.data for w in func.weights()}
    plans = [p for w in func.weights() if (p := _plan(w)) is not None
             and (embedding or not _is_embedding(p))]
    for plan in plans:
        for suffix in (INT8_SUFFIX, SCALE_SUFFIX):
            if plan.name + suffix in taken:
                raise PassFailedException(f"quantize-int8: weight '{plan.name}' cannot be "
                                          f"quantized: the graph already has a weight "
                                          f"'{plan.name + suffix}'")
    for plan in plans:
        _quantize(plan)
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
    """spec §5's kernel: ``a`` (W8A32, the sum in ``blocks32`` order)."""

    embedding: str = "int8"
    """``int8``: the embedding lookup and the LM head int8 too; ``f32``: left as they are."""

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(f"quantize-int8: expected kernel {', '.join(KERNELS)}, "
                             f"got {self.kernel!r}")
        if self.embedding not in EMBEDDINGS:
            raise ValueError(f"quantize-int8: expected embedding {' or '.join(EMBEDDINGS)}, "
                             f"got {self.embedding!r}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.walk() if isinstance(f, g.GraphFuncOp)]:
            quantize_func(func, embedding=self.embedding == "int8")

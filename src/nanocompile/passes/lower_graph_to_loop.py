"""``lower-graph-to-loop``: one kernel per compute primitive, views for the rest.

Each ``graph.func`` becomes a ``loop.program``. Per primitive:

* ``input``/``weight``/``const`` become ``loop.buffer`` ops plus a full view;
* movement primitives become ``loop.view`` ops, never kernels: ``permute``
  swaps strides (a transposed weight is read in place), ``broadcast`` uses
  stride 0, ``slice`` moves the offset, and ``reshape`` is a view whenever
  strides can express it, else an explicit copy kernel;
* every compute primitive becomes a ``temp`` buffer, a ``loop.kernel`` that
  reads its operands through their strides and writes the buffer row-major,
  and a ``loop.launch``;
* ``graph.return`` becomes ``loop.output``: a returned temporary buffer is
  renamed an ``output`` buffer; a returned view is copied into one;
* a *state* (an input returned under its own name with its own type: the KV
  cache) is one ``state`` buffer, both the input and the output;
  ``update_slice`` on it is performed in place, a copy kernel writing only
  the updated block (legal because every read of the old value is launched
  before it: the pass checks that no op after the update reads the value it
  replaced); an ``update_slice`` of any other value copies it first.

Identical kernels (the same body up to the kernel's name) are emitted once,
so the 24 layers of Qwen2 share their kernels. After the pass no graph op
remains; the pass checks it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.utils.exceptions import PassFailedException

from nanocompile.dialects import graph as g
from nanocompile.dialects import loop
from nanocompile.ir.layout import Layout
from nanocompile.ir.shapes import TensorSpec
from nanocompile.ir.symbolic import Expr
from nanocompile.lowering.fused_kernels import build_fused, view_of
from nanocompile.lowering.primitive_kernels import (
    Builder,
    build_binary,
    build_cast,
    build_concat,
    build_copy,
    build_copy_into,
    build_dim,
    build_gather,
    build_iota,
    build_matmul_i8,
    build_reduce,
    build_select,
    build_unary,
    matmul_builder,
)


@dataclass
class KernelLibrary:
    """The distinct kernels of a module, keyed by their body."""

    kernels: dict[str, loop.KernelOp] = field(default_factory=dict)
    by_body: dict[str, str] = field(default_factory=dict)
    by_key: dict[tuple[object, ...], str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def lookup(self, key: tuple[object, ...], base: str, build: Callable[[], loop.KernelOp]
               ) -> str:
        """The kernel for a structural key (what it computes on which layouts),
        built only the first time the key is seen."""
        name = self.by_key.get(key)
        if name is None:
            name = self.add(base, build())
            self.by_key[key] = name
        return name

    def add(self, base: str, kernel: loop.KernelOp) -> str:
        """Register ``kernel``; returns the name of an identical existing one if any."""
        text = str(kernel).split("(", 1)[1]
        key = hashlib.sha256(text.encode()).hexdigest()
        if key in self.by_body:
            return self.by_body[key]
        n = self.counts.get(base, 0)
        self.counts[base] = n + 1
        name = base if n == 0 else f"{base}_{n}"
        kernel.properties["sym_name"] = StringAttr(name)
        self.kernels[name] = kernel
        self.by_body[key] = name
        return name


def view_layout(value: SSAValue) -> tuple[SSAValue, Layout]:
    """The buffer and layout behind a lowered value (a ``loop.view`` result)."""
    owner = value.owner
    if not isinstance(owner, loop.ViewOp):
        raise PassFailedException(f"expected a lowered view, got {value.type}")
    lay = owner.layout
    return owner.source, Layout(owner.result.type.dims, lay.offset_expr, lay.stride_exprs)


def new_view(rewriter: PatternRewriter, buffer: SSAValue, layout: Layout) -> SSAValue:
    view = loop.ViewOp(buffer, layout.shape, layout.offset, layout.strides)
    rewriter.insert(view)
    return view.result


def new_buffer(rewriter: PatternRewriter, kind: str, spec: TensorSpec,
               name: str | None = None, value: g.ElementsAttr | None = None) -> SSAValue:
    buf = loop.BufferOp(kind, loop.BufType.get(spec.dtype, spec.shape), name, value)
    rewriter.insert(buf)
    return buf.result


def replace_by_view(rewriter: PatternRewriter, op: Operation, buffer: SSAValue,
                    layout: Layout) -> SSAValue:
    """Replace ``op``'s result by a view of ``buffer``; returns the view."""
    view = new_view(rewriter, buffer, layout)
    rewriter.replace_all_uses_with(op.results[0], view)
    rewriter.erase(op)
    return view


def launch_into_temp(rewriter: PatternRewriter, op: Operation, kernel: str,
                     operands: list[SSAValue]) -> None:
    """Replace ``op`` by a fresh temporary that ``kernel`` writes from ``operands``."""
    spec = g.tensor_spec(op.results[0])
    out_buf = new_buffer(rewriter, "temp", spec)
    out_view = new_view(rewriter, out_buf, Layout.contiguous(spec.shape))
    rewriter.insert(loop.LaunchOp(kernel, [out_view, *operands]))
    rewriter.replace_all_uses_with(op.results[0], out_view)
    rewriter.erase(op)


def program_symbols(op: Operation) -> tuple[str, ...]:
    program = op.parent_op()
    assert isinstance(program, loop.ProgramOp)
    return program.symbols


@dataclass
class Lowering:
    """State shared by the patterns of one run: the kernel library."""

    library: KernelLibrary = field(default_factory=KernelLibrary)

    def launch(self, rewriter: PatternRewriter, op: g.GraphPrimitiveOp, kind: str,
               build: Builder, operands: list[SSAValue]) -> None:
        """Replace ``op`` by a temp buffer written by a kernel reading ``operands``."""
        spec = g.tensor_spec(op.results[0])
        syms = program_symbols(op)
        layouts = [view_layout(v)[1] for v in operands]
        props = tuple(sorted((k, str(v)) for k, v in op.properties.items()))
        key = (kind, op.name, props, syms, spec,
               tuple((_dtype(v), lay.shape, lay.strides)
                     for v, lay in zip(operands, layouts, strict=True)))
        name = self.library.lookup(key, kind, lambda: build(syms, spec, layouts))
        launch_into_temp(rewriter, op, name, operands)


class ConvertGraphFunc(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: g.GraphFuncOp, rewriter: PatternRewriter) -> None:
        symbols = sorted(op.bound_symbols())
        body = op.body.detach_block(0)
        rewriter.replace(op, loop.ProgramOp(op.sym_name.data, symbols, body))


def state_names(op: Operation) -> set[str]:
    """The states of the program being lowered (the graph.return is still its
    last op): inputs returned under their own name with their own type."""
    block = op.parent_block()
    assert block is not None
    ret = block.last_op
    if not isinstance(ret, g.ReturnOp):
        return set()
    returned = {n: _spec_of(v) for n, v in zip(ret.names, ret.outputs, strict=True)}
    return {i.arg_name.data for i in block.ops if isinstance(i, g.InputOp)
            and returned.get(i.arg_name.data) == i.result.type.spec}


def _spec_of(value: SSAValue) -> TensorSpec:
    """The dtype and shape of a graph value, lowered (a view) or not."""
    t = value.type
    if isinstance(t, loop.ViewType):
        return TensorSpec(t.dtype.data, t.dims)
    return g.tensor_spec(value)


class LowerSource(RewritePattern):
    """``input``, ``weight`` and ``const`` become named or constant buffers
    (an input that is a state: a ``state`` buffer)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: g.InputOp | g.WeightOp | g.ConstOp,
                          rewriter: PatternRewriter) -> None:
        spec = op.result.type.spec
        if isinstance(op, g.InputOp):
            kind = "state" if op.arg_name.data in state_names(op) else "input"
            buf = new_buffer(rewriter, kind, spec, op.arg_name.data)
        elif isinstance(op, g.WeightOp):
            buf = new_buffer(rewriter, "weight", spec, op.weight_name.data)
        else:
            buf = new_buffer(rewriter, "const", spec, value=op.value)
        replace_by_view(rewriter, op, buf, Layout.contiguous(spec.shape))


class LowerMovement(RewritePattern):
    """``permute``, ``broadcast``, ``slice`` and view-expressible ``reshape`` are views."""

    def __init__(self, lowering: Lowering) -> None:
        self.lowering = lowering

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: g.PermuteOp | g.BroadcastOp | g.SliceOp | g.ReshapeOp,
                          rewriter: PatternRewriter) -> None:
        buf, lay = view_layout(op.operand)
        shape = op.result.type.dims
        if isinstance(op, g.PermuteOp):
            new = lay.permute(op.permutation)
        elif isinstance(op, g.BroadcastOp):
            new = lay.broadcast(shape)
        elif isinstance(op, g.SliceOp):
            new = lay.slice(op.axis.data, op.start.data, op.stop.data)
            _require_slice_bounds(rewriter, op, lay.shape[op.axis.data])
        else:
            reshaped = lay.reshape(shape)
            if reshaped is None:  # strides cannot say it: copy into a fresh buffer
                self.lowering.launch(rewriter, op, "copy", build_copy, [op.operand])
                return
            new = reshaped
        replace_by_view(rewriter, op, buf, new)


def _require_slice_bounds(rewriter: PatternRewriter, op: g.SliceOp, size: Expr) -> None:
    """``0 <= start <= stop <= size`` where the verifier could not decide it."""
    start, stop = op.start.data, op.stop.data
    where = f"graph.slice [{start}, {stop}) of axis {op.axis.data} (size {size})"
    for diff, what in ((start, "start < 0"), (stop - start, "stop < start"),
                       (size - stop, "stop past the end")):
        if not diff.provably_nonnegative():
            rewriter.insert(loop.RequireOp(diff, f"{where}: {what}"))


class LowerUpdateSlice(RewritePattern):
    """``update_slice``: the block written in place into ``dest``'s buffer when
    that is a whole state buffer (a copy kernel of the update's elements only),
    else into a fresh copy of ``dest``; the result is the whole buffer."""

    def __init__(self, lowering: Lowering) -> None:
        self.lowering = lowering

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: g.UpdateSliceOp, rewriter: PatternRewriter) -> None:
        syms = program_symbols(op)
        buf, lay = view_layout(op.dest)
        owner = buf.owner
        assert isinstance(owner, loop.BufferOp)
        dtype = _dtype(op.dest)
        if not _in_place(op):  # not a whole state, or its old value is read after
            spec = TensorSpec(dtype, lay.shape)
            buf = new_buffer(rewriter, "temp", spec)
            whole = new_view(rewriter, buf, Layout.contiguous(spec.shape))
            kernel = build_copy(syms, spec, [lay])
            rewriter.insert(loop.LaunchOp(self.lowering.library.add("copy", kernel),
                                          [whole, op.dest]))
            lay = Layout.contiguous(spec.shape)
        _, src = view_layout(op.update)
        size = src.shape
        _require_update_bounds(rewriter, op, size, lay.shape)
        offset = sum((o * st for o, st in zip(op.offset_exprs, lay.strides, strict=True)),
                     Expr.const(0))
        dst = Layout(tuple(size), lay.offset + offset, lay.strides)
        key = ("update_slice", syms, dtype, dst.shape, dst.strides, src.shape, src.strides)
        name = self.lowering.library.lookup(
            key, "update_slice",
            lambda: build_copy_into(syms, Layout(dst.shape, Expr.const(0), dst.strides),
                                    Layout(src.shape, Expr.const(0), src.strides), dtype))
        rewriter.insert(loop.LaunchOp(name, [new_view(rewriter, buf, dst), op.update]))
        replace_by_view(rewriter, op, buf, lay)


class LowerCompute(RewritePattern):
    """Every compute primitive: a temp buffer, a kernel, a launch."""

    def __init__(self, lowering: Lowering) -> None:
        self.lowering = lowering

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        entry = _COMPUTE.get(type(op))
        if entry is None:
            return
        kind, build = entry
        assert isinstance(op, g.GraphPrimitiveOp)
        self.lowering.launch(rewriter, op, kind, build(op), list(op.operands))


def _dtype(value: SSAValue) -> str:
    """The element type of a lowered value (a ``loop.view``)."""
    if not isinstance(value.type, loop.ViewType):
        raise PassFailedException(f"expected a lowered view, got {value.type}")
    return value.type.dtype.data


def _bin(kind: str) -> Callable[[g.BinaryOp], Builder]:
    return lambda op: build_binary(kind, _dtype(op.lhs))


def _un(kind: str) -> Callable[[g.UnaryOp], Builder]:
    return lambda op: build_unary(kind)


# Per primitive: the kernel's base name, and its builder given the op (whose
# operands are lowered views by then).
_COMPUTE: dict[type[Operation], tuple[str, Callable[[Any], Builder]]] = {
    g.AddOp: ("add", _bin("add")), g.SubOp: ("sub", _bin("sub")),
    g.MulOp: ("mul", _bin("mul")), g.DivOp: ("div", _bin("div")),
    g.LessEqualOp: ("less_equal", _bin("less_equal")),
    g.WhereOp: ("where", lambda op: build_select),
    g.NegOp: ("neg", _un("neg")), g.ExpOp: ("exp", _un("exp")),
    g.SqrtOp: ("sqrt", _un("sqrt")), g.ReciprocalOp: ("reciprocal", _un("reciprocal")),
    g.SinOp: ("sin", _un("sin")), g.CosOp: ("cos", _un("cos")),
    g.CastOp: ("cast", lambda op: build_cast(_dtype(op.operand))),
    g.RoundOp: ("round", _un("round")),
    g.ReduceSumOp: ("reduce_sum", lambda op: build_reduce("sum", op.axis.data,
                                                          op.order_name)),
    g.ReduceMaxOp: ("reduce_max", lambda op: build_reduce("max", op.axis.data)),
    g.ConcatOp: ("concat", lambda op: build_concat(op.axis.data)),
    g.MatmulOp: ("matmul", lambda op: matmul_builder(op.order_name)),
    g.MatmulI8Op: ("matmul_i8", lambda op: build_matmul_i8),
    g.GatherOp: ("gather", lambda op: build_gather(_dtype(op.ids))),
    g.IotaOp: ("iota", lambda op: build_iota(op.axis.data)),
    g.DimOp: ("dim", lambda op: build_dim(op.expr.data)),
}


def region_key(op: g.FusedOp) -> tuple[object, ...]:
    """What a region computes, independent of SSA names (for kernel sharing)."""
    ids: dict[SSAValue, int] = {a: i for i, a in enumerate(op.block.args)}
    out: list[object] = [op.kind.data, tuple(str(a.type) for a in op.block.args)]
    for inner in op.block.ops:
        for r in inner.results:
            ids[r] = len(ids)
        out.append((inner.name, tuple(sorted((k, str(v)) for k, v in inner.properties.items())),
                    tuple(str(r.type) for r in inner.results),
                    tuple(ids[v] for v in inner.operands)))
    return tuple(out)


def _hoist_views(rewriter: PatternRewriter, op: g.FusedOp) -> list[SSAValue]:
    """Move index-only ops that strides can express (a layer's slice of the KV
    cache, a transposed weight) out of the region into launch-time views, so
    the kernel sees only strides and the 24 layers share one kernel. Returns
    the views to launch with, one per (new) region argument."""
    block = op.block
    operands = list(op.inputs)
    changed = True
    while changed:
        changed = False
        for i, arg in enumerate(list(block.args)):
            use = arg.get_unique_use()
            if use is None:
                continue
            user = use.operation
            buf, lay = view_layout(operands[i])
            new = view_of(user, lay) if user.parent_block() is block else None
            if new is None:
                continue
            operands[i] = new_view(rewriter, buf, new)
            new_arg = block.insert_arg(user.results[0].type, i)
            rewriter.replace_all_uses_with(user.results[0], new_arg)
            rewriter.erase(user)
            block.erase_arg(arg)
            changed = True
    return operands


class LowerFused(RewritePattern):
    """A ``graph.fused`` region becomes one kernel (``fused_kernels``)."""

    def __init__(self, lowering: Lowering) -> None:
        self.lowering = lowering

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: g.FusedOp, rewriter: PatternRewriter) -> None:
        spec = op.result.type.spec
        syms = program_symbols(op)
        for inner in op.block.ops:
            if isinstance(inner, g.SliceOp):
                size = g.tensor_type(inner.operand).dims[inner.axis.data]
                _require_slice_bounds(rewriter, inner, size)
        operands = _hoist_views(rewriter, op)
        layouts = [view_layout(v)[1] for v in operands]
        yielded = op.block.last_op
        assert isinstance(yielded, g.FusedYieldOp)
        root = yielded.value.owner
        base = "fused_" + (root.name.removeprefix("graph.") if isinstance(root, Operation)
                           else "copy")
        target = _update_target(op)
        out = None if target is None else target[1]
        key = ("fused", region_key(op), syms, spec,
               tuple((lay.shape, lay.strides) for lay in layouts),
               None if out is None else out.strides)
        name = self.lowering.library.lookup(
            key, base, lambda: build_fused(syms, spec, layouts, op, base,
                                           None if out is None else
                                           Layout(out.shape, Expr.const(0), out.strides)))
        if target is None:
            launch_into_temp(rewriter, op, name, operands)
            return
        update, dst, state = target  # the region writes the update's block of the state
        _require_update_bounds(rewriter, update, g.tensor_type(update.update).dims,
                               view_layout(update.dest)[1].shape)
        rewriter.insert(loop.LaunchOp(name, [new_view(rewriter, state, dst), *operands]))
        reshape = update.update.owner
        replace_by_view(rewriter, update, state, Layout.contiguous(view_layout(update.dest)[1]
                                                                   .shape))
        assert isinstance(reshape, Operation)
        rewriter.erase(reshape)
        rewriter.erase(op)


def _in_place(update: g.UpdateSliceOp) -> bool:
    """Whether ``update`` can write its lowered ``dest``'s buffer in place: a whole
    state buffer whose old value nothing reads after the update."""
    buf, lay = view_layout(update.dest)
    owner = buf.owner
    if not (isinstance(owner, loop.BufferOp) and owner.kind.data == "state"
            and lay == Layout.contiguous(lay.shape)):
        return False
    return all(use.operation is update or not update.is_before_in_block(use.operation)
               for use in update.dest.uses)


def _update_target(op: g.FusedOp) -> tuple[g.UpdateSliceOp, Layout, SSAValue] | None:
    """The update_slice whose block the region's result only feeds (through a
    reshape strides can say), performed in place: the region then stores its
    result straight into that block of the state (its layout there), no
    temporary and no copy kernel. None otherwise."""
    use = op.result.get_unique_use()
    if use is None or not isinstance(use.operation, g.ReshapeOp):
        return None
    reshape = use.operation
    after = reshape.result.get_unique_use()
    if after is None or not isinstance(after.operation, g.UpdateSliceOp) or after.index != 1:
        return None
    update = after.operation
    if not isinstance(update.dest.type, loop.ViewType) or not _in_place(update):
        return None
    state, lay = view_layout(update.dest)
    offset = sum((o * st for o, st in zip(update.offset_exprs, lay.strides, strict=True)),
                 Expr.const(0))
    block = Layout(reshape.result.type.dims, lay.offset + offset, lay.strides)
    dst = block.reshape(op.result.type.dims)
    if dst is None:
        return None
    return update, dst, state


def _require_update_bounds(rewriter: PatternRewriter, op: g.UpdateSliceOp,
                           size: tuple[Expr, ...], full: tuple[Expr, ...]) -> None:
    """``0 <= offset`` and ``offset + size <= dim`` on every axis, where not decided."""
    where = f"graph.update_slice at [{', '.join(str(o) for o in op.offset_exprs)}]"
    for axis, (off, n, dim) in enumerate(zip(op.offset_exprs, size, full, strict=True)):
        for diff, what in ((off, "offset < 0"), (dim - off - n, "past the end")):
            if not diff.provably_nonnegative():
                rewriter.insert(loop.RequireOp(diff, f"{where}: axis {axis} {what}"))


class LowerReturn(RewritePattern):
    """Outputs become whole ``output`` buffers (a copy when a view is returned)."""

    def __init__(self, lowering: Lowering) -> None:
        self.lowering = lowering

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: g.ReturnOp, rewriter: PatternRewriter) -> None:
        outputs = []
        for name, value in zip(op.names, op.outputs, strict=True):
            outputs.append((name, self._output_buffer(rewriter, op, name, value)))
        rewriter.replace(op, loop.OutputOp(outputs))

    def _output_buffer(self, rewriter: PatternRewriter, op: g.ReturnOp, name: str,
                       value: SSAValue) -> SSAValue:
        buf, lay = view_layout(value)
        owner = buf.owner
        assert isinstance(owner, loop.BufferOp)
        whole = lay == Layout.contiguous(owner.result.type.dims)
        state = _state_buffer(op, name)
        if state is not None:  # the state's new value: in place already, or copied in
            if buf is state and whole:
                return state
            assert isinstance(state.type, loop.BufType)
            dims = state.type.dims
            spec = TensorSpec(state.type.dtype.data, dims)
            kernel = build_copy(program_symbols(op), spec, [lay])
            rewriter.insert(loop.LaunchOp(self.lowering.library.add("copy", kernel),
                                          [new_view(rewriter, state, Layout.contiguous(dims)),
                                           value]))
            return state
        if whole and owner.kind.data == "temp" and _only_view(buf, value):
            owner.properties["kind"] = StringAttr("output")
            owner.properties["name"] = StringAttr(name)
            return buf
        spec = TensorSpec(owner.result.type.dtype.data, lay.shape)
        out = new_buffer(rewriter, "output", spec, name)
        out_view = new_view(rewriter, out, Layout.contiguous(spec.shape))
        kernel = build_copy(program_symbols(op), spec, [lay])
        kname = self.lowering.library.add("copy", kernel)
        rewriter.insert(loop.LaunchOp(kname, [out_view, value]))
        return out


def _state_buffer(op: Operation, name: str) -> SSAValue | None:
    """The ``state`` buffer named ``name`` of the program ``op`` is in, if any."""
    block = op.parent_block()
    assert block is not None
    for buf in block.ops:
        if (isinstance(buf, loop.BufferOp) and buf.kind.data == "state"
                and buf.buffer_name is not None and buf.buffer_name.data == name):
            return buf.result
    return None


def _only_view(buf: SSAValue, view: SSAValue) -> bool:
    """True when a returned buffer is not also returned under another name."""
    ret_uses = [u for u in view.uses if isinstance(u.operation, g.ReturnOp)]
    return len(ret_uses) == 1


@dataclass(frozen=True)
class LowerGraphToLoopPass(ModulePass):
    """Lower every ``graph.func`` to a ``loop.program`` plus its kernels."""

    name = "lower-graph-to-loop"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _check_graph_ops_in_funcs(op)
        lowering = Lowering()
        for func in op.ops:  # kernels must not take the name of a graph
            if isinstance(func, g.GraphFuncOp):
                lowering.library.counts[func.sym_name.data] = 1
        PatternRewriteWalker(GreedyRewritePatternApplier(
            [ConvertGraphFunc()], dce_enabled=False), apply_recursively=False).rewrite_module(op)
        PatternRewriteWalker(GreedyRewritePatternApplier(
            [LowerSource(), LowerMovement(lowering), LowerCompute(lowering),
             LowerUpdateSlice(lowering), LowerFused(lowering), LowerReturn(lowering)],
            dce_enabled=False),
            apply_recursively=False).rewrite_module(op)
        first = op.body.block.first_op
        for kernel in lowering.library.kernels.values():
            if first is None:
                op.body.block.add_op(kernel)
            else:
                op.body.block.insert_op_before(kernel, first)
        _check_fully_lowered(op)


def _check_graph_ops_in_funcs(module: ModuleOp) -> None:
    """Graph primitives only mean something inside a ``graph.func``."""
    for op in module.ops:
        if isinstance(op, g.GraphPrimitiveOp | g.ReturnOp | g.FusedOp):
            raise PassFailedException(
                f"lower-graph-to-loop: {op.name} outside a graph.func (inputs bind a "
                "graph's symbols; put the ops in a graph.func)")


def _check_fully_lowered(module: ModuleOp) -> None:
    for inner in module.walk():
        if inner.name.startswith("graph."):
            raise PassFailedException(
                f"lower-graph-to-loop: {inner.name} was not lowered"
            )

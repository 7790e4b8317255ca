"""``fuse``: group graph ops into ``graph.fused`` regions, one per future kernel.

Bitwise by construction: fusion only decides which values are stored and
which are recomputed in registers; inside a region every value is computed by
the same primitive, on the same operands, in the same order (a reduction or a
matmul still sums k = 0, 1, ... sequentially). Fused and unfused programs
therefore compute identical bits.

Which ops go where (walking the graph from its outputs back):

* *index-only* ops (``reshape permute broadcast slice concat iota dim``) and
  *index-computable* elementwise ops (built only from iota, dim, constants
  and index-only ops, e.g. the causal mask; never ``exp sqrt sin cos``) are
  never stored: every region that needs them gets its own copy and reads
  through them (strides, div/mod, or one branch per concat operand);
* the exact widening of bf16 data to f32 (a ``graph.cast`` of a bf16 weight)
  is never stored either: every region that reads the value widens it as it
  loads it (a matmul's k loop loads bf16 and widens in registers), so the
  weight is read at 2 bytes per element (the same for an i8 weight's exact
  widening: 1 byte per element). It is not index-computable (an op
  computed from it is stored as usual);
* a compute op joins the region of its consumers when they are all in one
  region and it can be computed there without repeating work:
  - an elementwise op is used directly (no index remapping), or reaches its
    region through exactly one path; never through a matmul operand;
  - a reduction sums the last axis of a value shaped like the region's
    result (a *row* kernel: rms_norm, softmax), and its result is only
    broadcast along that axis;
  - a matmul becomes the region's anchor when its result is used directly
    by the region's elementwise epilogue (bias, residual, SwiGLU); two
    matmuls of one shape share the k loop (gate and up); spec §5 kernel B's
    ``matmul_i8`` is a contraction too, the anchor of its epilogue (the
    offset, the row scale, a bias), alone in its region; what it reads (the
    quantized activations and their scales) is stored, never its prologue,
    and so is a row-invariant op of its epilogue (``128 * off``: it joins the
    offset's row kernel), so that its rows stay a perfect nest; a kernel A
    matmul (``order = "blocks32"``) does not anchor a region whose epilogue
    calls ``exp`` either: gate, up and the SiLU become three kernels, as in
    kernel B (kernel A's decode is bound by its int8 -> f32 widening, ~3
    cycles a block of 32 on a Zen 4, and the per-output scalar ``exp`` and
    division of the tile cost 2 ms of a 24 ms step there; f32 and bf16 keep
    the fused SwiGLU: measured, it changed their decode by nothing and their
    prefill by 2-4 %);
  - an elementwise op that depends on a matmul stays in the matmul's
    epilogue rather than joining a row kernel (scale and mask of the
    attention scores are applied as the scores are stored);
* anything else is stored: it becomes the root of a new region;
* ``update_slice`` stays outside every region (a kernel of its own in the
  lowering); its update operand is stored like any value a kernel reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue, Use
from xdsl.passes import ModulePass

from nanocompile.dialects import graph as g
from nanocompile.ir.symbolic import Expr

INDEX_OPS = (g.ReshapeOp, g.PermuteOp, g.BroadcastOp, g.SliceOp, g.ConcatOp, g.IotaOp,
             g.DimOp)
ELEMENTWISE_OPS = (g.AddOp, g.SubOp, g.MulOp, g.DivOp, g.LessEqualOp, g.WhereOp, g.NegOp,
                   g.ExpOp, g.SqrtOp, g.ReciprocalOp, g.SinOp, g.CosOp, g.RoundOp, g.CastOp,
                   g.GatherOp)
EXPENSIVE_OPS = (g.ExpOp, g.SqrtOp, g.SinOp, g.CosOp, g.ReciprocalOp, g.DivOp, g.GatherOp)
REDUCE_OPS = (g.ReduceSumOp, g.ReduceMaxOp)
REMAP_OPS = (g.ReshapeOp, g.PermuteOp, g.SliceOp, g.ConcatOp)  # no element is repeated
CONTRACTION_OPS = (g.MatmulOp, g.MatmulI8Op)  # a "matmul" region's anchor


@dataclass(eq=False)
class Region:
    """The ops of one future kernel; ``root`` is the value it stores."""

    root: Operation
    members: list[Operation] = field(default_factory=list)

    @property
    def shape(self) -> tuple[Expr, ...]:
        return g.tensor_type(self.root.results[0]).dims

    def matmuls(self) -> list[Operation]:
        """The contractions: ``graph.matmul`` and spec §5 kernel B's ``matmul_i8``."""
        return [op for op in self.members if isinstance(op, CONTRACTION_OPS)]

    def reductions(self) -> list[Operation]:
        return [op for op in self.members if isinstance(op, REDUCE_OPS)]

    @property
    def kind(self) -> str:
        if self.matmuls():
            return "matmul"
        return "row" if self.reductions() else "elementwise"


@dataclass(frozen=True)
class Path:
    """A use of a value, seen through the index-only ops between them."""

    consumer: Operation
    through: tuple[Operation, ...]


class Partition:
    """Assigns every compute op of a graph to a region (see the module doc)."""

    def __init__(self, func: g.GraphFuncOp) -> None:
        self.ops = [op for op in func.block.ops if not isinstance(op, g.ReturnOp)]
        self.position = {op: i for i, op in enumerate(self.ops)}
        self.outputs = set(func.return_op().outputs)
        self.inline: set[Operation] = set()
        self._computable: dict[Operation, bool] = {}
        for op in self.ops:
            if self._is_inline(op):
                self.inline.add(op)
        self.region_of: dict[Operation, Region] = {}
        self.regions: list[Region] = []
        self._matmul_dependent: dict[Operation, bool] = {}
        self._i8_anchored: dict[Region, bool] = {}
        for op in reversed(self.ops):
            if op in self.inline or _is_external(op):
                if op in self.inline and op.results[0] in self.outputs:
                    self._new_region(op)  # an index-only output is copied into place
                continue
            self._assign(op)

    # -- classification -------------------------------------------------------
    def _is_inline(self, op: Operation) -> bool:
        if isinstance(op, INDEX_OPS) or _is_scalar_const(op) or is_widening(op):
            return True
        if isinstance(op, ELEMENTWISE_OPS) and not isinstance(op, EXPENSIVE_OPS):
            return all(self._index_computable(v) for v in op.operands)
        return False

    def _index_computable(self, value: SSAValue) -> bool:
        owner = value.owner
        if isinstance(owner, g.ConstOp | g.IotaOp | g.DimOp):
            return True
        if isinstance(owner, INDEX_OPS):
            return self._index_op_computable(owner)
        return owner in self.inline and not is_widening(owner) \
            if isinstance(owner, Operation) else False

    def _index_op_computable(self, op: Operation) -> bool:
        """Whether an index-only op reads only index-computable values, through
        any chain of index-only ops (iterative, memoized: the ops it reads are
        classified before it, so a result never changes once known)."""
        known = self._computable
        stack = [op]
        while stack:
            top = stack[-1]
            if top in known:
                stack.pop()
                continue
            pending = [v.owner for v in top.operands
                       if isinstance(v.owner, INDEX_OPS) and v.owner not in known]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            known[top] = all(self._index_computable(v) for v in top.operands)
        return known[op]

    def _epilogue_bound(self, op: Operation) -> bool:
        """True for an elementwise op applied to a matmul result through a chain
        of single-use elementwise ops: it belongs in that matmul's epilogue.

        Iterative (an explicit stack, results memoized): a chain may be
        thousands of ops long."""
        known = self._matmul_dependent
        stack = [op]
        while stack:
            top = stack[-1]
            if top in known:
                stack.pop()
                continue
            feeders = self._epilogue_feeders(top)
            pending = [f for f in feeders if f not in known]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            known[top] = (any(isinstance(v.owner, CONTRACTION_OPS) for v in top.operands)
                          or any(known[f] for f in feeders))
        return known[op]

    def _epilogue_feeders(self, op: Operation) -> list[Operation]:
        """The stored elementwise ops whose only use is ``op``."""
        return [v.owner for v in op.operands
                if isinstance(v.owner, ELEMENTWISE_OPS) and v.owner not in self.inline
                and v.has_one_use()]

    # -- assignment ---------------------------------------------------------------
    def paths(self, value: SSAValue) -> list[Path]:
        """Every use of ``value``, seen through the inline ops not yet in a region,
        depth first in use order (iterative: a chain of index-only ops may be
        thousands of ops long)."""
        out: list[Path] = []
        stack: list[tuple[Iterator[Use], tuple[Operation, ...]]] = [(iter(value.uses), ())]
        while stack:
            uses, through = stack[-1]
            use = next(uses, None)
            if use is None:
                stack.pop()
                continue
            user = use.operation
            if user in self.inline and user not in self.region_of:
                stack.append((iter(user.results[0].uses), (*through, user)))
            else:
                out.append(Path(user, through))
        return out

    def _new_region(self, op: Operation) -> None:
        region = Region(op, [op])
        self.regions.append(region)
        self.region_of[op] = region

    def _assign(self, op: Operation) -> None:
        value = op.results[0]
        paths = self.paths(value)
        regions = {self.region_of.get(p.consumer) for p in paths}
        if value in self.outputs or len(regions) != 1 or None in regions:
            self._new_region(op)
            return
        (region,) = regions
        assert region is not None
        if self._can_join(op, region, paths):
            region.members.append(op)
            self.region_of[op] = region
        else:
            self._new_region(op)

    def _can_join(self, op: Operation, region: Region, paths: list[Path]) -> bool:
        if isinstance(op, g.MatmulOp):
            return self._matmul_joins(op, region, paths)
        if isinstance(op, g.MatmulI8Op):
            return self._matmul_i8_joins(op, region, paths)
        if isinstance(op, REDUCE_OPS):
            return self._reduction_joins(op, region, paths)
        if isinstance(op, ELEMENTWISE_OPS):
            return self._elementwise_joins(op, region, paths)
        return False

    def _matmul_joins(self, op: g.MatmulOp, region: Region, paths: list[Path]) -> bool:
        if region.reductions() or len(region.matmuls()) >= 2:
            return False
        if op.result.type.dims != region.shape:
            return False
        if op.order_name == "blocks32" and any(isinstance(m, g.ExpOp) for m in region.members):
            return False  # spec §5 kernel A: its SiLU an elementwise kernel (module doc)
        for other in region.matmuls():
            if not isinstance(other, g.MatmulOp):
                return False
            if g.tensor_type(other.lhs).dims[-1] != g.tensor_type(op.lhs).dims[-1]:
                return False
        return all(not p.through and isinstance(p.consumer, ELEMENTWISE_OPS)
                   for p in paths)

    def _matmul_i8_joins(self, op: g.MatmulI8Op, region: Region, paths: list[Path]) -> bool:
        """Kernel B's integer core anchors a region of its own epilogue (the
        offset, the row scale, a bias), alone: its k loop is not shared; not an
        epilogue that calls ``exp`` (the gate's SiLU), which runs as an
        elementwise kernel of its own, vectorized at the machine's width (in
        the tile's copies it ran 4 lanes at a time at best)."""
        if region.reductions() or region.matmuls() or op.result.type.dims != region.shape:
            return False
        if any(isinstance(m, g.ExpOp) for m in region.members):
            return False  # SiLU: an elementwise kernel of its own (_prologue_of_i8)
        return all(not p.through and isinstance(p.consumer, ELEMENTWISE_OPS)
                   for p in paths)

    def _row_invariant_in_i8(self, op: Operation, region: Region) -> bool:
        """``op`` is row-invariant in a kernel B region (shaped like its rows,
        ``shape[:-1] + [1]``, e.g. the offset ``128 * off``): there the lowering
        would compute it once per row before the column loop, so the rows could
        not move inside a column tile (``reorder``: no row jam, every row
        streaming the whole weight). Stored instead, it joins the row kernel
        that computes its operand (the offset's sum), and the region reads it
        through its broadcast like any input: the same op on the same operands,
        the same bits."""
        shape = region.shape
        if not shape or shape[-1] == 1:
            return False
        if g.tensor_type(op.results[0]).dims != (*shape[:-1], Expr.const(1)):
            return False
        return self._anchored_i8(region)

    def _prologue_of_i8(self, op: Operation, region: Region) -> bool:
        """``op`` would be a prologue of a kernel B region: the region holds a
        ``matmul_i8`` and ``op`` is not computed from it (kernel B's up
        projection consumes SiLU of the gate, another ``matmul_i8``'s result).
        Inside, the lowering computes it per output ahead of the reduction, in
        the register tile's copies (one exp per output, 4 lanes at best: 1.5x
        the gate kernel's time in a 128-token prefill); stored, it is an
        elementwise kernel of its own that vectorizes at the machine's width,
        and the region reads its result like any input: the same ops on the
        same operands, the same bits."""
        anchors = [m for m in region.matmuls() if isinstance(m, g.MatmulI8Op)]
        return bool(anchors) and not self._depends_on(op, anchors)

    def _depends_on(self, op: Operation, targets: Sequence[Operation]) -> bool:
        """``op`` is computed (through any ops) from one of ``targets``."""
        goal = set(targets)
        seen: set[Operation] = {op}
        stack = [op]
        while stack:
            for v in stack.pop().operands:
                owner = v.owner
                if not isinstance(owner, Operation) or owner in seen:
                    continue
                if owner in goal:
                    return True
                seen.add(owner)
                stack.append(owner)
        return False

    def _anchored_i8(self, region: Region) -> bool:
        """``region`` is (or will be, once the walk reaches it) a ``matmul_i8``'s:
        it holds one, or its root is computed from one of its shape through
        single-use elementwise ops (the epilogue), the anchor not assigned yet."""
        if any(isinstance(m, g.MatmulI8Op) for m in region.matmuls()):
            return True
        if region in self._i8_anchored:
            return self._i8_anchored[region]
        found, seen, stack = False, {region.root}, [region.root]
        while stack and not found:
            for v in stack.pop().operands:
                owner = v.owner
                if isinstance(owner, g.MatmulI8Op) and owner.result.type.dims == region.shape:
                    found = True
                elif (isinstance(owner, ELEMENTWISE_OPS) and owner not in self.inline
                      and owner not in seen and v.has_one_use()):
                    seen.add(owner)
                    stack.append(owner)
        self._i8_anchored[region] = found
        return found

    def _reduction_joins(self, op: g.ReduceOp, region: Region, paths: list[Path]) -> bool:
        src = g.tensor_type(op.operand).dims
        axis = op.axis.data
        if region.matmuls() or axis != len(src) - 1 or len(src) != len(region.shape):
            return False
        if src[:-1] != region.shape[:-1]:
            return False
        return all(_row_broadcast_path(p) for p in paths)

    def _elementwise_joins(self, op: Operation, region: Region, paths: list[Path]) -> bool:
        if any(isinstance(p.consumer, CONTRACTION_OPS) for p in paths):
            return False  # never a matmul prologue
        if self._row_invariant_in_i8(op, region):
            return False  # stored: joins its producer's row kernel instead
        if self._prologue_of_i8(op, region):
            return False  # stored: an elementwise kernel of its own, vectorized
        if self._epilogue_bound(op) and (region.reductions() or (not region.matmuls()
                                            and _feeds_reduction(paths))):
            return False  # stays in the matmul's epilogue
        if all(not p.through for p in paths):
            return True
        if len(paths) != 1:
            return False
        (path,) = paths
        if all(isinstance(t, REMAP_OPS) for t in path.through):
            return True
        return _row_broadcast_path(path)


def _row_broadcast_path(path: Path) -> bool:
    """Direct, or through broadcasts that only stretch the last axis (a
    row-invariant value used across a row)."""
    for t in path.through:
        if not isinstance(t, g.BroadcastOp):
            return False
        src, dst = g.tensor_type(t.operand).dims, t.result.type.dims
        if src[:-1] != dst[:-1] or src[-1] != 1:
            return False
    return True


def _feeds_reduction(paths: list[Path]) -> bool:
    return any(isinstance(p.consumer, REDUCE_OPS) for p in paths)


def is_widening(op: Operation) -> bool:
    """The exact bf16 -> f32 cast (bf16 is a storage type: a bf16 value is data
    read from memory, through index-only ops at most), or the exact i8 -> f32
    one (int8 weights, spec §5)."""
    return (isinstance(op, g.CastOp) and g.tensor_type(op.operand).dtype.data in ("bf16", "i8")
            and op.result.type.dtype.data == "f32")


def _is_scalar_const(op: Operation) -> bool:
    """A one-element constant: emitted as a literal wherever it is read."""
    return isinstance(op, g.ConstOp) and all(d == 1 for d in op.result.type.dims)


def _is_external(op: Operation) -> bool:
    """Read from memory by the regions: inputs, weights, constant arrays,
    values already fused (the pass is idempotent), and ``update_slice`` (a
    kernel of its own, never fused: the lowering performs it in place in a
    state buffer, and the regions that read its result read that buffer)."""
    return isinstance(op, g.InputOp | g.WeightOp | g.FusedOp | g.UpdateSliceOp) or (
        isinstance(op, g.ConstOp) and not _is_scalar_const(op))


# --------------------------------------------------------------------------
# Building the regions
# --------------------------------------------------------------------------


def build_region(part: Partition, region: Region) -> tuple[list[SSAValue], Block]:
    """The region's external inputs and its block (members plus copies of the
    index-only ops they read through), in the graph's order."""
    members = set(region.members)
    needed: set[Operation] = set(members)
    externals: list[SSAValue] = []
    work = list(members)
    while work:
        op = work.pop()
        for v in op.operands:
            owner = v.owner
            stored = owner in part.region_of and owner not in members  # another region's root
            if (isinstance(owner, Operation) and owner in part.inline and not stored
                    and owner not in needed):
                needed.add(owner)
                work.append(owner)
            elif owner not in needed and v not in externals:
                externals.append(v)
    # a canonical order from the region's own structure (post-order from the
    # root, operands left to right): regions computing the same thing print
    # the same and share a kernel, wherever cse put their shared constants
    ordered = _postorder(region.root, needed)
    externals = _first_use_order(ordered, externals)
    block = Block(arg_types=[v.type for v in externals])
    mapping: dict[SSAValue, SSAValue] = dict(zip(externals, block.args, strict=True))
    for op in ordered:
        clone = op.clone(value_mapper=mapping)
        block.add_op(clone)
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
            new.name_hint = old.name_hint
    block.add_op(g.FusedYieldOp(mapping[region.root.results[0]]))
    return externals, block


def _postorder(root: Operation, needed: set[Operation]) -> list[Operation]:
    out: list[Operation] = []
    seen: set[Operation] = set()
    stack: list[tuple[Operation, int]] = [(root, 0)]
    while stack:
        op, i = stack.pop()
        if i == 0 and op in seen:
            continue
        if i < len(op.operands):
            stack.append((op, i + 1))
            owner = op.operands[i].owner
            if isinstance(owner, Operation) and owner in needed and owner not in seen:
                stack.append((owner, 0))
            continue
        seen.add(op)
        out.append(op)
    return out


def _first_use_order(ordered: list[Operation], externals: list[SSAValue]) -> list[SSAValue]:
    rank: dict[SSAValue, int] = {}
    for op in ordered:
        for v in op.operands:
            rank.setdefault(v, len(rank))
    return sorted(externals, key=rank.__getitem__)


def fuse_graph(func: g.GraphFuncOp) -> int:
    """Rewrite ``func`` in place into ``graph.fused`` regions; returns their count."""
    part = Partition(func)
    built = []
    for region in sorted(part.regions, key=lambda r: part.position[r.root]):
        externals, block = build_region(part, region)
        built.append((region, g.FusedOp(region.kind, externals, block)))
    for region, fused in built:
        root = region.root
        func.block.insert_op_before(fused, root)
        fused.result.name_hint = root.results[0].name_hint
        root.results[0].replace_all_uses_with(fused.result)
    doomed = {op for region, _ in built for op in region.members}
    for op in reversed(part.ops):
        if op in doomed or (op in part.inline and not op.results[0].uses):
            op.detach()
            op.erase(safe_erase=False)
    return len(built)


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Group the ops of every ``graph.func`` into ``graph.fused`` kernel regions."""

    name = "fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in list(op.ops):
            if isinstance(func, g.GraphFuncOp):
                fuse_graph(func)

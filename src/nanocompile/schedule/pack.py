"""The ``pack`` schedule primitive: a weight laid out in tiles of output columns.

A projection reads its weight ``W`` (``[N, K]`` row-major, as checkpoints
store it) through the transposed view ``W.T``: ``[K, N]`` with strides
``[1, K]``, so consecutive output columns ``n`` are ``K`` elements apart and
no vector load can read several of them. ``pack arg A tile T`` re-lays the
weight as ``P = [N / T, K, T]`` with ``P[n / T, k, n % T] = W[n, k]``: the
``T`` columns of one tile are adjacent for every ``k``. The kernel's loads
become ``P[n / T, k, n % T]`` (strides ``[K*T, T, 1]``), which ``vectorize``
reads as one vector when ``n`` runs over an aligned tile.

The program gets a ``loop.buffer packed "<weight>" tile T`` per packed
weight; the runtime fills it once, when it binds the weights. Packing moves
no arithmetic: every load reads the same value as before, so results are
bitwise unchanged.

``pack`` is split in two so a schedule stays all-or-nothing: ``check_pack``
and ``pack_kernel`` work on the (copied) kernel, ``pack_program`` rewrites the
launches once every directive of the schedule has succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IndexType, IntegerAttr, ModuleOp
from xdsl.ir import SSAValue

from nanocompile.dialects import loop
from nanocompile.ir.symbolic import Expr
from nanocompile.schedule.primitives import ScheduleError


class PackLayout(ScheduleError):
    """Precondition 2: the argument is not a read-only f32 ``[K, N]`` matrix with
    strides ``[1, K]`` and constant ``K``, ``N`` with ``N`` a multiple of the tile."""


class PackSource(ScheduleError):
    """Precondition 3: a launch passes something other than a whole weight
    (only weights are packed, once, when the runtime binds them)."""


@dataclass(frozen=True)
class PackPlan:
    """What ``pack`` does: kernel argument ``arg`` becomes tiles of ``tile``."""

    kernel: str
    arg: int
    tile: int
    k: int
    n: int


def _launches(module: ModuleOp, kernel: str) -> list[loop.LaunchOp]:
    return [op for program in module.ops if isinstance(program, loop.ProgramOp)
            for op in program.launches() if op.kernel_name == kernel]


def check_pack(module: ModuleOp, kernel: loop.KernelOp, arg: int, tile: int) -> PackPlan:
    """The plan for ``pack arg tile`` on ``kernel`` (nothing is changed).

    Preconditions: 1. ``arg`` is an argument of the kernel and ``tile >= 2``
    (``ScheduleError``); 2. the argument is read, f32, with the footprint
    ``[K, N]`` strides ``[1, K]`` (constant ``K``, ``N``, ``N % tile == 0``),
    and every load of it uses those strides (``PackLayout``); 3. every launch
    of the kernel passes a view of a whole weight buffer ``[N, K]`` at offset 0
    (``PackSource``).
    """
    name = kernel.sym_name.data
    where = f"pack @{name} arg {arg}"
    if not 0 <= arg < len(kernel.args):
        raise ScheduleError(f"{where}: the kernel has {len(kernel.args)} arguments")
    if tile < 2:
        raise ScheduleError(f"{where}: the tile must be >= 2, got {tile}")
    ptr = kernel.args[arg].type
    assert isinstance(ptr, loop.PtrType)
    footprint = kernel.footprints.data[arg]
    dims, strides = footprint.dims, footprint.stride_exprs
    if kernel.modes[arg] != "r" or ptr.dtype.data != "f32" or len(dims) != 2 \
            or not all(d.is_const for d in dims):
        mode = "read" if kernel.modes[arg] == "r" else "written"
        raise PackLayout(f"{where}: expected a read-only f32 matrix of constant shape, got a "
                         f"{mode} {ptr.dtype.data} [{', '.join(map(str, dims))}]")
    k, n = dims[0].const_value, dims[1].const_value
    if strides != (Expr.const(1), Expr.const(k)):
        raise PackLayout(f"{where}: expected the transposed weight's strides [1, {k}], got "
                         f"[{', '.join(map(str, strides))}]")
    if n % tile:
        raise PackLayout(f"{where}: {n} columns are not whole tiles of {tile}")
    for op in kernel.walk():
        if isinstance(op, loop.LoadOp | loop.StoreOp) and op.ptr is kernel.args[arg] \
                and op.stride_exprs != strides:
            raise PackLayout(f"{where}: a {op.name} uses strides "
                             f"{list(map(str, op.stride_exprs))}, not the footprint's")
    launches = _launches(module, name)
    if not launches:
        raise PackSource(f"{where}: no program launches the kernel, so nothing binds "
                         "its weight")
    for index, launch in enumerate(launches):
        view = launch.views[arg].owner
        assert isinstance(view, loop.ViewOp)
        source = view.source.owner
        assert isinstance(source, loop.BufferOp)
        whole = (view.layout.offset_expr == 0 and source.result.type.dims
                 == (Expr.const(n), Expr.const(k)))
        if source.kind.data != "weight" or not whole:
            what = (f"an {source.kind.data}" if source.kind.data[0] in "aeiou"
                    else f"a {source.kind.data}")
            raise PackSource(f"{where}: launch {index + 1} of {len(launches)} passes a view "
                             f"of {what} buffer"
                             f"{'' if whole else ' that is not the whole [N, K] weight'}")
    return PackPlan(name, arg, tile, k, n)


def pack_kernel(kernel: loop.KernelOp, plan: PackPlan) -> None:
    """Rewrite the kernel's loads of the argument to the packed layout."""
    t, k, n = plan.tile, plan.k, plan.n
    ptr = kernel.args[plan.arg]
    for op in [op for op in kernel.walk() if isinstance(op, loop.LoadOp) and op.ptr is ptr]:
        block = op.parent_block()
        assert block is not None
        tile = arith.ConstantOp(IntegerAttr(t, IndexType()))
        col = op.indices[1]
        outer, inner = arith.DivSIOp(col, tile), arith.RemSIOp(col, tile)
        indices: list[SSAValue] = [outer.result, op.indices[0], inner.result]
        new = loop.LoadOp(ptr, indices, [k * t, t, 1], op.lanes)
        for extra in (tile, outer, inner, new):
            block.insert_op_before(extra, op)
        op.result.replace_all_uses_with(new.result)
        op.detach()
        op.erase()
    fps = list(kernel.footprints.data)
    fps[plan.arg] = loop.FootprintAttr.get([n // t, k, t], [k * t, t, 1])
    kernel.properties["footprints"] = ArrayAttr(fps)


def pack_program(module: ModuleOp, plan: PackPlan) -> None:
    """Point every launch of the kernel at a packed copy of its weight (one
    ``loop.buffer packed`` per weight, shared by all launches)."""
    t, k, n = plan.tile, plan.k, plan.n
    shape = [n // t, k, t]
    for program in [op for op in module.ops if isinstance(op, loop.ProgramOp)]:
        packed: dict[tuple[str, int], loop.BufferOp] = {
            (b.buffer_name.data, b.tile.data): b for b in program.buffers()
            if b.kind.data == "packed" and b.buffer_name is not None and b.tile is not None}
        for launch in program.launches():
            if launch.kernel_name != plan.kernel:
                continue
            view = launch.views[plan.arg].owner
            assert isinstance(view, loop.ViewOp)
            weight = view.source.owner
            assert isinstance(weight, loop.BufferOp)
            assert weight.buffer_name is not None
            key = (weight.buffer_name.data, t)
            if key not in packed:
                buf = loop.BufferOp("packed", loop.BufType.get("f32", shape), key[0], tile=t)
                program.body.block.insert_op_after(buf, weight)
                packed[key] = buf
            new_view = loop.ViewOp(packed[key].result, shape, 0, [k * t, t, 1])
            program.body.block.insert_op_before(new_view, launch)
            launch.operands[plan.arg] = new_view.result
            if not view.result.uses:
                view.detach()
                view.erase()


def pack(module: ModuleOp, kernel: loop.KernelOp, arg: int, tile: int) -> None:
    """``check_pack``, then ``pack_kernel`` and ``pack_program``."""
    plan = check_pack(module, kernel, arg, tile)
    pack_kernel(kernel, plan)
    pack_program(module, plan)

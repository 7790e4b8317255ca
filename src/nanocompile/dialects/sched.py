"""The Schedule dialect: how to run a kernel's loops, as separate IR.

A ``sched.schedule`` names one ``loop.kernel`` and lists directives that
refer to the kernel's ``loop.for`` ops by name (``"d0"``, ``"d1"``, the
reduction loop ``"k"``, concat nests ``"p0d0"``...). The ``apply-schedule``
pass finds the loops by name and transforms them in order; a directive may
name loops that an earlier ``split`` introduced:

    sched.schedule @fused_matmul {
      sched.split "d1" by 32 into "d1o", "d1i"
      sched.split "d0" by 2 into "d0o", "d0i"
      sched.reorder ["d0o", "d1o", "k", "d0i", "d1i"]
      sched.privatize "k"
      sched.unroll "d0i"
      sched.vectorize "d1i" width 8
      sched.parallel "d1o" grain 4
      sched.pack arg 1 tile 8
    }

A schedule is data: it prints, parses, can be written by hand next to the
kernels, and round-trips through plain Python records (``Split``,
``Reorder``, ...) with ``ScheduleOp.from_directives`` and
``ScheduleOp.directives`` so a tuner can generate and replay it.

The verifiers check what the schedule alone decides: names are identifiers,
factors and widths are in range, a split introduces fresh names, and a loop
split away is not named again. Whether the named loops exist in the kernel,
and whether a transformation is legal there, is the applier's to check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, NoTerminator
from xdsl.utils.exceptions import VerifyException

from nanocompile.ir.checks import OpVerifyException

VECTOR_WIDTHS = (4, 8, 16)
"""f32 lanes of SSE, AVX2 and AVX-512 registers."""

SLP_WIDTHS = (4,)
"""Lanes of ``sched.slp``'s vectors (an SSE register: schedule/slp.py)."""

PREFETCH_LOCALITIES = (0, 1, 2, 3)
"""``sched.prefetch``'s cache levels, numbered as ``loop.prefetch`` numbers them."""

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _i64(value: int) -> IntegerAttr:
    return IntegerAttr(value, 64)


def _check_loop_name(op: IRDLOperation, name: str) -> None:
    if not _IDENTIFIER.fullmatch(name):
        raise VerifyException(f"{op.name}: expected a loop name made of letters, digits "
                              f"and '_' (not starting with a digit), got {name!r}")


def _culprit(error: VerifyException, op: Operation) -> OpVerifyException:
    """``error`` blaming ``op``, so nc-opt points at the directive; an error that
    already blames an op keeps it."""
    if isinstance(error, OpVerifyException):
        return error
    blamed = OpVerifyException(str(error), op)
    for note in getattr(error, "__notes__", ()):
        blamed.add_note(note)
    return blamed


# --------------------------------------------------------------------------
# The schedule
# --------------------------------------------------------------------------


@irdl_op_definition
class ScheduleOp(IRDLOperation):
    """The directives for one kernel, applied in order.

    ``sched.schedule @fused_matmul { sched.split "d1" by 32 into "d1o", "d1i" }``

    ``kernel`` refers to the ``loop.kernel`` of that name (it is a reference,
    not a symbol definition, so a schedule may sit next to its kernel).
    """

    name = "sched.schedule"
    kernel = prop_def(SymbolRefAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator(), HasParent(ModuleOp))

    def __init__(self, kernel: str, body: Block | Sequence[DirectiveOp] = ()) -> None:
        block = body if isinstance(body, Block) else Block(list(body))
        super().__init__(properties={"kernel": SymbolRefAttr(kernel)}, regions=[Region(block)])

    @staticmethod
    def from_directives(kernel: str, directives: Sequence[Directive]) -> ScheduleOp:
        """A schedule for ``kernel`` made of these records, in order."""
        return ScheduleOp(kernel, [d.to_op() for d in directives])

    @property
    def kernel_name(self) -> str:
        return self.kernel.root_reference.data

    @property
    def block(self) -> Block:
        return self.body.block

    def directive_ops(self) -> list[DirectiveOp]:
        return [op for op in self.block.ops if isinstance(op, DirectiveOp)]

    def directives(self) -> list[Directive]:
        """The directives as plain records, in order."""
        return [op.to_directive() for op in self.directive_ops()]

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.kernel_name)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)

    @classmethod
    def parse(cls, parser: Parser) -> ScheduleOp:
        kernel = parser.parse_symbol_name().data
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region()
        op = cls(kernel, region.detach_block(0) if region.blocks else Block())
        if attrs is not None:
            op.attributes |= attrs.data
        return op

    def verify_(self) -> None:
        where = f"sched.schedule @{self.kernel_name}"
        if self.kernel.nested_references.data:
            raise VerifyException(f"{where}: expected a flat kernel name, got {self.kernel}")
        split_into: dict[str, tuple[str, str]] = {}
        distributed: set[str] = set()
        named: set[str] = set()
        prefetched = False
        for op in self.block.ops:
            if not isinstance(op, DirectiveOp):
                raise _culprit(VerifyException(
                    f"{where}: expected only sched directives, got {op.name}"), op)
            _verify_directive(op)
            if prefetched and not isinstance(op, PrefetchOp):
                raise _culprit(VerifyException(
                    f"{where}: {op.name} follows a sched.prefetch; prefetches come last (a "
                    "loop directive would drop them, a pack would move the loads)"), op)
            prefetched = prefetched or isinstance(op, PrefetchOp)
            _check_not_split_away(where, op, split_into)
            _check_not_distributed(where, op, distributed)
            if isinstance(op, SplitOp):
                _check_fresh(where, op, split_into, named)
                split_into[op.loop.data] = (op.outer.data, op.inner.data)
                named |= {op.outer.data, op.inner.data}
            if isinstance(op, DistributeOp):
                distributed.add(op.loop.data)
            named |= set(op.loop_names())


def _verify_directive(op: DirectiveOp) -> None:
    """Verify ``op`` on its own first, so the checks across directives read
    well-formed properties (the parent is verified before its children)."""
    try:
        op.verify(verify_nested_ops=False)
    except VerifyException as e:
        raise _culprit(e, op) from None


def _check_not_split_away(where: str, op: DirectiveOp,
                          split_into: dict[str, tuple[str, str]]) -> None:
    for name in op.loop_names():
        if name not in split_into:
            continue
        outer, inner = split_into[name]
        raise _culprit(VerifyException(
            f"{where}: {op.name} names loop '{name}', but loop '{name}' was split into "
            f"'{outer}', '{inner}' earlier"), op)


def _check_not_distributed(where: str, op: DirectiveOp, distributed: set[str]) -> None:
    for name in op.loop_names():
        if name in distributed:
            raise _culprit(VerifyException(
                f"{where}: {op.name} names loop '{name}', but loop '{name}' was distributed "
                f"into '{name}_g0', '{name}_g1', ... earlier"), op)


def _check_fresh(where: str, op: SplitOp, split_into: dict[str, tuple[str, str]],
                 named: set[str]) -> None:
    introduced = {n for pair in split_into.values() for n in pair}
    for new in (op.outer.data, op.inner.data):
        if new in introduced:
            raise _culprit(VerifyException(
                f"{where}: split of '{op.loop.data}' introduces '{new}', which an earlier "
                "split already introduced"), op)
        if new in named:
            raise _culprit(VerifyException(
                f"{where}: split of '{op.loop.data}' introduces '{new}', a name used "
                "earlier in the schedule"), op)


# --------------------------------------------------------------------------
# Directives
# --------------------------------------------------------------------------


class DirectiveOp(IRDLOperation):
    """Base of the directives: they live in a ``sched.schedule`` and name loops."""

    traits = traits_def(HasParent(ScheduleOp))

    def loop_names(self) -> tuple[str, ...]:
        """The loops this directive refers to (not the ones it introduces)."""
        return ()

    def to_directive(self) -> Directive:
        """The directive as a plain record. Every directive op overrides it
        (test_sched_dialect checks each registered one)."""
        raise TypeError(f"{type(self).__name__} ({self.name}) does not define to_directive()")


class _LoopDirectiveOp(DirectiveOp):
    """A directive on one loop, stored in the ``loop`` property."""

    loop = prop_def(StringAttr)

    def loop_names(self) -> tuple[str, ...]:
        return (self.loop.data,)

    def verify_(self) -> None:
        _check_loop_name(self, self.loop.data)


@irdl_op_definition
class SplitOp(_LoopDirectiveOp):
    """Split a loop into an outer loop over tiles and an inner loop within one.

    ``sched.split "d1" by 32 into "d1o", "d1i"``: ``d1 = 32 * d1o + d1i``;
    the last tile is shorter when the extent is not a multiple of 32. With
    ``peel``, the tiles are all whole (``d1i`` has a constant trip count) and
    the remainder runs in a separate loop ``d1_tail``.
    """

    name = "sched.split"
    factor = prop_def(IntegerAttr[I64])
    outer = prop_def(StringAttr)
    inner = prop_def(StringAttr)
    peel = opt_prop_def(UnitAttr)
    assembly_format = "$loop `by` $factor `into` $outer `,` $inner (`peel` $peel^)? attr-dict"

    def __init__(self, loop: str, factor: int, outer: str, inner: str,
                 peel: bool = False) -> None:
        props: dict[str, Attribute] = {
            "loop": StringAttr(loop), "factor": _i64(factor), "outer": StringAttr(outer),
            "inner": StringAttr(inner)}
        if peel:
            props["peel"] = UnitAttr()
        super().__init__(properties=props)

    def to_directive(self) -> Split:
        return Split(self.loop.data, self.factor.value.data, self.outer.data, self.inner.data,
                     self.peel is not None)

    def verify_(self) -> None:
        for name in (self.loop.data, self.outer.data, self.inner.data):
            _check_loop_name(self, name)
        factor = self.factor.value.data
        if factor < 2:
            raise VerifyException(f"sched.split \"{self.loop.data}\": expected a factor "
                                  f">= 2, got {factor}")
        names = [self.loop.data, self.outer.data, self.inner.data]
        if len(set(names)) != 3:
            raise VerifyException(f"sched.split \"{self.loop.data}\": expected three distinct "
                                  f"names (loop, outer, inner), got {names}")


@irdl_op_definition
class ReorderOp(DirectiveOp):
    """Permute perfectly nested loops: the listed loops, outermost first.

    ``sched.reorder ["d0o", "d1o", "k", "d0i", "d1i"]``
    """

    name = "sched.reorder"
    loops = prop_def(ArrayAttr[StringAttr])
    assembly_format = "$loops attr-dict"

    def __init__(self, loops: Sequence[str]) -> None:
        super().__init__(properties={"loops": ArrayAttr([StringAttr(n) for n in loops])})

    def loop_names(self) -> tuple[str, ...]:
        return tuple(n.data for n in self.loops.data)

    def to_directive(self) -> Reorder:
        return Reorder(self.loop_names())

    def verify_(self) -> None:
        names = self.loop_names()
        if len(names) < 2:
            raise VerifyException(f"sched.reorder: expected at least 2 loops, got {list(names)}")
        for name in names:
            _check_loop_name(self, name)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise VerifyException(f"sched.reorder: expected distinct loops, got {dupes} "
                                  f"more than once in {list(names)}")


@irdl_op_definition
class UnrollOp(_LoopDirectiveOp):
    """Unroll a loop fully, or by ``factor`` (the body repeated, the step scaled).

    ``sched.unroll "d0i"`` (full), ``sched.unroll "k" by 4`` (partial)
    """

    name = "sched.unroll"
    factor = opt_prop_def(IntegerAttr[I64])
    assembly_format = "$loop (`by` $factor^)? attr-dict"

    def __init__(self, loop: str, factor: int | None = None) -> None:
        props: dict[str, Attribute] = {"loop": StringAttr(loop)}
        if factor is not None:
            props["factor"] = _i64(factor)
        super().__init__(properties=props)

    @property
    def factor_value(self) -> int | None:
        """The partial unroll factor; ``None`` for a full unroll."""
        return None if self.factor is None else self.factor.value.data

    def to_directive(self) -> Unroll:
        return Unroll(self.loop.data, self.factor_value)

    def verify_(self) -> None:
        super().verify_()
        if self.factor_value is not None and self.factor_value < 2:
            raise VerifyException(f"sched.unroll \"{self.loop.data}\": expected a factor "
                                  f">= 2 (omit it for a full unroll), got {self.factor_value}")


@irdl_op_definition
class PrivatizeOp(_LoopDirectiveOp):
    """Keep the accumulators of the loops nested in this loop in registers.

    ``sched.privatize "k"``: each accumulator that the loops inside ``k`` update
    becomes one of ``k``'s loop-carried values, stored once after ``k`` ends.
    """

    name = "sched.privatize"
    assembly_format = "$loop attr-dict"

    def __init__(self, loop: str) -> None:
        super().__init__(properties={"loop": StringAttr(loop)})

    def to_directive(self) -> Privatize:
        return Privatize(self.loop.data)


@irdl_op_definition
class DistributeOp(_LoopDirectiveOp):
    """Split a loop into one loop per independent group of its carried values.

    ``sched.distribute "ki"``: the groups' loops ``ki_g0``, ``ki_g1``, ... run
    one after the other (schedule/distribute.py); ``ki`` is gone after it.
    """

    name = "sched.distribute"
    assembly_format = "$loop attr-dict"

    def __init__(self, loop: str) -> None:
        super().__init__(properties={"loop": StringAttr(loop)})

    def to_directive(self) -> Distribute:
        return Distribute(self.loop.data)


@irdl_op_definition
class VectorizeOp(_LoopDirectiveOp):
    """Run ``width`` iterations of a loop as the lanes of one f32 vector.

    ``sched.vectorize "d1i" width 8`` (AVX2; 16 for AVX-512, 4 for SSE)
    """

    name = "sched.vectorize"
    width = prop_def(IntegerAttr[I64])
    assembly_format = "$loop `width` $width attr-dict"

    def __init__(self, loop: str, width: int) -> None:
        super().__init__(properties={"loop": StringAttr(loop), "width": _i64(width)})

    def to_directive(self) -> Vectorize:
        return Vectorize(self.loop.data, self.width.value.data)

    def verify_(self) -> None:
        super().verify_()
        width = self.width.value.data
        if width not in VECTOR_WIDTHS:
            raise VerifyException(f"sched.vectorize \"{self.loop.data}\": expected a width "
                                  f"in {list(VECTOR_WIDTHS)}, got {width}")


@irdl_op_definition
class SlpOp(_LoopDirectiveOp):
    """Run the jammed copies of the epilogue after a loop as vector lanes.

    ``sched.slp "k" width 4``: after ``privatize``, each group of 4 copies of
    the code after ``k`` (lanesums, bias, SwiGLU, stores) becomes one
    ``vector<4xf32>`` computation (schedule/slp.py)
    """

    name = "sched.slp"
    width = prop_def(IntegerAttr[I64])
    assembly_format = "$loop `width` $width attr-dict"

    def __init__(self, loop: str, width: int) -> None:
        super().__init__(properties={"loop": StringAttr(loop), "width": _i64(width)})

    def to_directive(self) -> Slp:
        return Slp(self.loop.data, self.width.value.data)

    def verify_(self) -> None:
        super().verify_()
        width = self.width.value.data
        if width not in SLP_WIDTHS:
            raise VerifyException(f"sched.slp \"{self.loop.data}\": expected a width in "
                                  f"{list(SLP_WIDTHS)}, got {width}")


@irdl_op_definition
class ParallelOp(_LoopDirectiveOp):
    """Run a loop's iterations on the thread pool, at least ``grain`` per chunk.

    ``sched.parallel "d1o" grain 4``; ``sched.parallel "d0"`` means grain 1.
    """

    name = "sched.parallel"
    grain = prop_def(IntegerAttr[I64], default_value=_i64(1))
    assembly_format = "$loop (`grain` $grain^)? attr-dict"

    def __init__(self, loop: str, grain: int = 1) -> None:
        super().__init__(properties={"loop": StringAttr(loop), "grain": _i64(grain)})

    def to_directive(self) -> Parallel:
        return Parallel(self.loop.data, self.grain.value.data)

    def verify_(self) -> None:
        super().verify_()
        grain = self.grain.value.data
        if grain < 1:
            raise VerifyException(f"sched.parallel \"{self.loop.data}\": expected a grain "
                                  f">= 1, got {grain}")


@irdl_op_definition
class PackOp(DirectiveOp):
    """Lay out a weight argument in tiles of ``tile`` adjacent output columns.

    ``sched.pack arg 1 tile 8``: argument #1 of the kernel (a ``[K, N]`` matrix)
    is stored as ``[N / 8, K, 8]`` so one vector load reads 8 columns of a row.
    """

    name = "sched.pack"
    arg = prop_def(IntegerAttr[I64])
    tile = prop_def(IntegerAttr[I64])
    assembly_format = "`arg` $arg `tile` $tile attr-dict"

    def __init__(self, arg: int, tile: int) -> None:
        super().__init__(properties={"arg": _i64(arg), "tile": _i64(tile)})

    def to_directive(self) -> Pack:
        return Pack(self.arg.value.data, self.tile.value.data)

    def verify_(self) -> None:
        arg, tile = self.arg.value.data, self.tile.value.data
        if arg < 0:
            raise VerifyException(f"sched.pack: expected an argument index >= 0, got {arg}")
        if tile < 2:
            raise VerifyException(f"sched.pack arg {arg}: expected a tile >= 2, got {tile}")


@irdl_op_definition
class PrefetchOp(DirectiveOp):
    """Prefetch a streamed argument ahead of its loads (schedule/prefetch.py).

    ``sched.prefetch arg 1 dim 2 ahead 512 locality 2``: before every load of
    argument #1, ask for the element 512 further along its index #2 into the
    cache level ``locality`` (gcc's ``__builtin_prefetch`` numbering: 3 every
    level, 2 the second and beyond, 1 the last, 0 none). Only other prefetches
    may follow it in a schedule.

    ``sched.prefetch arg 1 dim 2 ahead 512 locality 2 within "d0_tail"``: only
    before the loads nested in a loop named ``d0_tail`` (a projection's
    leftover rows, where decode streams the weight).
    """

    name = "sched.prefetch"
    arg = prop_def(IntegerAttr[I64])
    dim = prop_def(IntegerAttr[I64])
    ahead = prop_def(IntegerAttr[I64])
    locality = prop_def(IntegerAttr[I64])
    within = opt_prop_def(StringAttr)
    assembly_format = ("`arg` $arg `dim` $dim `ahead` $ahead `locality` $locality "
                       "(`within` $within^)? attr-dict")

    def __init__(self, arg: int, dim: int, ahead: int, locality: int,
                 within: str | None = None) -> None:
        props: dict[str, Attribute] = {"arg": _i64(arg), "dim": _i64(dim),
                                       "ahead": _i64(ahead), "locality": _i64(locality)}
        if within is not None:
            props["within"] = StringAttr(within)
        super().__init__(properties=props)

    def loop_names(self) -> tuple[str, ...]:
        return () if self.within is None else (self.within.data,)

    def to_directive(self) -> Prefetch:
        return Prefetch(self.arg.value.data, self.dim.value.data, self.ahead.value.data,
                        self.locality.value.data,
                        None if self.within is None else self.within.data)

    def verify_(self) -> None:
        arg, dim = self.arg.value.data, self.dim.value.data
        ahead, locality = self.ahead.value.data, self.locality.value.data
        if arg < 0:
            raise VerifyException(f"sched.prefetch: expected an argument index >= 0, got {arg}")
        if dim < 0:
            raise VerifyException(f"sched.prefetch arg {arg}: expected an index number >= 0, "
                                  f"got {dim}")
        if ahead < 1:
            raise VerifyException(f"sched.prefetch arg {arg}: expected ahead >= 1, got {ahead}")
        if locality not in PREFETCH_LOCALITIES:
            raise VerifyException(f"sched.prefetch arg {arg}: expected a locality in "
                                  f"{list(PREFETCH_LOCALITIES)}, got {locality}")
        if self.within is None:
            return
        if not self.within.data:
            raise VerifyException(f"sched.prefetch arg {arg}: expected a loop name after "
                                  "'within', got an empty one (omit 'within' to prefetch "
                                  "before every load)")
        _check_loop_name(self, self.within.data)


# --------------------------------------------------------------------------
# Directives as plain records (what a tuner generates and replays)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    loop: str
    factor: int
    outer: str
    inner: str
    peel: bool = False

    def to_op(self) -> SplitOp:
        return SplitOp(self.loop, self.factor, self.outer, self.inner, self.peel)


@dataclass(frozen=True)
class Reorder:
    loops: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "loops", tuple(self.loops))

    def to_op(self) -> ReorderOp:
        return ReorderOp(self.loops)


@dataclass(frozen=True)
class Unroll:
    loop: str
    factor: int | None = None  # None: full unroll

    def to_op(self) -> UnrollOp:
        return UnrollOp(self.loop, self.factor)


@dataclass(frozen=True)
class Privatize:
    loop: str

    def to_op(self) -> PrivatizeOp:
        return PrivatizeOp(self.loop)


@dataclass(frozen=True)
class Distribute:
    loop: str

    def to_op(self) -> DistributeOp:
        return DistributeOp(self.loop)


@dataclass(frozen=True)
class Vectorize:
    loop: str
    width: int

    def to_op(self) -> VectorizeOp:
        return VectorizeOp(self.loop, self.width)


@dataclass(frozen=True)
class Slp:
    loop: str
    width: int

    def to_op(self) -> SlpOp:
        return SlpOp(self.loop, self.width)


@dataclass(frozen=True)
class Parallel:
    loop: str
    grain: int = 1

    def to_op(self) -> ParallelOp:
        return ParallelOp(self.loop, self.grain)


@dataclass(frozen=True)
class Pack:
    arg: int
    tile: int

    def to_op(self) -> PackOp:
        return PackOp(self.arg, self.tile)


@dataclass(frozen=True)
class Prefetch:
    arg: int
    dim: int
    ahead: int
    locality: int = 2
    within: str | None = None  # None: before every load of the argument

    def to_op(self) -> PrefetchOp:
        return PrefetchOp(self.arg, self.dim, self.ahead, self.locality, self.within)


Directive = (Split | Reorder | Unroll | Privatize | Distribute | Vectorize | Slp | Parallel
             | Pack | Prefetch)


Sched = Dialect(
    "sched",
    [
        ScheduleOp,
        SplitOp, ReorderOp, UnrollOp, PrivatizeOp, DistributeOp, VectorizeOp, SlpOp, ParallelOp,
        PackOp, PrefetchOp,
    ],
    [],
)

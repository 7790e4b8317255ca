"""The Loop dialect: kernels as named loop nests over strided memory, and the
program that launches them.

Two levels live in one module after ``lower-graph-to-loop``:

* ``loop.kernel`` functions (one per distinct kernel): typed pointer
  arguments, the graph's size symbols read with ``loop.sym``, named
  ``loop.for`` nests with optional loop-carried values, ``loop.load`` /
  ``loop.store`` through strides (possibly symbolic), scalar arithmetic from
  xDSL's ``arith`` and ``math``, and ``loop.check`` for bad data (an early
  exit with an error code, e.g. a gather id out of range);
* one ``loop.program`` per graph: its buffers (inputs, weights, outputs,
  constants, temporaries), strided views of them, and the ordered
  ``loop.launch`` of kernels on views.

    loop.kernel @add_2d(%out: !loop.ptr<f32>, %a: !loop.ptr<f32>, %b: !loop.ptr<f32>)
        syms ["seq"] access ["w", "r", "r"] {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %n = loop.sym "seq"
      %c896 = arith.constant 896 : index
      loop.for "d0" %i = %c0 to %n {
        loop.for "d1" %j = %c0 to %c896 {
          %x = loop.load %a[%i, %j] strides [896, 1] : f32
          ...
          loop.store %s, %out[%i, %j] strides [896, 1] : f32
        }
      }
    }

Every kernel argument also carries the footprint it reads or writes (a view
shape and strides), so bytes moved can be counted from the IR alone.

This module defines the dialect and its kernel-level ops; the types are in
``types.py``, the program-level ops in ``program.py`` and the vector
ops in ``vector.py``, all re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntAttr,
    StringAttr,
    VectorType,
)
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, IsTerminator, NoTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects.common.attributes import DimAttr
from nanocompile.dialects.loop.program import (
    BUFFER_KINDS,
    BufferOp,
    LaunchOp,
    OutputOp,
    ProgramOp,
    RequireOp,
    ViewOp,
)
from nanocompile.dialects.loop.types import (
    BufType,
    FootprintAttr,
    LayoutAttr,
    PtrType,
    ViewType,
    _dims_attr,
    _dims_text,
    _parse_dims,
    dtype_of_scalar,
    scalar_type,
)
from nanocompile.dialects.loop.vector import (
    DOT_GROUP,
    LANE_COUNTS,
    VECTOR_OPS,
    DotI8Op,
    ExtractOp,
    FoldHalfOp,
    HalfOp,
    LaneOrder,
    LaneSumOp,
    LaneSumsOp,
    SplatOp,
    VCmpOp,
    VFPToSIOp,
    VPackOp,
    VSelectOp,
    VSIToFPOp,
    parse_tree,
    tree_attr,
    tree_error,
    tree_steps,
    tree_text,
)
from nanocompile.ir.symbolic import Expr, ExprLike

# The dialect is defined here with its kernel-level ops; its types, the
# program-level ops and the vector ops live in types.py, program.py and
# vector.py and are re-exported, so ``loop.BufferOp`` etc. keep working.
__all__ = [
    "BUFFER_KINDS",
    "DOT_GROUP",
    "LANE_COUNTS",
    "PREFETCH_LOCALITIES",
    "BufType",
    "BufferOp",
    "CheckOp",
    "DotI8Op",
    "ExtractOp",
    "FoldHalfOp",
    "FootprintAttr",
    "ForOp",
    "HalfOp",
    "IfOp",
    "KernelOp",
    "LaneOrder",
    "LaneSumOp",
    "LaneSumsOp",
    "LaunchOp",
    "LayoutAttr",
    "LoadOp",
    "Loop",
    "OutputOp",
    "PrefetchOp",
    "ProgramOp",
    "PtrType",
    "RequireOp",
    "SplatOp",
    "StoreOp",
    "SymOp",
    "VCmpOp",
    "VFPToSIOp",
    "VPackOp",
    "VSIToFPOp",
    "VSelectOp",
    "ViewOp",
    "ViewType",
    "YieldOp",
    "dtype_of_scalar",
    "scalar_type",
    "tree_steps",
]

# --------------------------------------------------------------------------
# Kernel-level ops
# --------------------------------------------------------------------------


def _print_access(printer: Printer, ptr: SSAValue, indices: Sequence[SSAValue],
                  strides: Sequence[Expr], value_type: Attribute) -> None:
    """``%p[%i, %j] strides [896, 1] : f32``"""
    printer.print_operand(ptr)
    printer.print_string("[")
    printer.print_list(indices, printer.print_operand)
    printer.print_string(f"] strides {_dims_text(strides)} : ")
    printer.print_attribute(value_type)


def _types_text(types: Sequence[Attribute]) -> str:
    """``[f32, index]``: types as IR text, not Python reprs."""
    return "[" + ", ".join(str(t) for t in types) + "]"


def _parse_access(parser: Parser) -> tuple[SSAValue, list[SSAValue], list[Expr], Attribute]:
    ptr = parser.parse_unresolved_operand()
    idx = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                            parser.parse_unresolved_operand)
    parser.parse_keyword("strides")
    strides = _parse_dims(parser)
    parser.parse_punctuation(":")
    pos = parser.pos
    value_type = parser.parse_type()
    element = value_type.element_type if isinstance(value_type, VectorType) else value_type
    try:
        dtype = dtype_of_scalar(element)
    except VerifyException as e:
        parser.raise_error(str(e), pos, parser.pos)
    ptr_v = parser.resolve_operand(ptr, PtrType.get(dtype))
    return ptr_v, [parser.resolve_operand(i, IndexType()) for i in idx], strides, value_type


@irdl_op_definition
class SymOp(IRDLOperation):
    """The run-time value of a size symbol: ``%n = loop.sym "seq"``."""

    name = "loop.sym"
    symbol = prop_def(StringAttr)
    result = result_def(IndexType)
    traits = traits_def(Pure())
    assembly_format = "$symbol attr-dict"

    def __init__(self, symbol: str) -> None:
        super().__init__(properties={"symbol": StringAttr(symbol)}, result_types=[IndexType()])

    def verify_(self) -> None:
        kernel = self.parent_op()
        while kernel is not None and not isinstance(kernel, KernelOp):
            kernel = kernel.parent_op()
        if kernel is not None and self.symbol.data not in kernel.symbols:
            raise VerifyException(
                f"loop.sym: '{self.symbol.data}' is not a symbol of kernel "
                f"@{kernel.sym_name.data} (symbols: {list(kernel.symbols)})"
            )


class _MemoryOp(IRDLOperation):
    """Shared parts of load and store: a pointer, indices and one stride each."""

    strides = prop_def(ArrayAttr[DimAttr])

    @property
    def stride_exprs(self) -> tuple[Expr, ...]:
        return tuple(d.data for d in self.strides.data)

    def _check(self, ptr: SSAValue, indices: Sequence[SSAValue], value_type: Attribute) -> None:
        if not isinstance(ptr.type, PtrType):
            raise VerifyException(f"{self.name}: expected a !loop.ptr, got {ptr.type}")
        if len(indices) != len(self.strides.data):
            raise VerifyException(
                f"{self.name}: {len(indices)} indices but {len(self.strides.data)} strides"
            )
        for i, idx in enumerate(indices):
            if not isinstance(idx.type, IndexType):
                raise VerifyException(f"{self.name}: index #{i} has type {idx.type}, "
                                      "expected index")
        want = scalar_type(ptr.type.dtype.data)
        element = value_type.element_type if isinstance(value_type, VectorType) else value_type
        if element != want:
            raise VerifyException(f"{self.name}: a !loop.ptr<{ptr.type.dtype.data}> holds "
                                  f"{want}, not {value_type}")
        # f32 vectors, loads of bf16 and i8 vectors (only ever widened to f32) and
        # stores of i8 vectors (kernel B's quantized activations)
        vector_dtypes = ("f32", "bf16", "i8") if isinstance(self, LoadOp) else ("f32", "i8")
        if isinstance(value_type, VectorType) and (
                len(value_type.get_shape()) != 1 or ptr.type.dtype.data not in vector_dtypes):
            raise VerifyException(f"{self.name}: vector accesses are 1-d f32 vectors, "
                                  f"not {value_type}")


@irdl_op_definition
class LoadOp(_MemoryOp):
    """``%x = loop.load %a[%i, %j] strides [896, 1] : f32`` reads
    ``a[i*896 + j*1]``; with a ``vector<8xf32>`` type it reads the 8
    consecutive elements from there (lane ``l`` from ``a[i*896 + j + l]``)."""

    name = "loop.load"
    ptr = operand_def(PtrType)
    indices = var_operand_def(IndexType)
    result = result_def()

    def __init__(self, ptr: SSAValue, indices: Sequence[SSAValue],
                 strides: Sequence[ExprLike], lanes: int | None = None) -> None:
        assert isinstance(ptr.type, PtrType)
        element = scalar_type(ptr.type.dtype.data)
        super().__init__(operands=[ptr, list(indices)],
                         properties={"strides": _dims_attr(strides)},
                         result_types=[element if lanes is None
                                       else VectorType(element, [lanes])])

    @property
    def lanes(self) -> int | None:
        t = self.result.type
        return t.get_shape()[0] if isinstance(t, VectorType) else None

    def verify_(self) -> None:
        self._check(self.ptr, self.indices, self.result.type)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_access(printer, self.ptr, self.indices, self.stride_exprs, self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        ptr, indices, strides, value_type = _parse_access(parser)
        # the type as written (the verifier rejects one the pointer cannot hold)
        return cls.build(operands=[ptr, indices], properties={"strides": _dims_attr(strides)},
                         result_types=[value_type])


@irdl_op_definition
class StoreOp(_MemoryOp):
    """``loop.store %v, %out[%i, %j] strides [896, 1] : f32``"""

    name = "loop.store"
    value = operand_def()
    ptr = operand_def(PtrType)
    indices = var_operand_def(IndexType)

    def __init__(self, value: SSAValue, ptr: SSAValue, indices: Sequence[SSAValue],
                 strides: Sequence[ExprLike]) -> None:
        super().__init__(operands=[value, ptr, list(indices)],
                         properties={"strides": _dims_attr(strides)})

    def verify_(self) -> None:
        self._check(self.ptr, self.indices, self.value.type)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.value)
        printer.print_string(", ")
        _print_access(printer, self.ptr, self.indices, self.stride_exprs, self.value.type)

    @classmethod
    def parse(cls, parser: Parser) -> StoreOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        ptr, indices, strides, value_type = _parse_access(parser)
        return cls(parser.resolve_operand(value, value_type), ptr, indices, strides)


PREFETCH_LOCALITIES = (0, 1, 2, 3)
"""``loop.prefetch``'s cache levels, as gcc's ``__builtin_prefetch`` numbers them:
3 keeps the line in every level (x86 ``prefetcht0``), 2 in the second level
and beyond (``prefetcht1``), 1 in the last (``prefetcht2``), 0 not at all
(``prefetchnta``)."""


@irdl_op_definition
class PrefetchOp(_MemoryOp):
    """``loop.prefetch %a[%i, %j] strides [896, 1] : f32 locality 2`` asks the
    memory system for the cache line holding ``a[i*896 + j*1]`` ahead of a
    load. It reads nothing a kernel computes with and never faults (the C
    target prints ``__builtin_prefetch``), so its address may lie beyond the
    argument's footprint; it is a hint that changes no value, and moves no
    counted byte (the footprints count what the loads read)."""

    name = "loop.prefetch"
    ptr = operand_def(PtrType)
    indices = var_operand_def(IndexType)
    locality = prop_def(IntAttr)

    def __init__(self, ptr: SSAValue, indices: Sequence[SSAValue],
                 strides: Sequence[ExprLike], locality: int) -> None:
        super().__init__(operands=[ptr, list(indices)],
                         properties={"strides": _dims_attr(strides),
                                     "locality": IntAttr(locality)})

    def verify_(self) -> None:
        assert isinstance(self.ptr.type, PtrType)
        self._check(self.ptr, self.indices, scalar_type(self.ptr.type.dtype.data))
        if self.locality.data not in PREFETCH_LOCALITIES:
            raise VerifyException(f"loop.prefetch: expected a locality in "
                                  f"{list(PREFETCH_LOCALITIES)}, got {self.locality.data}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        assert isinstance(self.ptr.type, PtrType)
        _print_access(printer, self.ptr, self.indices, self.stride_exprs,
                      scalar_type(self.ptr.type.dtype.data))
        printer.print_string(f" locality {self.locality.data}")

    @classmethod
    def parse(cls, parser: Parser) -> PrefetchOp:
        ptr, indices, strides, value_type = _parse_access(parser)
        if isinstance(value_type, VectorType):
            parser.raise_error("loop.prefetch: expected the element type, not a vector")
        parser.parse_keyword("locality")
        locality = parser.parse_integer(allow_boolean=False, allow_negative=False)
        return cls(ptr, indices, strides, locality)


@irdl_op_definition
class CheckOp(IRDLOperation):
    """Early exit with an error code when ``cond`` is false:
    ``loop.check %ok, 1, "gather: id out of range"``."""

    name = "loop.check"
    cond = operand_def()
    code = prop_def(IntAttr)
    message = prop_def(StringAttr)

    def __init__(self, cond: SSAValue, code: int, message: str) -> None:
        super().__init__(operands=[cond],
                         properties={"code": IntAttr(code), "message": StringAttr(message)})

    def verify_(self) -> None:
        if self.code.data <= 0:
            raise VerifyException(f"loop.check: error code must be positive, got {self.code.data}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.cond)
        printer.print_string(f", {self.code.data}, ")
        printer.print_string_literal(self.message.data)

    @classmethod
    def parse(cls, parser: Parser) -> CheckOp:
        from xdsl.dialects.builtin import i1

        cond = parser.resolve_operand(parser.parse_unresolved_operand(), i1)
        parser.parse_punctuation(",")
        code = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(",")
        return cls(cond, code, parser.parse_str_literal())


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Ends a ``loop.for`` body, passing the loop-carried values on."""

    name = "loop.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator())
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue) -> None:
        super().__init__(operands=[list(values)])


@irdl_op_definition
class ForOp(IRDLOperation):
    """A named loop ``for (i = lb; i < ub; i += step)`` with loop-carried values.

    ``%s = loop.for "k" %k = %c0 to %c896 step 1 iter(%acc = %zero) -> (f32) {
    ... loop.yield %next : f32 }``. The name is what schedules refer to.

    A *lanes* loop (``... to %c896 lanes 16 iter(...)``, step 1) fixes the order
    of a reduction: each carried value is ``L`` partial values (lanes), every
    lane starts at the init, iteration ``i`` reads and updates lane
    ``(i - lb) mod L`` only, and the loop's result is the lanes' halving tree
    ``t[j] = p[j] + p[j + L/2]`` for ``j < L/2``, then on ``t`` with ``L/4``, ...
    down to one value (``arith.addf`` on the carried type). ``L`` is 2, 4, 8,
    16 or 32. The lowering chooses it for matmuls (``k = ko * 16 + ki``: 16
    partial sums, each an FMA chain in ``k`` order); schedules keep it (a
    schedule may turn the lanes into vector lanes, ``vectorize``, which is the
    same order), so every schedule of a kernel gives the same bits.

    Two optional properties state other orders (``vector.LaneOrder``):

    * ``tree [b0, b1, ...]``: the order in which the bits of the lane index are
      combined (``vector.py``'s lane trees; absent: the halving tree
      ``[log2 L - 1, ..., 0]``);
    * ``tail R`` (a power of two dividing ``L``; absent: ``L``): with ``n = ub
      - lb`` and ``J = L * floor(n / L)``, iteration ``j = i - lb`` updates
      lane ``j mod L`` while ``j < J``, then lane ``(j - J) mod R``.

    spec §5's kernel A (``graph.matmul ... order = "blocks32"``) over
    ``[0, K8)``, ``K8 = K - K mod 8``: ``loop.for "k" %k = %c0 to %cK8 lanes
    32 tail 8 tree [3, 4, 2, 0, 1] iter(...)``: four chains of 8 lanes per
    block of 32, the groups of 8 after the last block into lanes 0..7.
    """

    name = "loop.for"
    lb = operand_def(IndexType)
    ub = operand_def(IndexType)
    inits = var_operand_def()
    loop_name = prop_def(StringAttr, prop_name="name")
    step = prop_def(IntAttr)
    parallel = opt_prop_def(IntAttr)  # the grain, when iterations run on the thread pool
    lanes = opt_prop_def(IntAttr)  # a lanes reduction: L partial values per carried value
    tree = opt_prop_def(ArrayAttr[IntAttr])  # a lanes loop's tree (default: halving)
    tail = opt_prop_def(IntAttr)  # a lanes loop's lanes after the whole groups (default: L)
    res = var_result_def()
    body = region_def("single_block")

    def __init__(self, name: str, lb: SSAValue, ub: SSAValue, body: Block,
                 inits: Sequence[SSAValue] = (), step: int = 1,
                 lanes: int | None = None, tree: Sequence[int] | None = None,
                 tail: int | None = None) -> None:
        if not isinstance(body.last_op, YieldOp):
            body.add_op(YieldOp())
        props: dict[str, Attribute] = {"name": StringAttr(name), "step": IntAttr(step)}
        if lanes is not None:
            props["lanes"] = IntAttr(lanes)
        if tree is not None:
            props["tree"] = tree_attr(tree)
        if tail is not None:
            props["tail"] = IntAttr(tail)
        super().__init__(operands=[lb, ub, list(inits)], properties=props,
                         result_types=[[v.type for v in inits]], regions=[Region(body)])

    @property
    def iv(self) -> SSAValue:
        return self.body.block.args[0]

    @property
    def iter_args(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args[1:])

    @property
    def lane_order(self) -> LaneOrder | None:
        """A lanes loop's order (lanes, tree, tail), None for any other loop."""
        if self.lanes is None:
            return None
        return LaneOrder.of(self.lanes.data,
                            None if self.tree is None else [b.data for b in self.tree.data],
                            None if self.tail is None else self.tail.data)

    def copy_order_to(self, other: ForOp) -> None:
        """Give ``other`` this loop's lanes, tree and tail (those it has)."""
        for key in ("lanes", "tree", "tail"):
            if key in self.properties:
                other.properties[key] = self.properties[key]

    def verify_(self) -> None:
        block = self.body.block
        if self.step.data <= 0:
            raise VerifyException(f"loop.for \"{self.loop_name.data}\": step must be "
                                  f"positive, got {self.step.data}")
        if self.parallel is not None and (self.inits or self.parallel.data < 1):
            raise VerifyException(f"loop.for \"{self.loop_name.data}\": a parallel loop needs "
                                  "a grain >= 1 and no loop-carried values")
        if self.lanes is not None:
            if self.lanes.data not in LANE_COUNTS:
                raise VerifyException(f"loop.for \"{self.loop_name.data}\": lanes must be one "
                                      f"of {', '.join(map(str, LANE_COUNTS))}, got "
                                      f"{self.lanes.data}")
            if self.step.data != 1 or not self.inits:
                raise VerifyException(f"loop.for \"{self.loop_name.data}\": a lanes loop needs "
                                      "step 1 and loop-carried values")
            self._verify_order(self.lanes.data)
        elif self.tree is not None or self.tail is not None:
            raise VerifyException(f"loop.for \"{self.loop_name.data}\": tree and tail order "
                                  "the lanes of a lanes loop (no lanes given)")
        if len(block.args) != 1 + len(self.inits):
            raise VerifyException(f"loop.for \"{self.loop_name.data}\": body has "
                                  f"{len(block.args)} arguments, expected {1 + len(self.inits)}")
        if not isinstance(block.args[0].type, IndexType):
            raise VerifyException(f"loop.for \"{self.loop_name.data}\": induction variable "
                                  "must be an index")
        yielded = block.last_op
        if not isinstance(yielded, YieldOp):
            raise VerifyException(f"loop.for \"{self.loop_name.data}\" must end with loop.yield")
        types = [v.type for v in self.inits]
        if [v.type for v in yielded.values] != types or [a.type for a in block.args[1:]] != types:
            raise VerifyException(f"loop.for \"{self.loop_name.data}\": loop-carried types "
                                  f"{_types_text(types)} differ from the body's arguments "
                                  "or yield")

    def _verify_order(self, lanes: int) -> None:
        if self.tail is not None:
            tail = self.tail.data
            if tail < 1 or tail & (tail - 1) or lanes % tail:
                raise VerifyException(f"loop.for \"{self.loop_name.data}\": tail {tail} must "
                                      f"be a power of two dividing the {lanes} lanes")
        if self.tree is not None:
            error = tree_error([b.data for b in self.tree.data], lanes)
            if error is not None:
                raise VerifyException(f"loop.for \"{self.loop_name.data}\": {error}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.loop_name.data)
        printer.print_string(" ")
        printer.print_operand(self.iv)
        printer.print_string(" = ")
        printer.print_operand(self.lb)
        printer.print_string(" to ")
        printer.print_operand(self.ub)
        if self.step.data != 1:
            printer.print_string(f" step {self.step.data}")
        if self.parallel is not None:
            printer.print_string(f" parallel {self.parallel.data}")
        if self.lanes is not None:
            printer.print_string(f" lanes {self.lanes.data}")
        if self.tail is not None:
            printer.print_string(f" tail {self.tail.data}")
        if self.tree is not None:
            printer.print_string(f" tree {tree_text([b.data for b in self.tree.data])}")
        if self.inits:
            printer.print_string(" iter(")

            def pair(p: tuple[SSAValue, SSAValue]) -> None:
                printer.print_operand(p[0])
                printer.print_string(" = ")
                printer.print_operand(p[1])

            printer.print_list(list(zip(self.iter_args, self.inits, strict=True)), pair)
            printer.print_string(") -> (")
            printer.print_list([v.type for v in self.inits], printer.print_attribute)
            printer.print_string(")")
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False,
                             print_block_terminators=bool(self.inits))

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        name = parser.parse_str_literal()
        iv = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lb = parser.resolve_operand(parser.parse_unresolved_operand(), IndexType())
        parser.parse_keyword("to")
        ub = parser.resolve_operand(parser.parse_unresolved_operand(), IndexType())
        step = 1
        if parser.parse_optional_keyword("step") is not None:
            step = parser.parse_integer(allow_boolean=False, allow_negative=False)
        grain = lanes = tail = tree = None
        if parser.parse_optional_keyword("parallel") is not None:
            grain = parser.parse_integer(allow_boolean=False, allow_negative=False)
        if parser.parse_optional_keyword("lanes") is not None:
            lanes = parser.parse_integer(allow_boolean=False, allow_negative=False)
        if parser.parse_optional_keyword("tail") is not None:
            tail = parser.parse_integer(allow_boolean=False, allow_negative=False)
        if parser.parse_optional_keyword("tree") is not None:
            tree = parse_tree(parser)
        carried: list[tuple[Parser.UnresolvedArgument, UnresolvedOperand]] = []
        if parser.parse_optional_keyword("iter") is not None:
            def pair() -> tuple[Parser.UnresolvedArgument, UnresolvedOperand]:
                arg = parser.parse_argument(expect_type=False)
                parser.parse_punctuation("=")
                return arg, parser.parse_unresolved_operand()
            carried = parser.parse_comma_separated_list(parser.Delimiter.PAREN, pair)
            parser.parse_punctuation("->")
            types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        else:
            types = []
        if len(types) != len(carried):
            parser.raise_error(f"loop.for \"{name}\": {len(carried)} loop-carried values but "
                               f"{len(types)} result types")
        attrs = parser.parse_optional_attr_dict_with_keyword()
        inits = [parser.resolve_operand(u, t) for (_, u), t in zip(carried, types, strict=True)]
        args = [iv.resolve(IndexType())] + [a.resolve(t)
                                            for (a, _), t in zip(carried, types, strict=True)]
        region = parser.parse_region(args)
        block = region.detach_block(0)
        op = cls(name, lb, ub, block, inits, step, lanes, tree, tail)
        if grain is not None:
            op.properties["parallel"] = IntAttr(grain)
        if attrs is not None:
            op.attributes |= attrs.data
        return op


@irdl_op_definition
class IfOp(IRDLOperation):
    """Two-way branch yielding values; only the taken branch runs (its loads
    may be out of bounds on the other side, e.g. one concat operand each).

    ``%v = loop.if %c -> (f32) { ... loop.yield %a : f32 } else { ... }``
    """

    name = "loop.if"
    cond = operand_def()
    res = var_result_def()
    then_region = region_def("single_block")
    else_region = region_def("single_block")

    def __init__(self, cond: SSAValue, result_types: Sequence[Attribute], then_block: Block,
                 else_block: Block) -> None:
        super().__init__(operands=[cond], result_types=[list(result_types)],
                         regions=[Region(then_block), Region(else_block)])

    def verify_(self) -> None:
        types = [r.type for r in self.res]
        for region in (self.then_region, self.else_region):
            last = region.block.last_op
            if not isinstance(last, YieldOp) or [v.type for v in last.values] != types:
                raise VerifyException(f"loop.if: each branch must yield {_types_text(types)}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.cond)
        printer.print_string(" -> (")
        printer.print_list([r.type for r in self.res], printer.print_attribute)
        printer.print_string(") ")
        printer.print_region(self.then_region)
        printer.print_string(" else ")
        printer.print_region(self.else_region)

    @classmethod
    def parse(cls, parser: Parser) -> IfOp:
        from xdsl.dialects.builtin import i1

        cond = parser.resolve_operand(parser.parse_unresolved_operand(), i1)
        parser.parse_punctuation("->")
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        then_block = parser.parse_region().detach_block(0)
        parser.parse_keyword("else")
        else_block = parser.parse_region().detach_block(0)
        return cls(cond, types, then_block, else_block)


@irdl_op_definition
class KernelOp(IRDLOperation):
    """A kernel: a C function over typed pointers and the size symbols.

    ``access`` says which arguments are written (``"w"``) or read (``"r"``);
    ``footprints`` give each argument's view shape and strides.
    """

    name = "loop.kernel"
    sym_name = prop_def(StringAttr)
    syms = prop_def(ArrayAttr[StringAttr])
    access = prop_def(ArrayAttr[StringAttr])
    footprints = prop_def(ArrayAttr[FootprintAttr])
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), NoTerminator())

    def __init__(self, name: str, body: Block, symbols: Sequence[str], access: Sequence[str],
                 footprints: Sequence[FootprintAttr]) -> None:
        super().__init__(properties={
            "sym_name": StringAttr(name),
            "syms": ArrayAttr([StringAttr(s) for s in symbols]),
            "access": ArrayAttr([StringAttr(a) for a in access]),
            "footprints": ArrayAttr(list(footprints)),
        }, regions=[Region(body)])

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(s.data for s in self.syms.data)

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(a.data for a in self.access.data)

    @property
    def args(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args)

    def verify_(self) -> None:
        args = self.body.block.args
        if len(self.access.data) != len(args) or len(self.footprints.data) != len(args):
            raise VerifyException(
                f"loop.kernel @{self.sym_name.data}: {len(args)} arguments but "
                f"{len(self.access.data)} access modes and {len(self.footprints.data)} footprints"
            )
        for i, (arg, mode) in enumerate(zip(args, self.modes, strict=True)):
            if not isinstance(arg.type, PtrType):
                raise VerifyException(f"loop.kernel @{self.sym_name.data}: argument #{i} "
                                      f"must be a !loop.ptr, got {arg.type}")
            if mode not in ("r", "w"):
                raise VerifyException(f"loop.kernel @{self.sym_name.data}: access mode "
                                      f"'{mode}' of argument #{i} is not 'r' or 'w'")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string("(")
        printer.print_list(self.body.block.args, printer.print_block_argument)
        printer.print_string(") syms [")
        printer.print_list(self.symbols, printer.print_string_literal)
        printer.print_string("] access [")
        printer.print_list(self.modes, printer.print_string_literal)
        printer.print_string("] footprints [")
        printer.print_list(self.footprints.data, printer.print_attribute)
        printer.print_string("] ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name().data
        args = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_argument)
        parser.parse_keyword("syms")
        syms = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                 parser.parse_str_literal)
        parser.parse_keyword("access")
        access = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                   parser.parse_str_literal)
        parser.parse_keyword("footprints")
        fps = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_attribute)
        block = parser.parse_region(args).detach_block(0)
        return cls(name, block, syms, access, fps)  # type: ignore[arg-type]  # the verifier checks


Loop = Dialect(
    "loop",
    [KernelOp, ForOp, IfOp, YieldOp, LoadOp, StoreOp, PrefetchOp, SymOp, CheckOp,
     ProgramOp, BufferOp, ViewOp, RequireOp, LaunchOp, OutputOp, *VECTOR_OPS],
    [PtrType, BufType, ViewType, LayoutAttr, FootprintAttr],
)

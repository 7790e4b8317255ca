"""The Graph dialect: Qwen2 as a graph of tensor primitives (spec §2).

Values are tensors of type ``!graph.tensor<[past + seq, 2, 64], f32>``: a
shape whose entries are integers or integer polynomials over named symbols,
and one of the dtypes ``f32 i64 i32 i8 bool bf16``. A graph is a
``graph.func`` whose ``graph.input`` ops bind the symbols, whose
``graph.weight`` ops name run-time constants, and whose ``graph.return``
names the outputs:

    graph.func @axpy {
      %x = graph.input "x" : !graph.tensor<[seq, 896], f32>
      %w = graph.weight "w" : !graph.tensor<[896], f32>
      %wb = graph.reshape %w : !graph.tensor<[896], f32> -> !graph.tensor<[1, 896], f32>
      %b = graph.broadcast %wb : !graph.tensor<[1, 896], f32> -> !graph.tensor<[seq, 896], f32>
      %y = graph.mul %x, %b : !graph.tensor<[seq, 896], f32>
      graph.return "y" = %y : !graph.tensor<[seq, 896], f32>
    }

Every primitive infers its result type with ``nanocompile.ir.shapes`` and its
verifier rejects a mismatch with a message naming the values involved. There
is no implicit broadcasting.

This module defines the dialect and its container ops (``graph.func``,
``graph.return``, ``graph.fused``, ``graph.yield``); the types live in
``types.py`` (with the shared attributes of ``dialects/common``) and the
primitives in ``primitives.py``, both
re-exported here.

Primitive syntax (one custom form shared by all primitives):
``graph.<op> operands [positional] [key = value, ...] [attr-dict] : types``
where ``types`` is ``T`` when every operand has the result's type, ``T -> R``
when every operand has type ``T``, else ``(T0, T1, ...) -> R``.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, StringAttr
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
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects.graph.primitives import (
    AddOp,
    BinaryOp,
    BroadcastOp,
    CastOp,
    ConcatOp,
    ConstOp,
    CosOp,
    DimOp,
    DivOp,
    ExpOp,
    GatherOp,
    GraphPrimitiveOp,
    InputOp,
    IotaOp,
    LessEqualOp,
    MatmulI8Op,
    MatmulOp,
    MulOp,
    NegOp,
    PermuteOp,
    PurePrimitiveOp,
    ReciprocalOp,
    ReduceMaxOp,
    ReduceOp,
    ReduceSumOp,
    ReshapeOp,
    RoundOp,
    SinOp,
    SliceOp,
    SqrtOp,
    SubOp,
    UnaryOp,
    UpdateSliceOp,
    WeightOp,
    WhereOp,
)
from nanocompile.dialects.graph.types import (
    DimAttr,
    ElementsAttr,
    TensorType,
    tensor_spec,
    tensor_type,
)
from nanocompile.ir.checks import OpVerifyException

# The dialect is defined here; its types and primitives live in types.py and
# primitives.py and are re-exported, so ``graph.AddOp`` etc. keep working.
__all__ = [
    "AddOp",
    "BinaryOp",
    "BroadcastOp",
    "CastOp",
    "ConcatOp",
    "ConstOp",
    "CosOp",
    "DimAttr",
    "DimOp",
    "DivOp",
    "ElementsAttr",
    "ExpOp",
    "FusedOp",
    "FusedYieldOp",
    "GatherOp",
    "Graph",
    "GraphFuncOp",
    "GraphPrimitiveOp",
    "InputOp",
    "IotaOp",
    "LessEqualOp",
    "MatmulI8Op",
    "MatmulOp",
    "MulOp",
    "NegOp",
    "PermuteOp",
    "PurePrimitiveOp",
    "ReciprocalOp",
    "ReduceMaxOp",
    "ReduceOp",
    "ReduceSumOp",
    "ReshapeOp",
    "ReturnOp",
    "RoundOp",
    "SinOp",
    "SliceOp",
    "SqrtOp",
    "SubOp",
    "TensorType",
    "UnaryOp",
    "UpdateSliceOp",
    "WeightOp",
    "WhereOp",
    "tensor_spec",
    "tensor_type",
]


# --------------------------------------------------------------------------
# The graph container
# --------------------------------------------------------------------------


FUSED_KINDS = ("elementwise", "row", "matmul")


@irdl_op_definition
class FusedYieldOp(IRDLOperation):
    """The value a ``graph.fused`` region computes: ``graph.yield %y : T``."""

    name = "graph.yield"
    value = operand_def(TensorType)
    traits = traits_def(IsTerminator())
    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue) -> None:
        super().__init__(operands=[value])


@irdl_op_definition
class FusedOp(IRDLOperation):
    """One future kernel: a region of primitives computing one stored value.

    The region's arguments are the values it reads from memory (computed by
    other kernels, or inputs, weights, constants); everything else in it is
    computed in registers. ``kind`` is ``elementwise``, ``row`` (row
    reductions, e.g. rms_norm, softmax) or ``matmul`` (one or more matmuls
    sharing a k loop, with an elementwise epilogue).

        %y = graph.fused "matmul" (%x, %w, %b) : (T0, T1, T2) -> T {
        ^bb0(%a: T0, %wt: T1, %bias: T2):
          ...
          graph.yield %r : T
        }
    """

    name = "graph.fused"
    kind = prop_def(StringAttr)
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    body = region_def("single_block")
    traits = traits_def(Pure())

    def __init__(self, kind: str, inputs: Sequence[SSAValue], body: Block) -> None:
        last = body.last_op
        assert isinstance(last, FusedYieldOp)
        super().__init__(operands=[list(inputs)], result_types=[last.value.type],
                         properties={"kind": StringAttr(kind)}, regions=[Region(body)])

    @property
    def block(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        if self.kind.data not in FUSED_KINDS:
            raise VerifyException(f"graph.fused: unknown kind '{self.kind.data}', expected "
                                  f"one of {', '.join(FUSED_KINDS)}")
        args = self.block.args
        if [a.type for a in args] != [v.type for v in self.inputs]:
            raise VerifyException("graph.fused: region argument types differ from its inputs")
        last = self.block.last_op
        if not isinstance(last, FusedYieldOp) or last.value.type != self.result.type:
            raise VerifyException("graph.fused: region must end with graph.yield of the "
                                  "result type")
        for op in self.block.ops:
            if isinstance(op, InputOp | WeightOp | FusedOp):
                raise VerifyException(f"graph.fused: {op.name} is not allowed in a region")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.kind.data)
        printer.print_string(" (")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(") : (")
        printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> FusedOp:
        kind = parser.parse_str_literal()
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN,
                                                     parser.parse_unresolved_operand)
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        parser.parse_type()
        if len(types) != len(operands):
            parser.raise_error(f"expected {len(operands)} input types, got {len(types)}")
        inputs = [parser.resolve_operand(u, t) for u, t in zip(operands, types, strict=True)]
        region = parser.parse_region()
        return cls(kind, inputs, region.detach_block(0))


@irdl_op_definition
class GraphFuncOp(IRDLOperation):
    """A graph: named inputs (which bind the shape symbols), named weights, and
    named outputs returned by its ``graph.return``. ``scalars`` names symbols
    no input shape binds: the caller gives their values (a cached step's
    ``past`` when the KV cache is a state of ``capacity`` positions).

    ``graph.func @qwen2 { %ids = graph.input "token_ids" : ... graph.return ... }``,
    ``graph.func @qwen2 scalars ["past"] { ... }``
    """

    name = "graph.func"
    sym_name = prop_def(StringAttr)
    scalar_syms = opt_prop_def(ArrayAttr[StringAttr], prop_name="scalars")
    body = region_def("single_block")

    def __init__(self, name: str, body: Block | Region,
                 scalars: Sequence[str] = ()) -> None:
        region = body if isinstance(body, Region) else Region(body)
        props: dict[str, Attribute] = {"sym_name": StringAttr(name)}
        if scalars:
            props["scalars"] = ArrayAttr([StringAttr(s) for s in scalars])
        super().__init__(properties=props, regions=[region])

    @property
    def scalars(self) -> tuple[str, ...]:
        """The symbols the caller binds by value, in declaration order."""
        return () if self.scalar_syms is None else tuple(s.data for s in self.scalar_syms.data)

    @property
    def block(self) -> Block:
        return self.body.block

    def inputs(self) -> list[InputOp]:
        return [op for op in self.block.ops if isinstance(op, InputOp)]

    def weights(self) -> list[WeightOp]:
        return [op for op in self.block.ops if isinstance(op, WeightOp)]

    def return_op(self) -> ReturnOp:
        last = self.block.last_op
        if not isinstance(last, ReturnOp):
            raise VerifyException(f"graph.func @{self.sym_name.data} must end with graph.return")
        return last

    def bound_symbols(self) -> set[str]:
        """Symbols bound by the inputs (an input dim that is exactly one symbol)
        and the declared scalars."""
        return {s for op in self.inputs() for d in op.result.type.dims
                if (s := d.single_symbol) is not None} | set(self.scalars)

    def verify_(self) -> None:
        self.return_op()
        for kind, names in (("input", [op.arg_name.data for op in self.inputs()]),
                            ("weight", [op.weight_name.data for op in self.weights()])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise VerifyException(
                    f"graph.func @{self.sym_name.data}: {kind} names {dupes} are not unique"
                )
        for op in self.block.ops:
            if not isinstance(op, GraphPrimitiveOp | FusedOp | ReturnOp):
                raise OpVerifyException(f"graph.func @{self.sym_name.data}: {op.name} is not "
                                        "a graph op (a graph holds primitives, graph.fused "
                                        "and graph.return)", op)
        by_inputs = {s for op in self.inputs() for d in op.result.type.dims
                     if (s := d.single_symbol) is not None}
        twice = sorted({s for s in self.scalars if self.scalars.count(s) > 1 or s in by_inputs})
        if twice:
            raise VerifyException(f"graph.func @{self.sym_name.data}: scalars {twice} are "
                                  "declared twice or bound by an input's shape")
        bound = self.bound_symbols()
        for op in self.block.walk():  # and inside graph.fused regions, where fuse moves ops
            if isinstance(op, IRDLOperation):
                _check_bound(op, bound)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        if self.scalars:
            printer.print_string(" scalars [")
            printer.print_list(self.scalars, printer.print_string_literal)
            printer.print_string("]")
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> GraphFuncOp:
        name = parser.parse_symbol_name().data
        scalars: list[str] = []
        if parser.parse_optional_keyword("scalars") is not None:
            scalars = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                        parser.parse_str_literal)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region()
        op = cls(name, region, scalars)
        if attrs is not None:
            op.attributes |= attrs.data
        return op


@irdl_op_definition
class ReturnOp(IRDLOperation):
    """The named outputs of a graph.

    ``graph.return "logits" = %l, "keys" = %k : !graph.tensor<...>, !graph.tensor<...>``
    """

    name = "graph.return"
    outputs = var_operand_def(TensorType)
    output_names = prop_def(ArrayAttr[StringAttr], prop_name="names")
    traits = traits_def(IsTerminator(), HasParent(GraphFuncOp))

    def __init__(self, outputs: Sequence[tuple[str, SSAValue]]) -> None:
        super().__init__(
            operands=[[v for _, v in outputs]],
            properties={"names": ArrayAttr([StringAttr(n) for n, _ in outputs])},
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.data for s in self.output_names.data)

    def verify_(self) -> None:
        if len(self.names) != len(self.outputs):
            raise VerifyException(
                f"graph.return: {len(self.names)} names for {len(self.outputs)} outputs"
            )
        dupes = sorted({n for n in self.names if self.names.count(n) > 1})
        if dupes:
            raise VerifyException(f"graph.return: output names {dupes} are not unique")

    def print(self, printer: Printer) -> None:
        if not self.outputs:
            return
        printer.print_string(" ")

        def pair(p: tuple[str, SSAValue]) -> None:
            printer.print_string_literal(p[0])
            printer.print_string(" = ")
            printer.print_operand(p[1])

        printer.print_list(list(zip(self.names, self.outputs, strict=True)), pair)
        printer.print_string(" : ")
        printer.print_list([v.type for v in self.outputs], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> ReturnOp:
        def pair() -> tuple[str, UnresolvedOperand]:
            name = parser.parse_str_literal()
            parser.parse_punctuation("=")
            return name, parser.parse_unresolved_operand()

        pairs: list[tuple[str, UnresolvedOperand]] = []
        if (first := parser.parse_optional_str_literal()) is not None:
            parser.parse_punctuation("=")
            pairs.append((first, parser.parse_unresolved_operand()))
            while parser.parse_optional_punctuation(",") is not None:
                pairs.append(pair())
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            if len(types) != len(pairs):
                parser.raise_error(f"expected {len(pairs)} output types, got {len(types)}")
        else:
            types = []
        values = [parser.resolve_operand(u, t) for (_, u), t in zip(pairs, types, strict=True)]
        return cls(list(zip([n for n, _ in pairs], values, strict=True)))


def _mentioned_symbols(op: IRDLOperation) -> set[str]:
    syms: set[str] = set()
    for r in op.results:
        if isinstance(r.type, TensorType):
            for d in r.type.dims:
                syms |= d.symbols
    for attr in op.properties.values():
        if isinstance(attr, DimAttr):
            syms |= attr.data.symbols
    return syms


def _check_bound(op: IRDLOperation, bound: set[str]) -> None:
    unbound = sorted(_mentioned_symbols(op) - bound)
    if not unbound:
        return
    what = ", ".join(f"'{s}'" for s in unbound)
    value = op.results[0] if op.results else None
    where = f"%{value.name_hint}" if value is not None and value.name_hint else "its result"
    raise OpVerifyException(
        f"{op.name}: symbol {what} in {where} is not bound by any graph.input "
        f"(bound: {sorted(bound) or 'none'})", op
    )


Graph = Dialect(
    "graph",
    [
        GraphFuncOp, ReturnOp,
        InputOp, WeightOp, ConstOp, IotaOp, DimOp,
        AddOp, SubOp, MulOp, DivOp, LessEqualOp, WhereOp,
        NegOp, ExpOp, SqrtOp, ReciprocalOp, SinOp, CosOp, RoundOp, CastOp,
        ReduceSumOp, ReduceMaxOp,
        ReshapeOp, PermuteOp, BroadcastOp, SliceOp, ConcatOp, UpdateSliceOp,
        MatmulOp, MatmulI8Op, GatherOp,
        FusedOp, FusedYieldOp,
    ],
    [DimAttr, ElementsAttr, TensorType],
)

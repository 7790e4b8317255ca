"""The vector ops of the Loop dialect (phase 4: ``vectorize``).

A vectorized loop computes ``W`` consecutive iterations at once, iteration
``i + l`` in lane ``l`` of a ``vector<W x f32>``. Float arithmetic uses
xDSL's ``arith``/``math`` ops on vector types; loads and stores take a vector
value type (``loop.load %a[%i] strides [1] : vector<8xf32>`` reads the 8
consecutive elements from ``a[i]``). Three ops are the loop dialect's own,
because xDSL 0.75's ``arith.cmpf`` returns a scalar ``i1`` for vector
operands and ``arith.select`` wants a scalar condition:

    %v = loop.splat %x : f32 -> vector<8xf32>          every lane = %x
    %m = loop.vcmp "ole", %a, %b : vector<8xf32>        vector<8xi1>, per lane
    %r = loop.vselect %m, %a, %b : vector<8xf32>        lane l: m[l] ? a[l] : b[l]
    %s = loop.lanesum %v : vector<8xf32> -> f32         the lanes' halving tree

``loop.lanesum`` is the tree a lanes loop (``loop.for ... lanes L``) ends
with: on ``W`` lanes, ``t[j] = v[j] + v[j + W/2]`` for ``j < W/2``, then the
same on ``t`` until one value is left. A vectorized lanes loop of ``L`` lanes
in vectors of ``W`` adds its ``L/W`` vectors by the same halving (vector
``j`` plus vector ``j + L/(2W)``) and then sums the last vector's lanes, so
every width gives the scalar loop's bits.

``loop.vselect`` computes both operands in every lane (a blend); the
vectorizer only forms it where the scalar ``arith.select`` already had both
operands computed, never from a ``loop.if`` whose branches load.
"""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr, VectorType, i1
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

LANE_COUNTS = (2, 4, 8, 16)
CMP_PREDICATES = ("oeq", "ogt", "oge", "olt", "ole", "one", "une", "ord", "uno")


def mask_type(vector: VectorType) -> VectorType:
    """``vector<W x i1>`` for a ``vector<W x T>``."""
    return VectorType(i1, vector.get_shape())


def _vector(value_type: Attribute, op: str) -> VectorType:
    if not isinstance(value_type, VectorType) or len(value_type.get_shape()) != 1:
        raise VerifyException(f"{op}: expected a 1-d vector type, got {value_type}")
    return value_type


def _print_unary(printer: Printer, operand: SSAValue, result: SSAValue) -> None:
    """`` %x : T -> U``: a one-operand op that changes the type (splat, lanesum)."""
    printer.print_string(" ")
    printer.print_operand(operand)
    printer.print_string(" : ")
    printer.print_attribute(operand.type)
    printer.print_string(" -> ")
    printer.print_attribute(result.type)


def _parse_unary(parser: Parser, vector_result: bool) -> tuple[SSAValue, Attribute]:
    """The resolved operand and the result type of `` %x : T -> U``; the side
    that is a vector (the result when ``vector_result``) must be a 1-d one."""
    value = parser.parse_unresolved_operand()
    parser.parse_punctuation(":")
    types = []
    for side in (False, True):
        pos = parser.pos
        t = parser.parse_type()
        if side == vector_result and (not isinstance(t, VectorType)
                                      or len(t.get_shape()) != 1):
            parser.raise_error(f"expected a 1-d vector type, got {t}", pos, parser.pos)
        types.append(t)
        if not side:
            parser.parse_punctuation("->")
    return parser.resolve_operand(value, types[0]), types[1]


@irdl_op_definition
class SplatOp(IRDLOperation):
    """Every lane of the result is the scalar operand."""

    name = "loop.splat"
    input = operand_def()
    result = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue, lanes: int) -> None:
        super().__init__(operands=[value], result_types=[VectorType(value.type, [lanes])])

    def verify_(self) -> None:
        vector = _vector(self.result.type, self.name)
        if vector.element_type != self.input.type:
            raise VerifyException(f"loop.splat: a {self.input.type} cannot fill "
                                  f"{vector}")

    def print(self, printer: Printer) -> None:
        _print_unary(printer, self.input, self.result)

    @classmethod
    def parse(cls, parser: Parser) -> SplatOp:
        # the vector type as written (the verifier rejects lanes the scalar cannot fill)
        value, result = _parse_unary(parser, vector_result=True)
        return cls.build(operands=[value], result_types=[result])


@irdl_op_definition
class VCmpOp(IRDLOperation):
    """A per-lane float comparison with ``arith.cmpf``'s predicates (ordered
    predicates are false when a lane holds a NaN; ``une`` is true)."""

    name = "loop.vcmp"
    predicate = prop_def(StringAttr)
    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, predicate: str, lhs: SSAValue, rhs: SSAValue) -> None:
        assert isinstance(lhs.type, VectorType)
        super().__init__(operands=[lhs, rhs], properties={"predicate": StringAttr(predicate)},
                         result_types=[mask_type(lhs.type)])

    def verify_(self) -> None:
        if self.predicate.data not in CMP_PREDICATES:
            raise VerifyException(f"loop.vcmp: unknown predicate '{self.predicate.data}', "
                                  f"expected one of {', '.join(CMP_PREDICATES)}")
        vector = _vector(self.lhs.type, self.name)
        if self.rhs.type != vector:
            raise VerifyException(f"loop.vcmp: operands differ in type ({vector} and "
                                  f"{self.rhs.type})")
        if self.result.type != mask_type(vector):
            raise VerifyException(f"loop.vcmp: the result must be {mask_type(vector)}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_string_literal(self.predicate.data)
        printer.print_string(", ")
        printer.print_operand(self.lhs)
        printer.print_string(", ")
        printer.print_operand(self.rhs)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)

    @classmethod
    def parse(cls, parser: Parser) -> VCmpOp:
        predicate = parser.parse_str_literal()
        parser.parse_punctuation(",")
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        vector = parser.parse_type()
        return cls(predicate, parser.resolve_operand(lhs, vector),
                   parser.resolve_operand(rhs, vector))


@irdl_op_definition
class VSelectOp(IRDLOperation):
    """Lane ``l`` is ``cond[l] ? lhs[l] : rhs[l]``; a scalar ``i1`` condition
    picks the same side in every lane."""

    name = "loop.vselect"
    cond = operand_def()
    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue) -> None:
        super().__init__(operands=[cond, lhs, rhs], result_types=[lhs.type])

    def verify_(self) -> None:
        vector = _vector(self.lhs.type, self.name)
        if self.rhs.type != vector or self.result.type != vector:
            raise VerifyException(f"loop.vselect: operands and result must all be {vector}")
        cond = self.cond.type
        if cond != i1 and cond != mask_type(vector):
            raise VerifyException(f"loop.vselect: the condition must be i1 or "
                                  f"{mask_type(vector)}, got {cond}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list([self.cond, self.lhs, self.rhs], printer.print_operand)
        printer.print_string(" : ")
        printer.print_attribute(self.cond.type)
        printer.print_string(", ")
        printer.print_attribute(self.lhs.type)

    @classmethod
    def parse(cls, parser: Parser) -> VSelectOp:
        operands = [parser.parse_unresolved_operand()]
        for _ in range(2):
            parser.parse_punctuation(",")
            operands.append(parser.parse_unresolved_operand())
        parser.parse_punctuation(":")
        cond_type = parser.parse_type()
        parser.parse_punctuation(",")
        vector = parser.parse_type()
        cond, lhs, rhs = operands
        return cls(parser.resolve_operand(cond, cond_type), parser.resolve_operand(lhs, vector),
                   parser.resolve_operand(rhs, vector))


@irdl_op_definition
class LaneSumOp(IRDLOperation):
    """The halving tree of a vector's lanes (see the module docstring)."""

    name = "loop.lanesum"
    input = operand_def(VectorType)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue) -> None:
        assert isinstance(value.type, VectorType)
        super().__init__(operands=[value], result_types=[value.type.element_type])

    def verify_(self) -> None:
        vector = _vector(self.input.type, self.name)
        if vector.get_shape()[0] not in LANE_COUNTS:
            raise VerifyException(f"loop.lanesum: expected {', '.join(map(str, LANE_COUNTS))} "
                                  f"lanes, got {vector.get_shape()[0]}")
        if self.result.type != vector.element_type:
            raise VerifyException(f"loop.lanesum: the result must be {vector.element_type}, "
                                  f"got {self.result.type}")

    def print(self, printer: Printer) -> None:
        _print_unary(printer, self.input, self.result)

    @classmethod
    def parse(cls, parser: Parser) -> LaneSumOp:
        value, result = _parse_unary(parser, vector_result=False)
        return cls.build(operands=[value], result_types=[result])


VECTOR_OPS: list[type[IRDLOperation]] = [SplatOp, VCmpOp, VSelectOp, LaneSumOp]

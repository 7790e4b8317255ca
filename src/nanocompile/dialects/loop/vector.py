"""The vector ops of the Loop dialect (phase 4: ``vectorize``), and the
order of a lanes reduction (``LaneOrder``).

A vectorized loop computes ``W`` consecutive iterations at once, iteration
``i + l`` in lane ``l`` of a ``vector<W x f32>``. Float arithmetic uses
xDSL's ``arith``/``math`` ops on vector types; loads and stores take a vector
value type (``loop.load %a[%i] strides [1] : vector<8xf32>`` reads the 8
consecutive elements from ``a[i]``). Five ops are the loop dialect's own,
because xDSL 0.75's ``arith.cmpf`` returns a scalar ``i1`` for vector
operands, ``arith.select`` wants a scalar condition and ``arith.sitofp`` and
``arith.fptosi`` take scalars only:

    %v = loop.splat %x : f32 -> vector<8xf32>          every lane = %x
    %m = loop.vcmp "ole", %a, %b : vector<8xf32>        vector<8xi1>, per lane
    %r = loop.vselect %m, %a, %b : vector<8xf32>        lane l: m[l] ? a[l] : b[l]
    %f = loop.vsitofp %q : vector<8xi8> -> vector<8xf32>   lane l: f32(q[l]), exact
    %q = loop.vfptosi %x : vector<8xf32> -> vector<8xi8>   lane l: (int8) x[l], in range
    %s = loop.lanesum %v : vector<8xf32> -> f32         the lanes' halving tree
    %t = loop.lanesum %v tree [2, 0, 1] : vector<8xf32> -> f32   the lanes' tree
    %h = loop.foldhalf %v : vector<16xf32> -> vector<8xf32>   lane i: v[i] + v[i + 8]
    %u = loop.half %v[1] : vector<16xf32> -> vector<8xf32>    lane i: v[i + 8]
    %p = loop.dot4 %xq, %w : vector<4xi8> -> i32        sum_j (w[j] + 128) * xq[j], exact
    %d = loop.dot4 %xq, %w : vector<32xi8> -> vector<8xi32>   the same per 4 bytes

Three more gather and scatter lanes for ``slp`` (schedule/slp.py: the epilogues
of jammed copies as one vector):

    %s = loop.lanesums %a, %b, %c, %d : vector<16xf32> -> vector<4xf32>  lanesum of each
    %p = loop.vpack %a, %b, %c, %d : f32 -> vector<4xf32>   lane i: operand i
    %x = loop.extract %v[2] : vector<4xf32> -> f32          lane 2

**The int8 dot of 4 bytes** (``loop.dot4``, spec §5 kernel B's integer core):
of two vectors of ``4 L`` bytes, lane ``l`` (``l < L``) of the result is the
exact i32 ``sum_{j<4} (w[4l + j] + 128) * xq[4l + j]`` (``w`` the second
operand, taken as the unsigned byte ``w XOR 0x80``; ``xq`` the first, signed):
one dword of ``vpdpbusd`` from zero. ``L = 1`` (4 bytes) gives a scalar
``i32``: the lowering's form (``emit_matmul_i8``), which ``vectorize`` turns
into ``L`` lanes, reading ``4 L`` consecutive bytes. Both operands hold bytes
in [-127, 127] (spec §5: -128 is never used); the integers are exact (|p| <=
4 * 255 * 127), so every instruction sequence that computes them
(``targets/c_vector.py``: AVX512-VNNI, AVX-VNNI, AVX2's ``vpmaddubsw`` sign
trick, scalar C) gives the same bits.

**Lane trees.** ``L`` partial values (lanes, ``L`` a power of two) are added
into one by a *tree*: an order of the ``log2 L`` bits of the lane index.
Combining bit ``b`` adds, for every lane ``j`` still live whose bit ``b`` is
clear, ``v[j] + v[j | 1 << b]`` (the lower lane on the left) into lane ``j``;
the lanes with bit ``b`` set are then dead. After the last bit lane 0 holds
the result. The default is the *halving* tree ``[log2 L - 1, ..., 0]``:
``t[j] = v[j] + v[j + L/2]`` for ``j < L/2``, then the same on ``t``, down to
one value. spec §5's kernel A ends with the tree ``[3, 4, 2, 0, 1]`` of 32
lanes (lane ``8a + l``: accumulator ``a``, lane ``l``): bits 3 and 4 give
``(c0 + c1) + (c2 + c3)``, bit 2 ``s_i = v[i] + v[i + 4]``, bits 0 and 1
``(s0 + s1) + (s2 + s3)``.

``loop.lanesum`` is that tree on a vector's lanes. A vectorized lanes loop of
``L`` lanes in vectors of ``W`` holds lane ``j`` in lane ``j mod W`` of vector
``j div W``: the tree's bits ``log2 W ..`` select a vector, the lower ones a
lane in it. It needs the tree to combine the vectors first (vector ``v`` plus
vector ``v | 1 << (b - log2 W)``, in the tree's order), then one
``loop.lanesum`` does the rest with the remaining bits: every width gives the
scalar loop's bits (``LaneOrder.vector_split``). A tree that starts with the
top lane bits instead halves each vector first (``loop.foldhalf``, lane ``i``
plus lane ``i + W/2``): kernel A's ``[3, 4, 2, 0, 1]`` in vectors of 16
(accumulators ``c0 | c1`` and ``c2 | c3``) folds each to ``c0 + c1`` and
``c2 + c3``, adds the two, and ends with ``[2, 0, 1]`` on 8 lanes.

``loop.vselect`` computes both operands in every lane (a blend); the
vectorizer only forms it where the scalar ``arith.select`` already had both
operands computed, never from a ``loop.if`` whose branches load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import (
    ArrayAttr,
    IntAttr,
    IntegerType,
    StringAttr,
    VectorType,
    f32,
    i1,
    i8,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

LANE_COUNTS = (2, 4, 8, 16, 32)
CMP_PREDICATES = ("oeq", "ogt", "oge", "olt", "ole", "one", "une", "ord", "uno")


def lane_bits(lanes: int) -> int:
    """``log2 lanes``: how many bits a lane index of ``lanes`` lanes has."""
    return lanes.bit_length() - 1


def halving_tree(lanes: int) -> tuple[int, ...]:
    """The default tree of ``lanes`` lanes: bits ``log2 L - 1, ..., 0``."""
    return tuple(range(lane_bits(lanes) - 1, -1, -1))


def tree_error(tree: Sequence[int], lanes: int) -> str | None:
    """Why ``tree`` is no tree of ``lanes`` lanes (None when it is one)."""
    bits = lane_bits(lanes)
    if sorted(tree) != list(range(bits)):
        return (f"tree {list(tree)} is not an order of the bits 0..{bits - 1} of a lane "
                f"index of {lanes} lanes")
    return None


def tree_steps(tree: Sequence[int]) -> list[tuple[int, int]]:
    """Per step of ``tree``: ``(bit, dead)``, where a lane ``j`` takes part
    (``v[j] = v[j] + v[j | 1 << bit]``) when ``j & dead == 0``; ``dead`` holds
    the bits combined so far and this one."""
    steps, dead = [], 0
    for bit in tree:
        dead |= 1 << bit
        steps.append((bit, dead))
    return steps


@dataclass(frozen=True)
class LaneOrder:
    """The order of a lanes reduction (``loop.for ... lanes L tail R tree
    [...]``, see ``loop.ForOp``): ``lanes`` partial values; iteration ``j``
    (from the lower bound) of ``n`` updates lane ``j mod L`` while ``j < J =
    L * floor(n / L)``, then lane ``(j - J) mod tail``; ``tree`` adds the lanes
    at the end."""

    lanes: int
    tree: tuple[int, ...]
    tail: int

    @staticmethod
    def of(lanes: int, tree: Sequence[int] | None = None,
           tail: int | None = None) -> LaneOrder:
        return LaneOrder(lanes, halving_tree(lanes) if tree is None else tuple(tree),
                         lanes if tail is None else tail)

    @property
    def halving(self) -> bool:
        """Whether the tree is the default halving tree."""
        return self.tree == halving_tree(self.lanes)

    def lane(self, j: int, n: int) -> int:
        """The lane iteration ``j`` of ``n`` updates."""
        whole = self.lanes * (n // self.lanes)
        return j % self.lanes if j < whole else (j - whole) % self.tail

    def vector_split(self, width: int, tail: bool = True) -> VectorSplit | None:
        """For ``L / width`` vectors of ``width`` lanes: how the tree runs on
        them (``VectorSplit``: halvings of each vector while the tree combines
        its top in-vector bits, then the bits that select a vector, then the
        in-vector tree); None when the tree does not fit that form or
        ``width`` does not divide the tail's groups (``tail``: the loop runs
        its tail; a trip count that is a multiple of ``L`` runs none)."""
        if self.lanes % width or (tail and self.tail % width):
            return None
        inner = lane_bits(width)
        across = len(self.tree) - inner
        folds = 0  # leading top lane bits (at least 4 lanes are left: a C vector)
        while across and folds < inner - 2 and self.tree[folds] == inner - 1 - folds:
            folds += 1
        if sorted(self.tree[folds:folds + across]) != list(range(inner, len(self.tree))):
            return None
        return VectorSplit(folds, tuple(b - inner for b in self.tree[folds:folds + across]),
                           self.tree[folds + across:])


@dataclass(frozen=True)
class VectorSplit:
    """A lanes tree run on ``L / W`` vectors of ``W`` lanes (lane ``j`` in lane
    ``j mod W`` of vector ``j div W``): ``folds`` halvings of every vector
    first (``loop.foldhalf``: the tree's first ``folds`` bits are the top lane
    bits ``log2 W - 1, log2 W - 2, ..``; 4 lanes are left at least), then the
    vectors added by the bits
    ``across`` (vector-index bits, in the tree's order: vector ``v`` plus
    vector ``v | 1 << b``), then ``inner``, the tree of the ``W / 2**folds``
    lanes left (``loop.lanesum``). spec §5's ``[3, 4, 2, 0, 1]`` in vectors
    of 16: one halving (``c0 + c1`` in the vector of ``c0 | c1``), the
    vectors (``+ (c2 + c3)``), then ``[2, 0, 1]`` on 8 lanes."""

    folds: int
    across: tuple[int, ...]
    inner: tuple[int, ...]


def tree_attr(tree: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr([IntAttr(b) for b in tree])


def parse_tree(parser: Parser) -> list[int]:
    """``[3, 4, 2, 0, 1]`` (after the keyword ``tree``)."""
    return parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE,
        lambda: parser.parse_integer(allow_boolean=False, allow_negative=False))


def tree_text(tree: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, tree)) + "]"


def mask_type(vector: VectorType) -> VectorType:
    """``vector<W x i1>`` for a ``vector<W x T>``."""
    return VectorType(i1, vector.get_shape())


def _vector(value_type: Attribute, op: str) -> VectorType:
    if not isinstance(value_type, VectorType) or len(value_type.get_shape()) != 1:
        raise VerifyException(f"{op}: expected a 1-d vector type, got {value_type}")
    return value_type


def _print_unary(printer: Printer, operand: SSAValue, result: SSAValue,
                 tree: Sequence[int] | None = None) -> None:
    """`` %x : T -> U`` (`` %x tree [...] : T -> U`` with a ``tree``): a
    one-operand op that changes the type (splat, vsitofp, lanesum)."""
    printer.print_string(" ")
    printer.print_operand(operand)
    if tree is not None:
        printer.print_string(f" tree {tree_text(tree)}")
    printer.print_string(" : ")
    printer.print_attribute(operand.type)
    printer.print_string(" -> ")
    printer.print_attribute(result.type)


def _parse_unary(parser: Parser, vector_result: bool, tree_of: str | None = None
                 ) -> tuple[SSAValue, Attribute, list[int] | None]:
    """The resolved operand, the result type and the optional tree of
    `` %x [tree [...]] : T -> U`` (a tree only when ``tree_of`` names the op
    that takes one); the side that is a vector (the result when
    ``vector_result``) must be a 1-d one."""
    value = parser.parse_unresolved_operand()
    tree = None
    pos = parser.pos
    if parser.parse_optional_keyword("tree") is not None:
        if tree_of is None:
            parser.raise_error("only loop.lanesum takes a tree", pos, parser.pos)
        tree = parse_tree(parser)
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
    return parser.resolve_operand(value, types[0]), types[1], tree


def _print_indexed(printer: Printer, operand: SSAValue, index: int, result: SSAValue) -> None:
    """`` %v[i] : T -> U``: a vector op with a constant index (extract, half)."""
    printer.print_string(" ")
    printer.print_operand(operand)
    printer.print_string(f"[{index}] : ")
    printer.print_attribute(operand.type)
    printer.print_string(" -> ")
    printer.print_attribute(result.type)


def _parse_indexed(parser: Parser) -> tuple[SSAValue, int, Attribute]:
    """The resolved vector operand, the index and the result type of
    `` %v[i] : T -> U``."""
    value = parser.parse_unresolved_operand()
    parser.parse_punctuation("[")
    index = parser.parse_integer(allow_boolean=False, allow_negative=False)
    parser.parse_punctuation("]")
    parser.parse_punctuation(":")
    pos = parser.pos
    vector = parser.parse_type()
    if not isinstance(vector, VectorType):
        parser.raise_error(f"expected a vector type, got {vector}", pos, parser.pos)
    parser.parse_punctuation("->")
    return parser.resolve_operand(value, vector), index, parser.parse_type()


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
        value, result, _ = _parse_unary(parser, vector_result=True)
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
class VSIToFPOp(IRDLOperation):
    """Lane ``l`` is the integer lane ``l`` as f32, exactly (``arith.sitofp``
    per lane; xDSL 0.75's takes scalars only): the widening of a vector of
    int8 weights, ``%f = loop.vsitofp %q : vector<8xi8> -> vector<8xf32>``, or of
    kernel B's i32 dots (``vector<8xi32>``: lane ``l`` is ``(float)`` of it,
    round to nearest even; exact for ``|p| <= 4 * 255 * 127 < 2**24``)."""

    name = "loop.vsitofp"
    input = operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue) -> None:
        assert isinstance(value.type, VectorType)
        super().__init__(operands=[value], result_types=[VectorType(f32, value.type.get_shape())])

    def verify_(self) -> None:
        source = _vector(self.input.type, self.name)
        result = _vector(self.result.type, self.name)
        element = source.element_type
        if not isinstance(element, IntegerType) or element.width.data not in (8, 32):
            raise VerifyException(f"loop.vsitofp: expected a vector of i8 or i32, got "
                                  f"{source}")
        if result != VectorType(f32, source.get_shape()):
            raise VerifyException(f"loop.vsitofp: the result must be "
                                  f"{VectorType(f32, source.get_shape())}, got {result}")

    def print(self, printer: Printer) -> None:
        _print_unary(printer, self.input, self.result)

    @classmethod
    def parse(cls, parser: Parser) -> VSIToFPOp:
        # the result type as written (the verifier rejects one that is not f32 lanes)
        value, result, _ = _parse_unary(parser, vector_result=False)
        return cls.build(operands=[value], result_types=[result])


@irdl_op_definition
class VFPToSIOp(IRDLOperation):
    """Lane ``l`` is the f32 lane ``l`` truncated toward zero to an i8
    (``arith.fptosi`` per lane; xDSL 0.75's takes scalars only), for values
    whose truncation lies in [-128, 127] (outside it C's conversion is
    undefined, and the vector form keeps the low byte of the 32-bit
    truncation): kernel B's quantized activations, already clamped to
    [-127, 127], ``%q = loop.vfptosi %x : vector<16xf32> -> vector<16xi8>``."""

    name = "loop.vfptosi"
    input = operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue) -> None:
        assert isinstance(value.type, VectorType)
        super().__init__(operands=[value], result_types=[VectorType(i8, value.type.get_shape())])

    def verify_(self) -> None:
        source = _vector(self.input.type, self.name)
        result = _vector(self.result.type, self.name)
        if source.element_type != f32:
            raise VerifyException(f"loop.vfptosi: expected a vector of f32, got {source}")
        if result != VectorType(i8, source.get_shape()):
            raise VerifyException(f"loop.vfptosi: the result must be "
                                  f"{VectorType(i8, source.get_shape())}, got {result}")

    def print(self, printer: Printer) -> None:
        _print_unary(printer, self.input, self.result)

    @classmethod
    def parse(cls, parser: Parser) -> VFPToSIOp:
        # the result type as written (the verifier rejects one that is not i8 lanes)
        value, result, _ = _parse_unary(parser, vector_result=True)
        return cls.build(operands=[value], result_types=[result])


@irdl_op_definition
class LaneSumOp(IRDLOperation):
    """A tree of a vector's lanes (the module docstring): the halving tree, or
    the optional ``tree``'s order of the lane bits."""

    name = "loop.lanesum"
    input = operand_def(VectorType)
    result = result_def()
    tree = opt_prop_def(ArrayAttr[IntAttr])
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue, tree: Sequence[int] | None = None) -> None:
        assert isinstance(value.type, VectorType)
        props = {} if tree is None else {"tree": tree_attr(tree)}
        super().__init__(operands=[value], result_types=[value.type.element_type],
                         properties=props)

    @property
    def lane_tree(self) -> tuple[int, ...]:
        """The order of the lane bits (the halving tree when none is given)."""
        vector = self.input.type
        assert isinstance(vector, VectorType)
        if self.tree is None:
            return halving_tree(vector.get_shape()[0])
        return tuple(b.data for b in self.tree.data)

    def verify_(self) -> None:
        vector = _vector(self.input.type, self.name)
        lanes = vector.get_shape()[0]
        if lanes not in LANE_COUNTS:
            raise VerifyException(f"loop.lanesum: expected {', '.join(map(str, LANE_COUNTS))} "
                                  f"lanes, got {lanes}")
        if self.result.type != vector.element_type:
            raise VerifyException(f"loop.lanesum: the result must be {vector.element_type}, "
                                  f"got {self.result.type}")
        if self.tree is not None:
            error = tree_error(self.lane_tree, lanes)
            if error is not None:
                raise VerifyException(f"loop.lanesum: {error}")

    def print(self, printer: Printer) -> None:
        _print_unary(printer, self.input, self.result,
                     None if self.tree is None else self.lane_tree)

    @classmethod
    def parse(cls, parser: Parser) -> LaneSumOp:
        value, result, tree = _parse_unary(parser, vector_result=False, tree_of=cls.name)
        props = {} if tree is None else {"tree": tree_attr(tree)}
        return cls.build(operands=[value], result_types=[result], properties=props)


@irdl_op_definition
class FoldHalfOp(IRDLOperation):
    """The two halves of a vector added: lane ``i`` of the result (``W / 2``
    lanes) is ``v[i] + v[i + W / 2]``, one f32 add each (the first step of
    a lanes tree whose first bit is the vector's top lane bit:
    ``LaneOrder.vector_split``).

    ``%h = loop.foldhalf %v : vector<16xf32> -> vector<8xf32>``
    """

    name = "loop.foldhalf"
    input = operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue) -> None:
        assert isinstance(value.type, VectorType)
        half = value.type.get_shape()[0] // 2
        super().__init__(operands=[value],
                         result_types=[VectorType(value.type.element_type, [half])])

    def verify_(self) -> None:
        vector = _vector(self.input.type, self.name)
        lanes = vector.get_shape()[0]
        if vector.element_type != f32 or lanes not in LANE_COUNTS or lanes < 4:
            raise VerifyException(f"loop.foldhalf: expected a vector of 4 to 32 f32 lanes, "
                                  f"got {vector}")
        want = VectorType(f32, [lanes // 2])
        if self.result.type != want:
            raise VerifyException(f"loop.foldhalf: the result of {vector} must be {want}, "
                                  f"got {self.result.type}")

    def print(self, printer: Printer) -> None:
        _print_unary(printer, self.input, self.result)

    @classmethod
    def parse(cls, parser: Parser) -> FoldHalfOp:
        value, result, _ = _parse_unary(parser, vector_result=True)
        return cls.build(operands=[value], result_types=[result])


@irdl_op_definition
class HalfOp(IRDLOperation):
    """The low (``[0]``) or high (``[1]``) half of a vector's lanes, as a vector:
    lane ``i`` of the result is lane ``i + half * W / 2`` of the operand (a
    row's max folds its lanes by halves: ``vectorize``).

    ``%h = loop.half %v[1] : vector<16xf32> -> vector<8xf32>``
    """

    name = "loop.half"
    input = operand_def(VectorType)
    half = prop_def(IntAttr)
    result = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue, half: int) -> None:
        assert isinstance(value.type, VectorType)
        lanes = value.type.get_shape()[0] // 2
        super().__init__(operands=[value], properties={"half": IntAttr(half)},
                         result_types=[VectorType(value.type.element_type, [lanes])])

    def verify_(self) -> None:
        vector = _vector(self.input.type, self.name)
        lanes = vector.get_shape()[0]
        if vector.element_type != f32 or lanes not in LANE_COUNTS or lanes < 8:
            raise VerifyException(f"loop.half: expected a vector of 8 to 32 f32 lanes, got "
                                  f"{vector}")
        if self.half.data not in (0, 1):
            raise VerifyException(f"loop.half: the half is 0 (low) or 1 (high), got "
                                  f"{self.half.data}")
        want = VectorType(f32, [lanes // 2])
        if self.result.type != want:
            raise VerifyException(f"loop.half: the result of {vector} must be {want}, "
                                  f"got {self.result.type}")

    def print(self, printer: Printer) -> None:
        _print_indexed(printer, self.input, self.half.data, self.result)

    @classmethod
    def parse(cls, parser: Parser) -> HalfOp:
        value, half, result = _parse_indexed(parser)
        return cls.build(operands=[value], result_types=[result],
                         properties={"half": IntAttr(half)})


DOT_GROUP = 4  # bytes per lane of ``loop.dot4`` (one vpdpbusd dword)
DOT_LANES = (1, 4, 8, 16)  # i32 lanes of a ``loop.dot4`` (1: a scalar i32)


def dot_result_type(operand: Attribute) -> Attribute:
    """The result of ``loop.dot4`` on ``operand`` (``vector<4Lxi8>``): ``i32`` for
    ``L = 1``, else ``vector<Lxi32>``."""
    from xdsl.dialects.builtin import i32

    assert isinstance(operand, VectorType)
    lanes = operand.get_shape()[0] // DOT_GROUP
    return i32 if lanes == 1 else VectorType(i32, [lanes])


@irdl_op_definition
class DotI8Op(IRDLOperation):
    """The exact int8 dot of 4 bytes per lane (the module docstring):
    ``%p = loop.dot4 %xq, %w : vector<32xi8> -> vector<8xi32>``, lane ``l`` =
    ``sum_{j<4} (w[4l+j] + 128) * xq[4l+j]``; 4 bytes give a scalar ``i32``."""

    name = "loop.dot4"
    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue, rhs: SSAValue) -> None:
        super().__init__(operands=[lhs, rhs], result_types=[dot_result_type(lhs.type)])

    @property
    def lanes(self) -> int:
        """The i32 lanes of the result (1: scalar)."""
        assert isinstance(self.lhs.type, VectorType)
        return self.lhs.type.get_shape()[0] // DOT_GROUP

    def verify_(self) -> None:
        vector = _vector(self.lhs.type, self.name)
        element = vector.element_type
        shape = vector.get_shape()[0]
        if not isinstance(element, IntegerType) or element.width.data != 8 \
                or shape % DOT_GROUP or shape // DOT_GROUP not in DOT_LANES:
            raise VerifyException(f"loop.dot4: expected vectors of 4, 16, 32 or 64 i8 "
                                  f"(4 bytes per i32 lane), got {vector}")
        if self.rhs.type != vector:
            raise VerifyException(f"loop.dot4: operands differ in type ({vector} and "
                                  f"{self.rhs.type})")
        want = dot_result_type(vector)
        if self.result.type != want:
            raise VerifyException(f"loop.dot4: the result of {vector} must be {want}, got "
                                  f"{self.result.type}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.lhs)
        printer.print_string(", ")
        printer.print_operand(self.rhs)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> DotI8Op:
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        pos = parser.pos
        vector = parser.parse_type()
        if not isinstance(vector, VectorType):
            parser.raise_error(f"expected a vector of i8, got {vector}", pos, parser.pos)
        parser.parse_punctuation("->")
        result = parser.parse_type()  # as written (the verifier checks it)
        return cls.build(operands=[parser.resolve_operand(lhs, vector),
                                   parser.resolve_operand(rhs, vector)],
                         result_types=[result])


def _check_lane_count(op: str, count: int) -> None:
    if count not in LANE_COUNTS:
        raise VerifyException(f"{op}: expected {', '.join(map(str, LANE_COUNTS))} operands "
                              f"(one per lane), got {count}")


def _print_lanes(printer: Printer, values: Sequence[SSAValue], result: SSAValue) -> None:
    """`` %a, %b : T -> U`` (operands of one type)."""
    printer.print_string(" ")
    printer.print_list(values, printer.print_operand)
    printer.print_string(" : ")
    printer.print_attribute(values[0].type)
    printer.print_string(" -> ")
    printer.print_attribute(result.type)


def _parse_lanes(parser: Parser) -> tuple[list[SSAValue], Attribute]:
    """The resolved operands (one type) and the result type of `` %a, %b : T -> U``."""
    values = parser.parse_comma_separated_list(parser.Delimiter.NONE,
                                               parser.parse_unresolved_operand)
    parser.parse_punctuation(":")
    operand = parser.parse_type()
    parser.parse_punctuation("->")
    result = parser.parse_type()  # as written (the verifier checks it)
    return [parser.resolve_operand(v, operand) for v in values], result


@irdl_op_definition
class LaneSumsOp(IRDLOperation):
    """``N`` lanesums as the lanes of one vector: lane ``i`` of the result is
    ``loop.lanesum`` (the halving tree) of operand ``i``, bit for bit.

    ``%s = loop.lanesums %a, %b, %c, %d : vector<16xf32> -> vector<4xf32>``
    """

    name = "loop.lanesums"
    inputs = var_operand_def(VectorType)
    result = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, values: Sequence[SSAValue]) -> None:
        vector = values[0].type
        assert isinstance(vector, VectorType)
        super().__init__(operands=[list(values)],
                         result_types=[VectorType(vector.element_type, [len(values)])])

    def verify_(self) -> None:
        vector = _vector(self.inputs[0].type, self.name)
        if vector.get_shape()[0] not in LANE_COUNTS:
            raise VerifyException(f"loop.lanesums: expected operands of "
                                  f"{', '.join(map(str, LANE_COUNTS))} lanes, got {vector}")
        if any(v.type != vector for v in self.inputs):
            raise VerifyException("loop.lanesums: the operands differ in type")
        _check_lane_count(self.name, len(self.inputs))
        want = VectorType(vector.element_type, [len(self.inputs)])
        if self.result.type != want:
            raise VerifyException(f"loop.lanesums: {len(self.inputs)} operands of {vector} "
                                  f"give {want}, got {self.result.type}")

    def print(self, printer: Printer) -> None:
        _print_lanes(printer, list(self.inputs), self.result)

    @classmethod
    def parse(cls, parser: Parser) -> LaneSumsOp:
        values, result = _parse_lanes(parser)
        return cls.build(operands=[values], result_types=[result])


@irdl_op_definition
class VPackOp(IRDLOperation):
    """A vector of ``N`` scalars: lane ``i`` is operand ``i``.

    ``%p = loop.vpack %a, %b, %c, %d : f32 -> vector<4xf32>``
    """

    name = "loop.vpack"
    inputs = var_operand_def()
    result = result_def(VectorType)
    traits = traits_def(Pure())

    def __init__(self, values: Sequence[SSAValue]) -> None:
        super().__init__(operands=[list(values)],
                         result_types=[VectorType(values[0].type, [len(values)])])

    def verify_(self) -> None:
        scalar = self.inputs[0].type
        if isinstance(scalar, VectorType) or any(v.type != scalar for v in self.inputs):
            raise VerifyException("loop.vpack: expected scalars of one type")
        _check_lane_count(self.name, len(self.inputs))
        want = VectorType(scalar, [len(self.inputs)])
        if self.result.type != want:
            raise VerifyException(f"loop.vpack: {len(self.inputs)} operands of {scalar} give "
                                  f"{want}, got {self.result.type}")

    def print(self, printer: Printer) -> None:
        _print_lanes(printer, list(self.inputs), self.result)

    @classmethod
    def parse(cls, parser: Parser) -> VPackOp:
        values, result = _parse_lanes(parser)
        return cls.build(operands=[values], result_types=[result])


@irdl_op_definition
class ExtractOp(IRDLOperation):
    """Lane ``lane`` of a vector, as a scalar.

    ``%x = loop.extract %v[2] : vector<4xf32> -> f32``
    """

    name = "loop.extract"
    input = operand_def(VectorType)
    lane = prop_def(IntAttr)
    result = result_def()
    traits = traits_def(Pure())

    def __init__(self, value: SSAValue, lane: int) -> None:
        assert isinstance(value.type, VectorType)
        super().__init__(operands=[value], result_types=[value.type.element_type],
                         properties={"lane": IntAttr(lane)})

    def verify_(self) -> None:
        vector = _vector(self.input.type, self.name)
        lanes = vector.get_shape()[0]
        if not 0 <= self.lane.data < lanes:
            raise VerifyException(f"loop.extract: lane {self.lane.data} of {vector} (lanes "
                                  f"0..{lanes - 1})")
        if self.result.type != vector.element_type:
            raise VerifyException(f"loop.extract: the result must be {vector.element_type}, "
                                  f"got {self.result.type}")

    def print(self, printer: Printer) -> None:
        _print_indexed(printer, self.input, self.lane.data, self.result)

    @classmethod
    def parse(cls, parser: Parser) -> ExtractOp:
        value, lane, result = _parse_indexed(parser)
        return cls.build(operands=[value], result_types=[result],
                         properties={"lane": IntAttr(lane)})


VECTOR_OPS: list[type[IRDLOperation]] = [SplatOp, VCmpOp, VSelectOp, VSIToFPOp, VFPToSIOp,
                                         LaneSumOp, FoldHalfOp, HalfOp, DotI8Op, LaneSumsOp,
                                         VPackOp, ExtractOp]

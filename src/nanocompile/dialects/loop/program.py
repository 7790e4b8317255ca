"""The program-level ops of the Loop dialect: buffers, views, requirements,
launches and the ``loop.program`` that holds them (registered in
``dialects/loop/__init__.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    IntAttr,
    StringAttr,
    SymbolRefAttr,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
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
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from nanocompile.dialects.common.attributes import DimAttr, ElementsAttr
from nanocompile.dialects.common.syntax import parse_dim_expr
from nanocompile.dialects.loop.types import (
    BufType,
    LayoutAttr,
    ViewType,
    _dims_text,
    _parse_dims,
)
from nanocompile.ir.symbolic import Expr, ExprLike

# --------------------------------------------------------------------------
# Program-level ops
# --------------------------------------------------------------------------

BUFFER_KINDS = ("input", "weight", "output", "const", "temp", "packed", "state")


@irdl_op_definition
class BufferOp(IRDLOperation):
    """A buffer of the program: a graph input, weight or output (by name), a
    constant (with its values), a temporary (placed in the arena), a packed
    copy of a weight (``sched.pack``: made by the runtime when it binds the
    weight; ``[N, K]`` becomes ``[N / tile, K, tile]``) or a state (by name:
    an input that is also an output, updated in place: the KV cache).

    ``%b = loop.buffer temp : !loop.buf<[seq, 896], f32>``,
    ``%w = loop.buffer weight "model.norm.weight" : !loop.buf<[896], f32>``,
    ``%p = loop.buffer packed "lm_head.weight" tile 8 : !loop.buf<[112, 896, 8], f32>``
    """

    name = "loop.buffer"
    kind = prop_def(StringAttr)
    buffer_name = opt_prop_def(StringAttr, prop_name="name")
    value = opt_prop_def(ElementsAttr)
    tile = opt_prop_def(IntAttr)
    result = result_def(BufType)

    def __init__(self, kind: str, buf_type: BufType, name: str | None = None,
                 value: ElementsAttr | None = None, tile: int | None = None) -> None:
        props: dict[str, Attribute] = {"kind": StringAttr(kind)}
        if name is not None:
            props["name"] = StringAttr(name)
        if value is not None:
            props["value"] = value
        if tile is not None:
            props["tile"] = IntAttr(tile)
        super().__init__(properties=props, result_types=[buf_type])

    def verify_(self) -> None:
        kind = self.kind.data
        if kind not in BUFFER_KINDS:
            raise VerifyException(f"loop.buffer: unknown kind '{kind}', expected one of "
                                  f"{', '.join(BUFFER_KINDS)}")
        named = kind in ("input", "weight", "output", "packed", "state")
        if (kind == "packed") != (self.tile is not None):
            raise VerifyException(f"loop.buffer {kind}: a tile is "
                                  f"{'required' if kind == 'packed' else 'not allowed'}")
        if self.tile is not None:
            dims = self.result.type.dims
            if len(dims) != 3 or dims[2] != self.tile.data or self.tile.data < 2:
                raise VerifyException(f"loop.buffer packed: expected a [N / {self.tile.data}, "
                                      f"K, {self.tile.data}] buffer, got {_dims_text(dims)}")
        if named != (self.buffer_name is not None):
            raise VerifyException(f"loop.buffer {kind}: a name is "
                                  f"{'required' if named else 'not allowed'}")
        if (kind == "const") != (self.value is not None):
            raise VerifyException(f"loop.buffer {kind}: values are "
                                  f"{'required' if kind == 'const' else 'not allowed'}")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.kind.data}")
        if self.buffer_name is not None:
            printer.print_string(" ")
            printer.print_string_literal(self.buffer_name.data)
        if self.tile is not None:
            printer.print_string(f" tile {self.tile.data}")
        if self.value is not None:
            printer.print_string(" ")
            printer.print_attribute(self.value)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> BufferOp:
        kind = parser.parse_identifier()
        name = parser.parse_optional_str_literal()
        value = tile = None
        if parser.parse_optional_keyword("tile") is not None:
            tile = parser.parse_integer(allow_boolean=False, allow_negative=False)
        if kind == "const":
            value = parser.parse_attribute()
        parser.parse_punctuation(":")
        buf = parser.parse_type()
        return cls(kind, buf, name, value, tile)  # type: ignore[arg-type]  # the verifier checks


@irdl_op_definition
class ViewOp(IRDLOperation):
    """A strided view of a buffer: ``%v = loop.view %b layout <0, [896, 1]> :
    !loop.buf<[seq, 896], f32> -> !loop.view<[seq, 896], f32>``."""

    name = "loop.view"
    source = operand_def(BufType)
    layout = prop_def(LayoutAttr)
    result = result_def(ViewType)
    traits = traits_def(Pure())

    def __init__(self, source: SSAValue, shape: Sequence[ExprLike], offset: ExprLike,
                 strides: Sequence[ExprLike]) -> None:
        assert isinstance(source.type, BufType)
        super().__init__(operands=[source],
                         properties={"layout": LayoutAttr.get(offset, strides)},
                         result_types=[ViewType.get(source.type.dtype.data, shape)])

    def verify_(self) -> None:
        shape, strides = self.result.type.dims, self.layout.stride_exprs
        if len(shape) != len(strides):
            raise VerifyException(f"loop.view: {len(shape)} dims but {len(strides)} strides")
        source = self.source.type
        assert isinstance(source, BufType)  # the operand's constraint is verified first
        if self.result.type.dtype != source.dtype:
            raise VerifyException("loop.view: the view and its buffer differ in dtype")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(f" layout <{self.layout.offset_expr}, "
                             f"{_dims_text(self.layout.stride_exprs)}> : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ViewOp:
        src = parser.parse_unresolved_operand()
        parser.parse_keyword("layout")
        parser.parse_punctuation("<")
        offset = parse_dim_expr(parser)
        parser.parse_punctuation(",")
        strides = _parse_dims(parser)
        parser.parse_punctuation(">")
        parser.parse_punctuation(":")
        buf_type = parser.parse_type()
        parser.parse_punctuation("->")
        view_type = parser.parse_type()
        if not isinstance(view_type, ViewType):
            parser.raise_error(f"expected a !loop.view type, got {view_type}")
        # the view type as written (the verifier rejects a dtype the buffer has not)
        return cls.build(operands=[parser.resolve_operand(src, buf_type)],
                         properties={"layout": LayoutAttr.get(offset, strides)},
                         result_types=[view_type])


@irdl_op_definition
class RequireOp(IRDLOperation):
    """A run-time precondition of the program on its symbols: ``expr >= 0``.

    ``loop.require seq - 1 >= 0, "graph.slice: start past the end"``. The
    runtime and the C entry both check every requirement before any kernel
    runs (a symbolic slice whose bounds the verifier could not decide).
    """

    name = "loop.require"
    expr = prop_def(DimAttr)
    message = prop_def(StringAttr)

    def __init__(self, expr: ExprLike, message: str) -> None:
        super().__init__(properties={"expr": DimAttr(Expr.lift(expr)),
                                     "message": StringAttr(message)})

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.expr.data} >= 0, ")
        printer.print_string_literal(self.message.data)

    @classmethod
    def parse(cls, parser: Parser) -> RequireOp:
        expr = parse_dim_expr(parser)
        # MLIR's lexer has no `>=` token: it is `>` directly followed by `=`.
        pos = parser.pos
        if (parser.parse_optional_punctuation(">") is None or parser.pos != pos + 1
                or parser.parse_optional_punctuation("=") is None
                or parser.parse_optional_integer(allow_boolean=False) != 0):
            parser.raise_error("expected '>= 0'", pos, parser.pos)
        parser.parse_punctuation(",")
        return cls(expr, parser.parse_str_literal())


@irdl_op_definition
class LaunchOp(IRDLOperation):
    """Run a kernel on views (one per kernel argument), in program order:
    ``loop.launch @add_2d(%out, %a, %b) : !loop.view<...>, ...``."""

    name = "loop.launch"
    kernel = prop_def(SymbolRefAttr)
    views = var_operand_def(ViewType)
    assembly_format = "$kernel `(` $views `)` attr-dict `:` type($views)"

    def __init__(self, kernel: str, views: Sequence[SSAValue]) -> None:
        super().__init__(operands=[list(views)], properties={"kernel": SymbolRefAttr(kernel)})

    @property
    def kernel_name(self) -> str:
        return self.kernel.root_reference.data


@irdl_op_definition
class OutputOp(IRDLOperation):
    """The program's named outputs, each a whole ``output`` buffer:
    ``loop.output "logits" = %b : !loop.buf<[seq, 151936], f32>``."""

    name = "loop.output"
    buffers = var_operand_def(BufType)
    output_names = prop_def(ArrayAttr[StringAttr], prop_name="names")
    traits = traits_def(IsTerminator())

    def __init__(self, outputs: Sequence[tuple[str, SSAValue]]) -> None:
        super().__init__(operands=[[v for _, v in outputs]],
                         properties={"names": ArrayAttr([StringAttr(n) for n, _ in outputs])})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.data for s in self.output_names.data)

    def print(self, printer: Printer) -> None:
        pairs = list(zip(self.names, self.buffers, strict=True))
        if not pairs:
            return
        printer.print_string(" ")

        def pair(p: tuple[str, SSAValue]) -> None:
            printer.print_string_literal(p[0])
            printer.print_string(" = ")
            printer.print_operand(p[1])

        printer.print_list(pairs, pair)
        printer.print_string(" : ")
        printer.print_list([b.type for b in self.buffers], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> OutputOp:
        pairs = []
        if (first := parser.parse_optional_str_literal()) is not None:
            parser.parse_punctuation("=")
            pairs.append((first, parser.parse_unresolved_operand()))
            while parser.parse_optional_punctuation(",") is not None:
                name = parser.parse_str_literal()
                parser.parse_punctuation("=")
                pairs.append((name, parser.parse_unresolved_operand()))
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        else:
            types = []
        return cls([(n, parser.resolve_operand(u, t))
                    for (n, u), t in zip(pairs, types, strict=True)])


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """The host side of a compiled graph: buffers, views and kernel launches.

    ``loop.program @qwen2 syms ["seq", "past"] { ... loop.output ... }``
    """

    name = "loop.program"
    sym_name = prop_def(StringAttr)
    syms = prop_def(ArrayAttr[StringAttr])
    body = region_def("single_block")

    def __init__(self, name: str, symbols: Sequence[str], body: Block) -> None:
        super().__init__(properties={"sym_name": StringAttr(name),
                                     "syms": ArrayAttr([StringAttr(s) for s in symbols])},
                         regions=[Region(body)])

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(s.data for s in self.syms.data)

    def buffers(self) -> list[BufferOp]:
        return [op for op in self.body.block.ops if isinstance(op, BufferOp)]

    def launches(self) -> list[LaunchOp]:
        return [op for op in self.body.block.ops if isinstance(op, LaunchOp)]

    def requirements(self) -> list[RequireOp]:
        return [op for op in self.body.block.ops if isinstance(op, RequireOp)]

    def output_op(self) -> OutputOp:
        last = self.body.block.last_op
        if not isinstance(last, OutputOp):
            raise VerifyException(f"loop.program @{self.sym_name.data} must end with loop.output")
        return last

    def verify_(self) -> None:
        self.output_op()

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" syms [")
        printer.print_list(self.symbols, printer.print_string_literal)
        printer.print_string("] ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> ProgramOp:
        name = parser.parse_symbol_name().data
        parser.parse_keyword("syms")
        syms = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                 parser.parse_str_literal)
        region = parser.parse_region()
        return cls(name, syms, region.detach_block(0))

"""Structural checks xDSL's ``verify()`` does not make.

``verify()`` does not check SSA dominance: a value used before the op that
defines it, in the same block, parses and verifies. ``check_dominance`` walks
every block in order and rejects any use of a value that is not yet visible
(defined earlier in the block, an argument of an enclosing block, or defined
earlier in an enclosing block). ``OpVerifyException`` is a verifier error
that names the op to blame.
"""

from __future__ import annotations

from xdsl.dialects.builtin import FileLineColLoc
from xdsl.ir import Block, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException


class OpVerifyException(VerifyException):
    """A verifier failure that names the op to blame (a nested op, a directive),
    so that nc-opt points at that op's source line rather than its parent's."""

    def __init__(self, message: str, op: Operation) -> None:
        super().__init__(message)
        self.op = op


class DominanceError(ValueError):
    """An operand is used where its definition is not visible."""

    def __init__(self, op: Operation, index: int) -> None:
        value = op.operands[index]
        name = f"%{value.name_hint}" if value.name_hint else f"operand #{index}"
        super().__init__(f"{op.name}: {name} is used before it is defined")
        self.op = op


def check_dominance(root: Operation) -> None:
    """Raise ``DominanceError`` at the first use of a value that is not visible."""
    _check_op(root, set())


def _check_op(op: Operation, visible: set[SSAValue]) -> None:
    for i, operand in enumerate(op.operands):
        if operand not in visible:
            raise DominanceError(op, i)
    for region in op.regions:
        for block in region.blocks:
            _check_block(block, set(visible))


def _check_block(block: Block, visible: set[SSAValue]) -> None:
    visible.update(block.args)
    for op in block.ops:
        _check_op(op, visible)
        visible.update(op.results)


def where(op: Operation) -> str:
    """``file:line:col: `` of an op parsed from text (nc-opt records it), else nothing."""
    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return f"{loc.filename.data}:{loc.line.data}:{loc.column.data}: "
    return ""

"""``fold-constants``: evaluate primitives whose operands are all constants.

A folded value is computed by the interpreter's own kernel for that
primitive. Only primitives whose result is exactly determined are folded
(movement, integer arithmetic, and the correctly rounded f32 operations
add, sub, mul, div, sqrt, reciprocal, comparisons, selects, casts, max):
there the interpreter, the unfused kernels and the fused kernels all
produce the same bits. ``exp``, ``sin``, ``cos`` (libm and NumPy differ in
the last ulp), float ``reduce_sum`` and ``matmul`` (summation order) are
never folded, nor is anything with a symbolic shape (its size is only known
at run time), ``graph.dim`` of a symbolic expression, or a result larger than
``max_elements`` (a constant is stored in the generated code).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from nanocompile.dialects import graph as g
from nanocompile.interpreter import KERNELS


class FoldConstant(RewritePattern):
    """Replace a primitive of constants by the constant it computes."""

    def __init__(self, max_elements: int) -> None:
        self.max_elements = max_elements

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, g.PurePrimitiveOp) or isinstance(op, g.ConstOp):
            return
        kernel = KERNELS.get(type(op))
        consts = [v.owner for v in op.operands if isinstance(v.owner, g.ConstOp)]
        if kernel is None or len(consts) != len(op.operands):
            return
        if not _exact(op):
            return
        spec = g.tensor_spec(op.results[0])
        if any(not d.is_const for d in spec.shape) or _props_symbolic(op):
            return
        count = int(np.prod([d.const_value for d in spec.shape], dtype=np.int64))
        if count > self.max_elements:
            return
        args = [c.to_array() for c in consts]
        with np.errstate(all="ignore"):
            value = np.asarray(kernel(op, args, {}))
        folded = g.ConstOp(np.array(value, copy=True), spec.dtype)  # keeps 0-d
        folded.result.name_hint = op.results[0].name_hint
        rewriter.replace(op, folded)


_INEXACT = (g.ExpOp, g.SinOp, g.CosOp, g.MatmulOp)


def _exact(op: Operation) -> bool:
    """Whether every backend computes this primitive to the same bits."""
    if isinstance(op, _INEXACT):
        return False
    return not (isinstance(op, g.ReduceSumOp) and op.result.type.dtype.data == "f32")


def _props_symbolic(op: Operation) -> bool:
    return any(isinstance(p, g.DimAttr) and not p.data.is_const
               for p in op.properties.values())


@dataclass(frozen=True)
class FoldConstantsPass(ModulePass):
    """Fold every primitive whose operands are constants (bitwise, see module doc)."""

    name = "fold-constants"
    max_elements: int = 1 << 16

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier(
            [FoldConstant(self.max_elements)], dce_enabled=False)).rewrite_module(op)

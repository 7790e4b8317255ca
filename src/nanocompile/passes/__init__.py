"""nanocompile's passes, registered lazily (pass name -> factory).

``cse`` and ``dce`` are xDSL's own: graph primitives carry the ``Pure`` trait
(all but ``graph.input`` and ``graph.weight``, which are the signature), so
xDSL's passes apply to them unchanged.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass ``nc-opt -p`` accepts; the key is the pass's ``name``."""
    def lower_graph_to_loop() -> type[ModulePass]:
        from nanocompile.passes.lower_graph_to_loop import LowerGraphToLoopPass

        return LowerGraphToLoopPass

    def fuse() -> type[ModulePass]:
        from nanocompile.passes.fuse import FusePass

        return FusePass

    def fold_constants() -> type[ModulePass]:
        from nanocompile.passes.fold_constants import FoldConstantsPass

        return FoldConstantsPass

    def cse() -> type[ModulePass]:
        from xdsl.transforms.common_subexpression_elimination import (
            CommonSubexpressionElimination,
        )

        return CommonSubexpressionElimination

    def dce() -> type[ModulePass]:
        from xdsl.transforms.dead_code_elimination import DeadCodeElimination

        return DeadCodeElimination

    def apply_schedule() -> type[ModulePass]:
        from nanocompile.passes.apply_schedule import ApplySchedulePass

        return ApplySchedulePass

    def default_schedule() -> type[ModulePass]:
        from nanocompile.passes.default_schedule import DefaultSchedulePass

        return DefaultSchedulePass

    def quantize_int8() -> type[ModulePass]:
        from nanocompile.passes.quantize_int8 import QuantizeInt8Pass

        return QuantizeInt8Pass

    return {
        "apply-schedule": apply_schedule,
        "cse": cse,
        "dce": dce,
        "default-schedule": default_schedule,
        "fold-constants": fold_constants,
        "fuse": fuse,
        "lower-graph-to-loop": lower_graph_to_loop,
        "quantize-int8": quantize_int8,
    }

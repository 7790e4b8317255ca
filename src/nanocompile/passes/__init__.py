"""nanocompile's passes, registered lazily (pass name -> factory)."""

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

    return {
        "fuse": fuse,
        "lower-graph-to-loop": lower_graph_to_loop,
    }

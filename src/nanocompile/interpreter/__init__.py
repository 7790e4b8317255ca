"""Reference semantics: the NumPy interpreter of the Graph dialect (``graph.py``)
defines what a graph means; every compiled backend is tested against it.
``exact.py`` holds the exact f32 arithmetic of its ``exact=True`` mode and of
stated orders (the compiled C's reduction orders and libm functions, spec §5's
int8 kernels)."""

from nanocompile.interpreter.graph import (
    EXACT_KERNELS,
    KERNELS,
    InterpreterBackend,
    InterpreterError,
    find_graph,
    run_graph,
)

__all__ = ["EXACT_KERNELS", "KERNELS", "InterpreterBackend", "InterpreterError", "find_graph",
           "run_graph"]

"""Reference semantics: the NumPy interpreter of the Graph dialect (``graph.py``)
defines what a graph means; every compiled backend is tested against it."""

from nanocompile.interpreter.graph import (
    KERNELS,
    InterpreterBackend,
    InterpreterError,
    find_graph,
    run_graph,
)

__all__ = ["KERNELS", "InterpreterBackend", "InterpreterError", "find_graph", "run_graph"]

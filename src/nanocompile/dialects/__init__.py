"""nanocompile's dialects, registered lazily (name -> factory)."""

from collections.abc import Callable

from xdsl.ir import Dialect


def _graph() -> Dialect:
    from nanocompile.dialects.graph import Graph

    return Graph


def _loop() -> Dialect:
    from nanocompile.dialects.loop import Loop

    return Loop


def _sched() -> Dialect:
    from nanocompile.dialects.sched import Sched

    return Sched


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """nanocompile's own dialects and the xDSL ones it reuses."""
    from xdsl.dialects import get_all_dialects as xdsl_dialects

    reused = {name: factory for name, factory in xdsl_dialects().items()
              if name in ("builtin", "func", "arith", "math", "test")}
    return {**reused, "graph": _graph, "loop": _loop, "sched": _sched}

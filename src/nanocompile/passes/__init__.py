"""nanocompile's passes, registered lazily (pass name -> factory)."""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every pass ``nc-opt -p`` accepts; the key is the pass's ``name``."""
    return {}

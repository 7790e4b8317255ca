"""Emission targets of ``nc-opt -t`` (name -> factory)."""

from collections.abc import Callable

from xdsl.utils.target import Target


def get_all_targets() -> dict[str, Callable[[], type[Target]]]:
    """nanocompile's targets, beside xDSL's own ``mlir``."""
    def c() -> type[Target]:
        from nanocompile.targets.c import EmitCTarget

        return EmitCTarget

    return {"c": c}

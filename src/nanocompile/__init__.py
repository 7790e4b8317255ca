"""nanocompile: a small MLIR-style tensor compiler on xDSL for Qwen2."""

__version__ = "0.1.0"

_API = ("load", "Model", "GenerationResult", "SamplingParams")


def __getattr__(name: str) -> object:
    """``nanocompile.load`` and friends, imported on first use (``import
    nanocompile`` itself stays light: no xDSL, no compiler)."""
    if name in _API:
        from nanocompile import api

        return getattr(api, name)
    raise AttributeError(f"module 'nanocompile' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])

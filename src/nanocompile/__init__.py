"""nanocompile: a small MLIR-style tensor compiler on xDSL for Qwen2."""

__version__ = "0.1.0"

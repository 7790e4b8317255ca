"""The frontend: Python objects whose operators record Graph dialect ops."""

from nanocompile.frontend.tensor import (
    GraphBuilder,
    Tensor,
    broadcast_all,
    concat,
    gather,
    where,
)

__all__ = ["GraphBuilder", "Tensor", "broadcast_all", "concat", "gather", "where"]

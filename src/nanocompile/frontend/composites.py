"""The composites of a Qwen2 block, written once from primitives in the exact
float32 operation order of spec §2.3.

Every function takes and returns ``Tensor`` handles; nothing here computes,
it only records the graph. The order of floating-point operations written
here is the model's definition: later passes may move operations between
kernels but never reorder the ones that produce a value.
"""

from __future__ import annotations

import numpy as np

from nanocompile.frontend.tensor import GraphBuilder, Tensor, concat, where
from nanocompile.ir.symbolic import Expr, ExprLike


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ W.T (+ b)`` with ``W`` in HF layout ``[out, in]``; the transpose is a
    view (``graph.permute``), never a copied weight."""
    y = x @ weight.T
    return y + bias if bias is not None else y


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """``ms = sum(x*x, -1) / n``; ``r = 1 / sqrt(ms + eps)``; ``(x * r) * w``."""
    n = x.shape[-1]
    if not n.is_const:
        raise ValueError(f"rms_norm needs a concrete last dim, got {n}")
    ms = (x * x).sum(-1) / float(n.const_value)
    r = (ms + float(np.float32(eps))).sqrt().reciprocal()
    return (x * r) * weight


def sigmoid(x: Tensor) -> Tensor:
    """``e = exp(-|x|)`` via a select; ``where(x >= 0, 1, e) / (e + 1)``: exact in
    both tails, never overflows."""
    nn = x >= 0.0
    e = where(nn, -x, x).exp()
    return where(nn, 1.0, e) / (e + 1.0)


def silu(x: Tensor) -> Tensor:
    return x * sigmoid(x)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``e = exp(x - max(x))``; ``e / sum(e)``."""
    e = (x - x.max(axis)).exp()
    return e / e.sum(axis)


def rope_inverse_frequencies(head_dim: int, theta: float) -> np.ndarray:
    """``1 / theta ** (arange(0, d, 2) / d)`` computed in f32 (an f32 power)."""
    exponent = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    return (np.float32(1.0) / np.power(np.float32(theta), exponent)).astype(np.float32)


def rope_tables(gb: GraphBuilder, seq: ExprLike, past: ExprLike, head_dim: int,
                theta: float) -> tuple[Tensor, Tensor]:
    """``cos``/``sin`` tables ``[seq, head_dim]`` for positions ``past .. past+seq-1``.

    ``angles = f32(position)[:, None] * inv[None, :]`` (one f32 product per
    entry), halves duplicated: ``concat([angles, angles], -1)``.
    """
    inv = gb.const(rope_inverse_frequencies(head_dim, theta), "f32")
    positions = (gb.iota([seq], 0) + gb.dim(past)).cast("f32")
    half = head_dim // 2
    angles = positions.reshape(seq, 1) * inv.reshape(1, half)
    both = concat([angles, angles], -1)
    return both.cos(), both.sin()


def rotate_half(x: Tensor) -> Tensor:
    """``[a | b] -> [-b | a]`` along the last axis."""
    d = x.shape[-1].const_value
    a = x.slice(-1, 0, d // 2)
    b = x.slice(-1, d // 2, d)
    return concat([-b, a], -1)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """``x * cos + rotate_half(x) * sin`` for ``x: [heads, seq, head_dim]``."""
    return x * cos + rotate_half(x) * sin


def causal_mask(gb: GraphBuilder, seq: ExprLike, past: ExprLike) -> Tensor:
    """``[seq, past + seq]``: 0 where key ``j <= past + i`` is visible, -inf elsewhere."""
    total = Expr.lift(past) + Expr.lift(seq)
    j = gb.iota([seq, total], 1)
    i = gb.iota([seq, total], 0)
    visible = j <= i + gb.dim(past)
    return where(visible, 0.0, float("-inf"))


def repeat_kv(x: Tensor, group: int) -> Tensor:
    """``[kv_heads, T, d] -> [kv_heads * group, T, d]``: KV head ``j`` serves query
    heads ``group*j .. group*j + group - 1`` (consecutive repeat, not tile)."""
    if group == 1:
        return x
    kv, t, d = x.shape
    expanded = x.reshape(kv, 1, t, d).broadcast_to(kv, group, t, d)
    return expanded.reshape(kv * group, t, d)


def split_heads(x: Tensor, heads: int, head_dim: int) -> Tensor:
    """``[seq, heads * d] -> [heads, seq, d]`` (reshape, then permute)."""
    seq = x.shape[0]
    return x.reshape(seq, heads, head_dim).permute(1, 0, 2)


def merge_heads(x: Tensor) -> Tensor:
    """``[heads, seq, d] -> [seq, heads * d]`` (permute, then reshape)."""
    heads, seq, d = x.shape
    return x.permute(1, 0, 2).reshape(seq, heads * d)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, scale: float) -> Tensor:
    """``softmax((q @ k^T) * scale + mask) @ v`` for ``[heads, seq|T, d]`` inputs."""
    scores = (q @ k.permute(0, 2, 1)) * scale
    return softmax(scores + mask) @ v

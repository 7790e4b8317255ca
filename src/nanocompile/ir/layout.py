"""Strided layouts over symbolic shapes: how movement primitives become views.

A ``Layout`` maps an index ``(i0, ..., in)`` of a shape to the element
``offset + sum(ik * stride_k)`` of a buffer. Permute swaps strides, broadcast
sets a stretched dim's stride to 0, slice moves the offset, and a reshape is
a view only when every group of merged or split dims is contiguous
(``reshape`` returns None otherwise: the caller emits a copy kernel).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nanocompile.ir.symbolic import Expr, ExprLike, product


def contiguous_strides(shape: Sequence[Expr]) -> tuple[Expr, ...]:
    strides: list[Expr] = []
    acc = Expr.const(1)
    for d in reversed(shape):
        strides.append(acc)
        acc = acc * d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class Layout:
    """A strided view: shape, element offset and strides (all symbolic)."""

    shape: tuple[Expr, ...]
    offset: Expr
    strides: tuple[Expr, ...]

    @staticmethod
    def contiguous(shape: Sequence[ExprLike], offset: ExprLike = 0) -> Layout:
        dims = tuple(Expr.lift(d) for d in shape)
        return Layout(dims, Expr.lift(offset), contiguous_strides(dims))

    @property
    def is_contiguous(self) -> bool:
        """Row-major with no gaps (size-1 dims may have any stride)."""
        expected = contiguous_strides(self.shape)
        return all(d == 1 or s == e for d, s, e in zip(self.shape, self.strides, expected,
                                                       strict=True))

    def distinct_elements(self) -> Expr:
        """Elements the view touches: stride-0 (broadcast) dims count once."""
        return product([d for d, s in zip(self.shape, self.strides, strict=True) if s != 0])

    def permute(self, perm: Sequence[int]) -> Layout:
        return Layout(tuple(self.shape[p] for p in perm), self.offset,
                      tuple(self.strides[p] for p in perm))

    def broadcast(self, shape: Sequence[Expr]) -> Layout:
        strides = tuple(s if old == new else Expr.const(0)
                        for old, new, s in zip(self.shape, shape, self.strides, strict=True))
        return Layout(tuple(shape), self.offset, strides)

    def slice(self, axis: int, start: Expr, stop: Expr) -> Layout:
        shape = list(self.shape)
        shape[axis] = stop - start
        return Layout(tuple(shape), self.offset + start * self.strides[axis], self.strides)

    def reshape(self, shape: Sequence[Expr]) -> Layout | None:
        """The same elements under a new shape, or None when strides cannot say it."""
        new = tuple(shape)
        old = [(d, s) for d, s in zip(self.shape, self.strides, strict=True) if d != 1]
        targets = [i for i, d in enumerate(new) if d != 1]
        strides: list[Expr] = [Expr.const(0)] * len(new)
        oi = 0
        ti = 0
        while ti < len(targets) or oi < len(old):
            group = _next_group(old, oi, [new[t] for t in targets[ti:]])
            if group is None:
                return None
            n_old, n_new = group
            chunk = old[oi:oi + n_old]
            if any(chunk[k][1] != chunk[k + 1][1] * chunk[k + 1][0] for k in range(n_old - 1)):
                return None  # the merged dims are not contiguous with each other
            inner = chunk[-1][1]
            acc = inner
            for t in reversed(targets[ti:ti + n_new]):
                strides[t] = acc
                acc = acc * new[t]
            oi += n_old
            ti += n_new
        return Layout(new, self.offset, tuple(strides))


def _next_group(old: list[tuple[Expr, Expr]], oi: int,
                new: list[Expr]) -> tuple[int, int] | None:
    """The smallest (old dims, new dims) prefix pair with equal products."""
    if oi >= len(old) or not new:
        return None
    for n_old in range(1, len(old) - oi + 1):
        p_old = product([d for d, _ in old[oi:oi + n_old]])
        for n_new in range(1, len(new) + 1):
            if product(new[:n_new]) == p_old:
                return n_old, n_new
    return None

"""nanocompile.ir.layout.Layout: strided views over symbolic shapes, checked against NumPy.

Every derived layout is evaluated at concrete symbol values and turned into a
real NumPy view of a buffer ``base = arange(size)`` with
``np.lib.stride_tricks.as_strided`` (after checking that every address it can
touch lies inside ``base``); that view must equal the same movement done by
NumPy itself (``transpose``, ``broadcast_to``, basic slicing, ``reshape``).
Refusals are checked against NumPy too: where ``Layout.reshape`` returns None,
``np.reshape(..., copy=False)`` must also be unable to give a view.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pytest

from nanocompile.ir.layout import Layout, contiguous_strides
from nanocompile.ir.symbolic import Expr, ExprLike

Bindings = Mapping[str, int]
BINDINGS: list[dict[str, int]] = [{"past": p, "seq": s} for p, s in
                                  [(0, 1), (1, 1), (3, 2), (5, 0), (2, 7)]]


def E(x: ExprLike) -> Expr:
    return Expr.lift(x)


def dims(*shape: ExprLike) -> tuple[Expr, ...]:
    return tuple(E(d) for d in shape)


def concrete(shape: Sequence[Expr], b: Bindings) -> tuple[int, ...]:
    return tuple(d.evaluate(b) for d in shape)


def addresses(layout: Layout, b: Bindings) -> np.ndarray:
    """Element offset of every index of the view, by brute force."""
    shape = concrete(layout.shape, b)
    out = np.full(shape, layout.offset.evaluate(b), dtype=np.int64)
    for axis, stride in enumerate(layout.strides):
        index_shape = [1] * len(shape)
        index_shape[axis] = shape[axis]
        out = out + np.arange(shape[axis]).reshape(index_shape) * stride.evaluate(b)
    return out


def materialize(layout: Layout, base: np.ndarray, b: Bindings) -> np.ndarray:
    """The NumPy view a layout describes over a flat buffer (bounds checked first)."""
    shape = concrete(layout.shape, b)
    offset = layout.offset.evaluate(b)
    strides = [s.evaluate(b) for s in layout.strides]
    assert all(s >= 0 for s in strides), strides
    if 0 not in shape:
        touched = addresses(layout, b)
        assert touched.min() >= 0
        assert touched.max() < base.size, "the layout reaches past its buffer"
    tail = base[offset:] if offset <= base.size else base[:0]
    return np.lib.stride_tricks.as_strided(
        tail, shape=shape, strides=[s * base.itemsize for s in strides], writeable=False)


def numpy_base(shape: Sequence[Expr], b: Bindings) -> tuple[np.ndarray, np.ndarray]:
    """(flat buffer, the same buffer shaped as ``shape``) with distinct elements."""
    sizes = concrete(shape, b)
    flat = np.arange(int(np.prod(sizes, dtype=np.int64)), dtype=np.int64)
    return flat, flat.reshape(sizes)


def check_against_numpy(layout: Layout, source_shape: Sequence[Expr], b: Bindings,
                        numpy_op: Callable[[np.ndarray], np.ndarray]) -> None:
    flat, shaped = numpy_base(source_shape, b)
    got = materialize(layout, flat, b)
    want = numpy_op(shaped)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------
# contiguous
# --------------------------------------------------------------------------


def test_contiguous_strides_concrete_and_symbolic() -> None:
    """Row-major strides, symbolic where the dims are: [2, past, 64] has
    strides [64*past, 64, 1]."""
    assert contiguous_strides(dims(2, 3, 4)) == dims(12, 4, 1)
    lay = Layout.contiguous([2, "past", 64])
    assert lay.strides == dims("64*past", 64, 1)
    assert lay.offset == 0
    assert lay.is_contiguous
    assert Layout.contiguous([]).strides == ()
    assert Layout.contiguous([5], offset="past").offset == E("past")


@pytest.mark.parametrize("b", BINDINGS)
def test_contiguous_matches_numpy(b: Bindings) -> None:
    shape = dims(2, "past + seq", 3)
    check_against_numpy(Layout.contiguous(shape), shape, b, lambda a: a)


# --------------------------------------------------------------------------
# permute, broadcast, slice
# --------------------------------------------------------------------------


@pytest.mark.parametrize("b", BINDINGS)
@pytest.mark.parametrize("perm", [(0, 1, 2), (1, 0, 2), (2, 0, 1), (2, 1, 0)])
def test_permute_swaps_strides(b: Bindings, perm: tuple[int, int, int]) -> None:
    shape = dims(2, "past", 4)
    lay = Layout.contiguous(shape).permute(perm)
    assert lay.strides == tuple(contiguous_strides(shape)[p] for p in perm)
    assert lay.is_contiguous == (perm == (0, 1, 2))
    check_against_numpy(lay, shape, b, lambda a: np.transpose(a, perm))


@pytest.mark.parametrize("b", BINDINGS)
def test_broadcast_is_stride_zero(b: Bindings) -> None:
    """A stretched size-1 dim gets stride 0; the others keep theirs."""
    shape = dims(2, "past", 1, 4)
    target = dims(2, "past", 7, 4)
    lay = Layout.contiguous(shape).broadcast(target)
    assert lay.strides == dims("4*past", 4, 0, 1)
    assert not lay.is_contiguous
    check_against_numpy(lay, shape, b,
                        lambda a: np.broadcast_to(a, concrete(target, b)))


@pytest.mark.parametrize("b", BINDINGS)
def test_slice_symbolic_start_moves_offset(b: Bindings) -> None:
    """Slicing [past, past + seq) of axis 1 of [2, past + seq, 4] moves the offset
    by past * 4 and keeps the strides (the cache-concat pattern)."""
    shape = dims(2, "past + seq", 4)
    lay = Layout.contiguous(shape).slice(1, E("past"), E("past + seq"))
    assert lay.offset == E("4*past")
    assert lay.shape == dims(2, "seq", 4)
    assert lay.strides == dims("4*past + 4*seq", 4, 1)
    p, s = b["past"], b["seq"]
    check_against_numpy(lay, shape, b, lambda a: a[:, p:p + s])


@pytest.mark.parametrize("b", BINDINGS)
def test_slice_of_permuted_and_offset(b: Bindings) -> None:
    """Slices compose: offsets add up through a permute and a second slice."""
    shape = dims("past + seq", 3, 5)
    lay = (Layout.contiguous(shape, offset=2).permute((2, 0, 1))
           .slice(0, E(1), E(4)).slice(1, E("seq"), E("past + seq")))
    assert lay.offset == E("2 + 1 + 15*seq")
    p, s = b["past"], b["seq"]
    flat, shaped = numpy_base(shape, b)
    padded = np.concatenate([np.array([-1, -1]), flat])  # the layout's offset 2
    got = materialize(lay, padded, b)
    np.testing.assert_array_equal(got, np.transpose(shaped, (2, 0, 1))[1:4, s:p + s])


def test_slice_axis0_stays_contiguous() -> None:
    lay = Layout.contiguous(dims("past", 4)).slice(0, E(1), E("past"))
    assert lay.is_contiguous
    assert not Layout.contiguous(dims(3, 8)).slice(1, E(2), E(6)).is_contiguous


# --------------------------------------------------------------------------
# reshape
# --------------------------------------------------------------------------

RESHAPE_VIEWS: list[tuple[str, tuple[ExprLike, ...], tuple[ExprLike, ...]]] = [
    ("merge all", (2, "past", 64), ("2*past*64",)),
    ("merge leading", (2, "past", 64), ("2*past", 64)),
    ("merge trailing", ("seq", 14, 64), ("seq", 896)),
    ("split constant", ("seq", 896), ("seq", 14, 64)),
    ("split symbolic", ("2*past", 3), (2, "past", 3)),
    ("split and merge", (6, 4), (2, 12)),
    ("insert size-1", (3, "past"), (3, 1, "past", 1)),
    ("remove size-1", (1, 3, 1, "past", 1), (3, "past")),
    ("identity", (2, "seq"), (2, "seq")),
    ("0-d to 1", (), (1, 1)),
    ("1 to 0-d", (1, 1), ()),
]


@pytest.mark.parametrize("b", BINDINGS)
@pytest.mark.parametrize(("case", "old", "new"), RESHAPE_VIEWS,
                         ids=[c[0] for c in RESHAPE_VIEWS])
def test_reshape_contiguous_is_a_view(b: Bindings, case: str, old: tuple[ExprLike, ...],
                                      new: tuple[ExprLike, ...]) -> None:
    """Reshapes of a contiguous layout are views with contiguous strides (size-1
    dims may carry any stride) and equal NumPy's reshape."""
    lay = Layout.contiguous(dims(*old)).reshape(dims(*new))
    assert lay is not None, case
    assert lay.is_contiguous, case
    assert lay.offset == 0
    check_against_numpy(lay, dims(*old), b, lambda a: a.reshape(concrete(dims(*new), b)))


@pytest.mark.parametrize("b", BINDINGS)
def test_reshape_symbolic_merge_strides(b: Bindings) -> None:
    """[2, past, 64] -> [2*past*64] is the flat view; -> [2*past, 64] keeps 64, 1."""
    lay = Layout.contiguous(dims(2, "past", 64))
    flat = lay.reshape(dims("128*past"))
    assert flat is not None
    assert flat.strides == dims(1)
    rows = lay.reshape(dims("2*past", 64))
    assert rows is not None
    assert rows.strides == dims(64, 1)
    check_against_numpy(rows, lay.shape, b, lambda a: a.reshape(-1, 64))


@pytest.mark.parametrize("b", BINDINGS)
def test_reshape_keeps_offset_and_outer_strides(b: Bindings) -> None:
    """Splitting the rows of a column slice is a view: only the split group is
    re-strided, the gap between rows and the offset survive."""
    base = Layout.contiguous(dims("2*past", 10)).slice(1, E(2), E(7))
    lay = base.reshape(dims(2, "past", 5))
    assert lay is not None
    assert lay.strides == dims("10*past", 10, 1)
    assert lay.offset == 2
    check_against_numpy(lay, base.shape[:1] + dims(10), b,
                        lambda a: a[:, 2:7].reshape(2, b["past"], 5))


@pytest.mark.parametrize("b", BINDINGS)
def test_reshape_after_permute_splitting_one_dim(b: Bindings) -> None:
    """After a permute, a reshape that only splits a dim (or adds unit dims) is
    still a view."""
    src = dims(2, "seq", 4)
    perm = Layout.contiguous(src).permute((1, 0, 2))  # [seq, 2, 4], strides [4, 4*seq, 1]
    lay = perm.reshape(dims("seq", 1, 2, 2, 2))
    assert lay is not None
    assert (lay.strides[0], *lay.strides[2:]) == dims(4, "4*seq", 2, 1)
    check_against_numpy(lay, src, b,
                        lambda a: a.transpose(1, 0, 2).reshape(b["seq"], 1, 2, 2, 2))


@pytest.mark.parametrize("b", BINDINGS)
def test_reshape_after_broadcast_keeps_stride_zero(b: Bindings) -> None:
    """Splitting a real dim next to a stretched one keeps the stride-0 dim."""
    src = dims("seq", 1, 4)
    stretched = Layout.contiguous(src).broadcast(dims("seq", 3, 4))
    lay = stretched.reshape(dims("seq", 3, 2, 2))
    assert lay is not None
    assert lay.strides == dims(4, 0, 2, 1)
    check_against_numpy(lay, src, b,
                        lambda a: np.broadcast_to(a, (b["seq"], 3, 4)).reshape(b["seq"], 3, 2, 2))


REFUSED: list[tuple[str, Callable[[], Layout], tuple[ExprLike, ...],
                    Callable[[Bindings], tuple[np.ndarray, tuple[int, ...]]]]] = [
    ("merge after permute",
     lambda: Layout.contiguous(dims(2, 3, 4)).permute((1, 0, 2)), (6, 4),
     lambda b: (np.arange(24).reshape(2, 3, 4).transpose(1, 0, 2), (6, 4))),
    ("flatten a transpose",
     lambda: Layout.contiguous(dims("past", 3)).permute((1, 0)), ("3*past",),
     lambda b: (np.arange(3 * b["past"]).reshape(b["past"], 3).T, (3 * b["past"],))),
    ("merge heads after permute",
     lambda: Layout.contiguous(dims("seq", 2, 4)).permute((1, 0, 2)), (2, "4*seq"),
     lambda b: (np.arange(8 * b["seq"]).reshape(b["seq"], 2, 4).transpose(1, 0, 2),
                (2, 4 * b["seq"]))),
    ("merge after broadcast",
     lambda: Layout.contiguous(dims(3, 1)).broadcast(dims(3, 4)), (12,),
     lambda b: (np.broadcast_to(np.arange(3).reshape(3, 1), (3, 4)), (12,))),
    ("merge a stretched dim into the next",
     lambda: Layout.contiguous(dims("seq", 1, 4)).broadcast(dims("seq", 3, 4)),
     ("seq", 12),
     lambda b: (np.broadcast_to(np.arange(4 * b["seq"]).reshape(b["seq"], 1, 4),
                                (b["seq"], 3, 4)), (b["seq"], 12))),
    ("merge rows of a column slice",
     lambda: Layout.contiguous(dims(4, 10)).slice(1, E(2), E(7)), (20,),
     lambda b: (np.arange(40).reshape(4, 10)[:, 2:7], (20,))),
]


@pytest.mark.parametrize(("case", "make", "new", "numpy_case"), REFUSED,
                         ids=[c[0] for c in REFUSED])
def test_reshape_refuses_non_contiguous_merges(
        case: str, make: Callable[[], Layout], new: tuple[ExprLike, ...],
        numpy_case: Callable[[Bindings], tuple[np.ndarray, tuple[int, ...]]]) -> None:
    """Merging dims that are not contiguous with each other (after a permute,
    across a stride-0 dim, across a slice's row gap) is refused: the caller
    must copy. NumPy agrees that no view exists (at sizes > 1)."""
    assert make().reshape(dims(*new)) is None, case
    array, shape = numpy_case({"past": 3, "seq": 2})
    with pytest.raises(ValueError, match="copy"):
        np.reshape(array, shape, copy=False)


# --------------------------------------------------------------------------
# distinct_elements
# --------------------------------------------------------------------------

DISTINCT: list[tuple[str, Callable[[], Layout], ExprLike]] = [
    ("contiguous", lambda: Layout.contiguous(dims(2, "past", 64)), "128*past"),
    ("permuted", lambda: Layout.contiguous(dims(2, "past", 64)).permute((2, 0, 1)),
     "128*past"),
    ("repeat kv (stride 0)",
     lambda: Layout.contiguous(dims(2, "past", 1, 64)).broadcast(dims(2, "past", 7, 64)),
     "128*past"),
    ("two stretched dims",
     lambda: Layout.contiguous(dims(1, "seq", 1)).broadcast(dims(5, "seq", 3)), "seq"),
    ("sliced", lambda: Layout.contiguous(dims("past + seq", 4)).slice(
        0, E("past"), E("past + seq")), "4*seq"),
    ("0-d", lambda: Layout.contiguous(dims()), 1),
]


@pytest.mark.parametrize("b", BINDINGS)
@pytest.mark.parametrize(("case", "make", "expected"), DISTINCT, ids=[c[0] for c in DISTINCT])
def test_distinct_elements(b: Bindings, case: str, make: Callable[[], Layout],
                           expected: ExprLike) -> None:
    """Stride-0 dims count once: the polynomial equals the expected one, and at
    concrete sizes equals the number of distinct addresses the view touches
    (counted by brute force) whenever the view is non-empty."""
    lay = make()
    assert lay.distinct_elements() == E(expected), case
    touched = addresses(lay, b)
    if touched.size:
        assert len(np.unique(touched)) == lay.distinct_elements().evaluate(b)

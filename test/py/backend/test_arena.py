"""backend/arena.py: greedy-by-size placement, its statistics, and the plan checker.

Hand cases are worked out on paper. The properties are checked against
independent brute-force computations (live bytes per kernel call, memory
overlap per pair), not against the planner's own bookkeeping.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nanocompile.backend.arena import ArenaError, ArenaPlan, Buffer, check_plan, plan_arena


def align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment


def brute_peak(buffers: list[Buffer]) -> int:
    steps = range(min(b.first for b in buffers), max(b.last for b in buffers) + 1)
    return max(sum(b.size for b in buffers if b.first <= t <= b.last) for t in steps)


def clashes(buffers: list[Buffer], offsets: tuple[int, ...], i: int, j: int) -> bool:
    a, b = buffers[i], buffers[j]
    live = a.first <= b.last and b.first <= a.last
    memory = offsets[i] < offsets[j] + b.size and offsets[j] < offsets[i] + a.size
    return live and memory and a.size > 0 and b.size > 0


# -- hand cases ---------------------------------------------------------------------------


def test_empty() -> None:
    assert plan_arena([]) == ArenaPlan(offsets=(), size=0, total_bytes=0, peak_live_bytes=0)


def test_one_buffer() -> None:
    assert plan_arena([Buffer(100, 3, 7)]) == ArenaPlan((0,), 100, 100, 100)


def test_disjoint_lifetimes_share_memory() -> None:
    plan = plan_arena([Buffer(100, 0, 1), Buffer(300, 2, 3), Buffer(200, 4, 4)])
    assert plan == ArenaPlan((0, 0, 0), 300, 600, 300)


def test_live_together_larger_first_then_aligned() -> None:
    # 200 bytes goes first at 0; 100 bytes at align_up(200, 64) = 256.
    plan = plan_arena([Buffer(100, 0, 1), Buffer(200, 0, 1)])
    assert plan == ArenaPlan((256, 0), 356, 300, 300)


def test_intervals_are_inclusive() -> None:
    # A kernel's output (first use at call 1) must not alias its input (last use at call 1).
    touching = plan_arena([Buffer(64, 0, 1), Buffer(64, 1, 2)])
    assert touching.offsets == (0, 64)
    apart = plan_arena([Buffer(64, 0, 1), Buffer(64, 2, 3)])
    assert apart.offsets == (0, 0)


def test_small_buffers_fill_a_hole() -> None:
    # Placed by size: A (512, calls 0-9) at 0; B (256, calls 0-4) at 512; C (256, calls 5-9)
    # at 512 too (B is dead by then); D (128, calls 0-9) clashes with A, B, C: at 768;
    # E (128, calls 10-12) clashes with nothing: at 0.
    buffers = [
        Buffer(128, 0, 9),  # D
        Buffer(512, 0, 9),  # A
        Buffer(256, 0, 4),  # B
        Buffer(256, 5, 9),  # C
        Buffer(128, 10, 12),  # E
    ]
    plan = plan_arena(buffers)
    assert plan.offsets == (768, 0, 512, 512, 0)
    assert plan.size == 896
    assert plan.peak_live_bytes == 896
    assert plan.total_bytes == 1280


def test_first_fit_takes_a_gap_between_buffers() -> None:
    # P (512, calls 0-1) at 0; Q (512, 1-2) clashes with P: at 512; R (256, 2-3) clashes
    # only with Q: at 0. At call 2 memory holds R [0, 256) and Q [512, 1024), so S
    # (192, call 2) fits in the gap at 256, below Q, rather than above it at 1024.
    buffers = [Buffer(512, 0, 1), Buffer(512, 1, 2), Buffer(256, 2, 3), Buffer(192, 2, 2)]
    plan = plan_arena(buffers)
    assert plan.offsets == (0, 512, 0, 256)
    assert plan.size == 1024
    assert plan.peak_live_bytes == 1024  # P and Q at call 1: this plan is optimal


def test_alignment_one_packs_tightly() -> None:
    plan = plan_arena([Buffer(3, 0, 0), Buffer(5, 0, 0), Buffer(7, 0, 0)], alignment=1)
    assert plan.offsets == (12, 7, 0)
    assert plan.size == 15


# -- zero-size buffers, validation, the checker -------------------------------------------


def test_zero_size_buffers_take_no_memory() -> None:
    buffers = [Buffer(0, 0, 5), Buffer(64, 0, 5), Buffer(0, 2, 3), Buffer(64, 1, 1)]
    plan = plan_arena(buffers)
    assert plan.offsets == (0, 0, 0, 64)
    assert plan.size == 128
    check_plan(buffers, plan)
    assert plan_arena([Buffer(0, 0, 0), Buffer(0, 0, 1)]) == ArenaPlan((0, 0), 0, 0, 0)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 0, 0), "buffer size must be >= 0, got -1"),
        ((8, 3, 2), "last 2 < first 3"),
        ((8.0, 0, 1), "buffer size must be an integer"),
        ((8, 0, "1"), "buffer last must be an integer"),
    ],
)
def test_invalid_buffers(args: tuple, message: str) -> None:
    with pytest.raises(ArenaError, match=message):
        Buffer(*args)


def test_numpy_style_integers_are_accepted() -> None:
    class Index:  # what numpy integers implement
        def __index__(self) -> int:
            return 128

    buffer = Buffer(Index(), 0, 0)  # type: ignore[arg-type]
    assert buffer.size == 128
    assert type(buffer.size) is int


@pytest.mark.parametrize("alignment", [0, -64, 48])
def test_alignment_must_be_a_power_of_two(alignment: int) -> None:
    with pytest.raises(ArenaError, match="power of two"):
        plan_arena([Buffer(8, 0, 0)], alignment=alignment)


def test_check_plan_rejects_overlap() -> None:
    buffers = [Buffer(128, 0, 2), Buffer(128, 2, 4)]
    with pytest.raises(ArenaError, match="buffers 0 and 1 are both live at call 2 and overlap"):
        check_plan(buffers, ArenaPlan((0, 64), 192, 256, 256))
    check_plan(buffers, ArenaPlan((0, 128), 256, 256, 256))
    check_plan([Buffer(128, 0, 1), Buffer(128, 2, 4)], ArenaPlan((0, 0), 128, 256, 128))


def test_check_plan_rejects_misalignment_and_overrun() -> None:
    buffers = [Buffer(64, 0, 0), Buffer(64, 0, 0)]
    with pytest.raises(ArenaError, match="offset 96 is not a multiple of 64"):
        check_plan(buffers, ArenaPlan((0, 96), 160, 128, 128))
    with pytest.raises(ArenaError, match="overruns the arena of 100"):
        check_plan(buffers, ArenaPlan((0, 64), 100, 128, 128))
    with pytest.raises(ArenaError, match="not a multiple"):
        check_plan(buffers, ArenaPlan((-64, 0), 128, 128, 128))
    with pytest.raises(ArenaError, match="plan has 1 offsets for 2 buffers"):
        check_plan(buffers, ArenaPlan((0,), 128, 128, 128))


# -- determinism and scale ----------------------------------------------------------------


def test_ties_are_broken_by_index() -> None:
    buffers = [Buffer(64, 0, 3) for _ in range(4)]
    assert plan_arena(buffers).offsets == (0, 64, 128, 192)


def test_deterministic() -> None:
    rng = random.Random(7)
    buffers = [Buffer(rng.choice([64, 100, 4096]), t, t + rng.randrange(4)) for t in range(300)]
    plans = {plan_arena(list(buffers)) for _ in range(3)}
    assert len(plans) == 1


def test_long_chain_fits_in_two_buffers() -> None:
    # 1000 buffers, each produced by call i and consumed by call i + 1.
    buffers = [Buffer(4096, i, i + 1) for i in range(1000)]
    plan = plan_arena(buffers)
    check_plan(buffers, plan)
    assert plan.size == 2 * 4096
    assert plan.peak_live_bytes == 2 * 4096
    assert plan.total_bytes == 1000 * 4096


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_long_chain_of_mixed_sizes_stays_near_the_peak(seed: int) -> None:
    rng = random.Random(seed)
    buffers = [Buffer(rng.randrange(1000, 5000), i, i + 1) for i in range(1000)]
    plan = plan_arena(buffers)
    check_plan(buffers, plan)
    assert plan.peak_live_bytes == brute_peak(buffers)
    assert plan.size <= 1.5 * plan.peak_live_bytes
    assert plan.size <= 3 * max(b.size for b in buffers)
    assert plan.size * 100 < plan.total_bytes


# -- properties ---------------------------------------------------------------------------

buffer_lists = st.lists(
    st.builds(
        lambda size, first, length: Buffer(size, first, first + length),
        st.one_of(st.just(0), st.integers(1, 5000)),
        st.integers(0, 40),
        st.integers(0, 15),
    ),
    max_size=40,
)
alignments = st.sampled_from([1, 8, 64, 256])


@settings(max_examples=200, deadline=None)
@given(buffers=buffer_lists, alignment=alignments)
def test_plans_are_valid_and_bounded(buffers: list[Buffer], alignment: int) -> None:
    plan = plan_arena(buffers, alignment)
    check_plan(buffers, plan, alignment)
    n = len(buffers)
    assert not any(clashes(buffers, plan.offsets, i, j) for i in range(n) for j in range(i))
    assert all(offset % alignment == 0 for offset in plan.offsets)
    assert all(o + b.size <= plan.size for o, b in zip(plan.offsets, buffers, strict=True))
    assert plan.total_bytes == sum(b.size for b in buffers)
    assert plan.peak_live_bytes == (brute_peak(buffers) if buffers else 0)
    assert plan.size >= plan.peak_live_bytes
    assert plan.size <= sum(align_up(b.size, alignment) for b in buffers)


@settings(max_examples=100, deadline=None)
@given(buffers=buffer_lists)
def test_aligned_sizes_never_exceed_the_total(buffers: list[Buffer]) -> None:
    buffers = [Buffer(align_up(b.size, 64), b.first, b.last) for b in buffers]
    plan = plan_arena(buffers)
    assert plan.peak_live_bytes <= plan.size <= plan.total_bytes


@settings(max_examples=100, deadline=None)
@given(buffers=buffer_lists, alignment=alignments)
def test_each_buffer_sits_at_the_lowest_free_offset(buffers: list[Buffer], alignment: int) -> None:
    # Greedy by size: in (size desc, index) order, no lower aligned offset was free.
    plan = plan_arena(buffers, alignment)
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i].size, i))
    for k, i in enumerate(order):
        if buffers[i].size == 0:
            continue
        earlier = order[:k]
        for lower in range(0, plan.offsets[i], alignment):
            trial = (*plan.offsets[:i], lower, *plan.offsets[i + 1 :])
            assert any(clashes(buffers, trial, i, j) for j in earlier), (i, lower)


@settings(max_examples=50, deadline=None)
@given(buffers=buffer_lists, seed=st.integers(0, 2**32 - 1))
def test_checker_catches_any_clash(buffers: list[Buffer], seed: int) -> None:
    # Random aligned offsets: the checker raises exactly when some pair clashes.
    rng = random.Random(seed)
    offsets = tuple(64 * rng.randrange(4) for _ in buffers)
    size = max((o + b.size for o, b in zip(offsets, buffers, strict=True)), default=0)
    plan = ArenaPlan(offsets, size, 0, 0)
    n = len(buffers)
    expected_clash = any(clashes(buffers, offsets, i, j) for i in range(n) for j in range(i))
    if expected_clash:
        with pytest.raises(ArenaError, match="overlap"):
            check_plan(buffers, plan)
    else:
        check_plan(buffers, plan)

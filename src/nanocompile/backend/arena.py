"""The arena planner: every intermediate buffer at an offset in one block, reused by liveness.

A buffer is live from the kernel call that first uses it to the call that
last uses it, both inclusive: a kernel's output may never share memory with
an input it reads in the same call. Two buffers live at the same step never
overlap in memory; buffers live at disjoint steps may.

The heuristic is TFLite's "greedy by size" (its arena planner and TFLM's
``GreedyMemoryPlanner``): take buffers largest first, ties by index, and put
each at the lowest aligned offset that clashes with no already placed buffer
live at the same time. It is deterministic, and never worse than giving every
buffer its own aligned slot: each buffer ends at most at the sum of the
aligned sizes placed so far. The peak of live bytes is a lower bound on any
plan, reported next to the arena size so a bad plan shows.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Sequence
from dataclasses import dataclass


class ArenaError(ValueError):
    """An invalid buffer, alignment or plan."""


@dataclass(frozen=True)
class Buffer:
    """`size` bytes, live from kernel call `first` to kernel call `last` inclusive."""

    size: int
    first: int
    last: int

    def __post_init__(self) -> None:
        for name in ("size", "first", "last"):
            value = getattr(self, name)
            try:
                object.__setattr__(self, name, operator.index(value))
            except TypeError:
                raise ArenaError(f"buffer {name} must be an integer, got {value!r}") from None
        if self.size < 0:
            raise ArenaError(f"buffer size must be >= 0, got {self.size}")
        if self.last < self.first:
            raise ArenaError(
                f"buffer live interval is empty: last {self.last} < first {self.first}"
            )

    def live_with(self, other: Buffer) -> bool:
        """Whether the two live intervals share a kernel call."""
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class ArenaPlan:
    """Offsets into one arena of `size` bytes, with the statistics to judge it.

    `total_bytes` is the sum of buffer sizes (one allocation each, no reuse);
    `peak_live_bytes` the most bytes live at one kernel call (no plan is smaller).
    """

    offsets: tuple[int, ...]
    size: int
    total_bytes: int
    peak_live_bytes: int


def plan_arena(buffers: Sequence[Buffer], alignment: int = 64) -> ArenaPlan:
    """Place `buffers` greedily by size at offsets that are multiples of `alignment`."""
    _check_alignment(alignment)
    offsets = [0] * len(buffers)
    placed: list[tuple[int, int, int]] = []  # (offset, end, index), sorted by offset
    for i in sorted(range(len(buffers)), key=lambda i: (-buffers[i].size, i)):
        if buffers[i].size == 0:
            continue  # takes no memory; offset 0 is aligned and inside the arena
        offsets[i] = _lowest_fit(buffers, i, placed, alignment)
        bisect.insort(placed, (offsets[i], offsets[i] + buffers[i].size, i))
    return ArenaPlan(
        offsets=tuple(offsets),
        size=max((end for _, end, _ in placed), default=0),
        total_bytes=sum(b.size for b in buffers),
        peak_live_bytes=peak_live_bytes(buffers),
    )


def _lowest_fit(
    buffers: Sequence[Buffer], i: int, placed: list[tuple[int, int, int]], alignment: int
) -> int:
    """The lowest aligned offset where buffer `i` clashes with no placed buffer live with it."""
    buffer = buffers[i]
    candidate = 0
    for offset, end, j in placed:
        if not buffer.live_with(buffers[j]):
            continue
        if candidate + buffer.size <= offset:
            break  # fits in the gap below this buffer; later ones start higher still
        candidate = max(candidate, _align_up(end, alignment))
    return candidate


def peak_live_bytes(buffers: Sequence[Buffer]) -> int:
    """The largest sum of sizes of buffers live at the same kernel call."""
    events = sorted(
        [(b.first, b.size) for b in buffers] + [(b.last + 1, -b.size) for b in buffers]
    )  # at equal steps the frees (negative) come first
    live = peak = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak


def check_plan(buffers: Sequence[Buffer], plan: ArenaPlan, alignment: int = 64) -> None:
    """Raise `ArenaError` unless every offset is aligned, inside the arena, and no two
    buffers live at the same call overlap in memory."""
    _check_alignment(alignment)
    if len(plan.offsets) != len(buffers):
        raise ArenaError(f"plan has {len(plan.offsets)} offsets for {len(buffers)} buffers")
    for i, (buffer, offset) in enumerate(zip(buffers, plan.offsets, strict=True)):
        if offset < 0 or offset % alignment:
            raise ArenaError(f"buffer {i} offset {offset} is not a multiple of {alignment}")
        if offset + buffer.size > plan.size:
            raise ArenaError(
                f"buffer {i} [{offset}, {offset + buffer.size}) overruns the arena of {plan.size}"
            )
    _check_disjoint(buffers, plan.offsets)


def _check_disjoint(buffers: Sequence[Buffer], offsets: Sequence[int]) -> None:
    """Sweep over kernel calls: each buffer against those still live when it starts."""
    active: list[int] = []
    for i in sorted(range(len(buffers)), key=lambda i: (buffers[i].first, i)):
        buffer = buffers[i]
        if buffer.size == 0:
            continue
        active = [j for j in active if buffers[j].last >= buffer.first]
        for j in active:
            if offsets[i] < offsets[j] + buffers[j].size and offsets[j] < offsets[i] + buffer.size:
                raise ArenaError(
                    f"buffers {j} and {i} are both live at call {buffer.first} and overlap: "
                    f"[{offsets[j]}, {offsets[j] + buffers[j].size}) and "
                    f"[{offsets[i]}, {offsets[i] + buffer.size})"
                )
        active.append(i)


def _check_alignment(alignment: int) -> None:
    if alignment <= 0 or alignment & (alignment - 1):
        raise ArenaError(f"alignment must be a power of two, got {alignment}")


def _align_up(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment

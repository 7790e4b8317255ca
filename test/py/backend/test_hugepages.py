"""Anonymous memory in 2 MiB pages (backend/hugepages.py), which the tuner's
timed copies and the widened f32 weights use.

Claims: ``huge_array`` gives zeroed, writable memory starting on a 2 MiB
boundary, mapped in 2 MiB pages once touched where the kernel has transparent
huge pages (read from ``/proc/self/smaps``; skipped, with the reason, where
it has not or cannot say; one of four pages is the claim, as the kernel may
be short of free 2 MiB blocks); ``HugeArena`` cuts arrays one after another
on 64-byte boundaries, a new chunk when one is full and a chunk of its own
for an array larger than a chunk, counting the bytes; ``F32Weights`` keeps
its widened tensors there, bit for bit the widened snapshot values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nanocompile.backend.hugepages import HUGE_PAGE, HugeArena, huge_array
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.inference.engine import F32Weights

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def anon_huge_bytes(address: int) -> int | None:
    """``AnonHugePages`` of the mapping of this process holding ``address``, or None."""
    try:
        text = Path("/proc/self/smaps").read_text()
    except OSError:
        return None
    inside = False
    for line in text.splitlines():
        head = line.split()[0] if line else ""
        if "-" in head and ":" not in head:
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= address < hi
        elif inside and line.startswith("AnonHugePages:"):
            return int(line.split()[1]) * 1024
    return None


def test_huge_array_is_zeroed_writable_and_aligned() -> None:
    a = huge_array(3 * HUGE_PAGE + 100)
    assert a.dtype == np.uint8
    assert a.nbytes == 3 * HUGE_PAGE + 100
    assert a.ctypes.data % HUGE_PAGE == 0
    assert not a.any()
    a[-1] = 7
    assert a[-1] == 7


def test_huge_array_is_in_huge_pages() -> None:
    try:
        mode = THP.read_text().strip()
    except OSError:
        pytest.skip(f"no {THP}: cannot tell whether this kernel has huge pages")
    if "[never]" in mode:
        pytest.skip(f"transparent huge pages are off here ({mode})")
    a = huge_array(4 * HUGE_PAGE)
    a[:] = 1  # the first touch, after the advice
    huge = anon_huge_bytes(a.ctypes.data)
    if huge is None:
        pytest.skip("/proc/self/smaps does not say (not Linux?)")
    assert huge >= HUGE_PAGE, f"{huge} bytes of the array in 2 MiB pages ({mode})"


def test_arena_cuts_aligned_arrays_one_after_another() -> None:
    arena = HugeArena(chunk_bytes=HUGE_PAGE)
    a = arena.take((100,), np.float32)
    b = arena.take((3, 5), np.int8)
    c = arena.take((7,), np.float32)
    assert a.ctypes.data % HUGE_PAGE == 0  # a chunk's first array
    assert b.ctypes.data == a.ctypes.data + 448  # 400 rounded up to 64
    assert c.ctypes.data == a.ctypes.data + 512  # 448 + 15 rounded up to 64
    assert (b.shape, b.dtype, c.dtype) == ((3, 5), np.int8, np.float32)
    big = arena.take((HUGE_PAGE // 4 + 1,), np.float32)  # more than a chunk: one of its own
    assert big.ctypes.data % HUGE_PAGE == 0
    assert (arena.taken, arena.mapped) == (400 + 15 + 28 + big.nbytes, HUGE_PAGE + 2 * HUGE_PAGE)
    a[:] = 1.0
    c[:] = 2.0
    b[...] = 3
    assert (float(a.sum()), int(b.sum()), float(c.sum())) == (100.0, 45, 14.0)


def test_widened_f32_weights_lie_in_the_arena(tiny_snapshot: Path) -> None:
    snap = Snapshot.open(tiny_snapshot)
    weights = F32Weights(snap)
    names = [n for n in snap.expected_tensors() if snap.dtype(n) != "F32"][:3]
    got = [weights[n] for n in names]
    assert got[0].ctypes.data % HUGE_PAGE == 0
    for w in got:
        assert w.ctypes.data % 64 == 0
    for name, w in zip(names, got, strict=True):
        bits = snap.raw(name)
        want = ((bits.astype(np.uint32) << 16).view(np.float32) if snap.dtype(name) == "BF16"
                else bits.astype(np.float32))
        np.testing.assert_array_equal(w.view(np.uint32), want.view(np.uint32))

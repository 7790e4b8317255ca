"""Anonymous memory in 2 MiB pages (backend/hugepages.py), which the tuner's
timed copies use.

Claims: ``huge_array`` gives zeroed, writable memory starting on a 2 MiB
boundary, mapped in 2 MiB pages once touched where the kernel has transparent
huge pages (read from ``/proc/self/smaps``; skipped, with the reason, where
it has not or cannot say; one of four pages is the claim, as the kernel may
be short of free 2 MiB blocks).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nanocompile.backend.hugepages import HUGE_PAGE, huge_array

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

"""Anonymous memory in 2 MiB pages, for the buffers a decode step streams.

Where transparent huge pages are "madvise" (as on the machines here), numpy
advises only allocations of 4 MiB or more into 2 MiB pages, and those only
where they cover a whole aligned 2 MiB range: the rest gets 4 KiB pages, a
TLB entry per 4 KiB and hardware prefetchers that stop at every 4 KiB
boundary. The weight files are mapped in 2 MiB pages (``checkpoint.pagecache``);
the tuner's timed copies of them (``tuning.harness``) are too: a private
anonymous mapping, advised with ``MADV_HUGEPAGE`` before anything touches it,
the array starting on a 2 MiB boundary (the mapping is one huge page longer;
the part before the boundary is never touched, so never resident). Measured
on an AMD EPYC Zen 4 (session 29, one thread, int8 rows of 896 bytes read by
tiles of 4 / 8 strided rows): 29 / 22 GB/s in 2 MiB pages, 22 / 21 GB/s in
4 KiB pages.
"""

from __future__ import annotations

import mmap

import numpy as np

from nanocompile.checkpoint.pagecache import HUGE_PAGE, advise_huge

__all__ = ["HUGE_PAGE", "HugeArena", "huge_array"]


def huge_array(nbytes: int) -> np.ndarray:
    """``nbytes`` of fresh zeroed memory as a uint8 array that starts on a 2 MiB
    boundary, advised into 2 MiB pages where the platform has the advice (else
    plain pages); the array keeps its mapping alive. An ``OSError`` from the
    kernel (no memory, no address space) propagates."""
    # private: a shared anonymous mapping is shmem, whose huge pages are another setting
    mapping = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advise_huge(mapping)  # refused or unknown: plain pages
    raw = np.frombuffer(mapping, np.uint8)
    start = -raw.ctypes.data % HUGE_PAGE
    return raw[start:start + nbytes]


class HugeArena:
    """Arrays cut one after another (each on an ``alignment`` boundary) from
    chunks of ``huge_array`` memory: many tensors in 2 MiB pages without a
    mapping, and its rounding to 2 MiB, each. A chunk is ``chunk_bytes``, or
    one array's bytes rounded up to 2 MiB when that is more; what a chunk
    leaves unused is never touched, so never resident. ``taken`` counts the
    arrays' bytes, ``mapped`` the chunks'."""

    def __init__(self, chunk_bytes: int = 64 << 20) -> None:
        self.chunk_bytes = chunk_bytes
        self._chunk: np.ndarray | None = None
        self._offset = 0
        self.taken = 0
        self.mapped = 0

    def take(self, shape: tuple[int, ...], dtype: np.dtype | type,
             alignment: int = 64) -> np.ndarray:
        """An uninitialized (zeroed) array of ``shape`` and ``dtype`` from the arena;
        an ``OSError`` from the kernel propagates."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        start = -(-self._offset // alignment) * alignment
        if self._chunk is None or start + nbytes > self._chunk.nbytes:
            size = max(self.chunk_bytes, -(-nbytes // HUGE_PAGE) * HUGE_PAGE)
            self._chunk = huge_array(size)
            self.mapped += size
            start = 0
        self._offset = start + nbytes
        self.taken += nbytes
        return self._chunk[start:start + nbytes].view(dtype).reshape(shape)

"""Weight files in the page cache as huge pages: written files leave it, mapped
files ask for huge pages.

A decode step streams every weight once from the mapped file. Linux maps a
file's page-cache folios of 2 MiB with one page-table entry each (``FilePmdMapped``
in ``/proc/<pid>/smaps``) when the folios are that large, which they are when
the kernel *read* the file (readahead on ext4 of Linux 6.18 builds large
folios); a file this process just *wrote* stays in the small folios of its
writes until they are evicted, and is mapped 4 KiB at a time: a TLB entry per
4 KiB, and hardware prefetchers that stop at each 4 KiB page. Measured on an
AMD EPYC Zen 4 (session 21, `bench profile`, bf16 decode step, 1 thread, the
same process alternating the synthetic snapshot mapped in 4 KiB pages
(``MADV_NOHUGEPAGE``) and in 2 MiB ones, 5 pairs): 43.5-51.8 ms against
39.1-44.1 ms, 8-18 % faster, gate/up and the LM head most.

So a weight file written here (`release_written`: the synthetic snapshot,
the int8 cache, a realigned copy) is synced and dropped from the page cache,
and its next reader fills the cache in large folios; and a mapping of
weights gets ``MADV_HUGEPAGE`` (`advise_huge`: readahead at a fault then
allocates 2 MiB folios at once; without it a 16 MiB file re-read through a
mapping came back 0 of 16 MiB in 2 MiB pages, 64 MiB 24 of 64, with it all).
The reader (``SafetensorsFile.open``) reads a file's header through its
mapping, after the advice, not with ``read()``: a ``read()`` caches the first
pages in small folios, and no 2 MiB range holding one is mapped in a 2 MiB
page (a 4.2 MiB int8 gate/up/down entry had been 0 of its 4 MiB in 2 MiB
pages, session 26), and the snapshot's content hash (a weight file's first
reader after it is written) reads through a huge-page mapping too: a
``read()`` pass in 16 MiB pieces leaves the first megabytes of a file in small
folios while the readahead's folios grow (an 8 MiB file: 0 of 8 MiB in 2 MiB
pages after it, 8 of 8 hashed through the mapping; the 942 MiB synthetic
snapshot: 896 of 942). And a file mapped by the reader (`map_weights`) with
two whole 2 MiB ranges or more is checked as it is mapped: where the page cache holds
part of it in small folios (session 26 found the synthetic snapshot at 310
of 942 MiB in 2 MiB pages before a run and at 802 after a run of the test
suite, which reads it with other readers too), it is dropped and read back,
once: 942 of 942, 1.1 s of reading from disk there. Until session 30 only
files of 64 MiB or more were checked; the int8 cache's layer files (14.6 MB
each) were then found at 374 of their 472 MiB in 2 MiB pages after a day of
runs (Zen 4), and mapped as they lay a kernel-B decode step took 21.5 ms
(`bench profile`, 1 thread; gate and up 9.58 ms of it, 22 GB/s), read back
19.3 (gate and up 7.75, 27 GB/s); a C probe of the same tile over the same
files read 25.3 GB/s as they lay, 30.2 read back, 30.4-31.4 from anonymous
2 MiB pages: hence the two ranges (one read of ``smaps`` a file, stopped at
its mapping). None of this changes a byte any kernel reads. `file_mappings`
reads what this process maps in 2 MiB pages (the benchmarks record it).
"""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path

import numpy as np

HUGE_PAGE = 2 << 20  # below this a file cannot hold a 2 MiB folio: left alone
SETTLE_BYTES = 2 * HUGE_PAGE  # a weight file this large is checked as it is mapped (`map_weights`)
SETTLE_FRACTION = 0.9  # of its whole 2 MiB ranges mapped huge, or it is read back


def release_written(path: str | os.PathLike[str]) -> bool:
    """Sync ``path`` to disk and drop its pages from the page cache (a file of at
    least ``HUGE_PAGE`` bytes, where ``os.posix_fadvise`` exists), so the next
    read caches it in large folios. Pages another process maps stay. True when
    the pages were released; any OS error leaves the file as it was (False)."""
    if not hasattr(os, "posix_fadvise"):
        return False
    try:
        fd = os.open(Path(path), os.O_RDONLY)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_size < HUGE_PAGE:
            return False
        os.fsync(fd)  # dirty pages are not dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def advise_huge(mapping: mmap.mmap) -> bool:
    """``MADV_HUGEPAGE`` on a mapping of weights, where the platform has it; True
    when the kernel took the advice."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or len(mapping) < HUGE_PAGE:
        return False
    try:
        mapping.madvise(advice)
    except OSError:
        return False
    return True


SMAPS = Path("/proc/self/smaps")
_MAPPING = re.compile(r"^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+ *(.*)$")


def file_mappings(smaps: Path = SMAPS) -> dict[str, tuple[int, int]]:
    """Per file this process maps: the bytes resident and the bytes of those
    mapped in 2 MiB pages (``Rss`` and ``FilePmdMapped`` of ``smaps``, summed
    over the file's mappings); empty where ``smaps`` cannot be read (not Linux).
    The benchmarks record it: a run's decode depends on it."""
    try:
        text = smaps.read_text()
    except OSError:
        return {}
    found: dict[str, tuple[int, int]] = {}
    path = ""
    for line in text.splitlines():
        header = _MAPPING.match(line)
        if header:
            path = header.group(1) if header.group(1).startswith("/") else ""
            if path:
                found.setdefault(path, (0, 0))
            continue
        field, _, value = line.partition(":")
        if path and field in ("Rss", "FilePmdMapped"):
            rss, pmd = found[path]
            size = int(value.split()[0]) * 1024
            found[path] = (rss + size, pmd) if field == "Rss" else (rss, pmd + size)
    return found


def _vma_sizes(start: int, smaps: Path = SMAPS) -> tuple[int, int] | None:
    """``Rss`` and ``FilePmdMapped`` bytes of the mapping that starts at address
    ``start`` (None where ``smaps`` cannot be read or has no such mapping). The
    file is read line by line and left after that mapping: the kernel writes
    ``smaps`` as it is read, so the mappings after it (a Python process's
    libraries, above a new mapping) cost nothing."""
    key = f"{start:x}-"
    sizes: list[int] | None = None
    try:
        with smaps.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                if _MAPPING.match(line):
                    if sizes is not None:
                        break
                    if line.startswith(key):
                        sizes = [0, 0]
                    continue
                field, _, value = line.partition(":")
                if sizes is not None and field in ("Rss", "FilePmdMapped"):
                    sizes[field == "FilePmdMapped"] += int(value.split()[0]) * 1024
    except (OSError, ValueError):
        return None
    return None if sizes is None else (sizes[0], sizes[1])


def map_weights(fd: int) -> mmap.mmap:
    """A read-only mapping of the weight file open at ``fd``, asking for huge
    pages (`advise_huge`); a file of ``SETTLE_BYTES`` or more is also checked:
    the first byte of every 2 MiB range is touched (a minor fault where the
    page cache holds it), and if fewer than ``SETTLE_FRACTION`` of its whole
    2 MiB ranges are then mapped in 2 MiB pages, but some are (so this kernel
    maps this file system's folios huge), the page cache holds part of it in
    small folios (read back after an eviction by a reader that does not ask
    for huge pages): the file is dropped from the page cache (what no other
    process maps) and mapped again, so its next reads fill 2 MiB folios. A
    file none of whose ranges is huge is left as it is: a kernel or file
    system without large folios would otherwise be read from disk at every
    load (so a download still in its writer's small folios stays so until
    evicted). Session 26 found the synthetic snapshot at 310 of its 942 MiB
    in 2 MiB pages before a run, and at 802 after a run of the test suite. A
    warm file already in 2 MiB folios costs the touches and one read of
    ``smaps``."""
    mapping = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    if not advise_huge(mapping) or len(mapping) < SETTLE_BYTES:
        return mapping
    whole = len(mapping) // HUGE_PAGE
    view = np.frombuffer(mapping, np.uint8)
    int(view[::HUGE_PAGE].sum())  # one byte of each 2 MiB range, faulted in
    sizes = _vma_sizes(view.ctypes.data)
    del view
    if sizes is None or sizes[1] == 0 or sizes[1] >= SETTLE_FRACTION * whole * HUGE_PAGE:
        return mapping  # none of it huge: maybe this kernel or file system cannot
    mapping.close()
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except (OSError, AttributeError):
        pass
    mapping = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    advise_huge(mapping)
    return mapping

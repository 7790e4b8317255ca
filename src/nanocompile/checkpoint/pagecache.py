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
snapshot: 896 of 942). Neither changes a byte any kernel reads. (Session 26
also found that snapshot at 310 of 942 MiB in 2 MiB pages before any of this
session's runs, for a reason not found: whatever reads or evicts a file
decides its folios; `file_mappings` is how the benchmarks see it.) A snapshot written by another
program (a download) keeps whatever folios its writer left until the kernel
evicts them. `file_mappings` reads what this process maps in 2 MiB pages
(the benchmarks record it).
"""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path

HUGE_PAGE = 2 << 20  # below this a file cannot hold a 2 MiB folio: left alone


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

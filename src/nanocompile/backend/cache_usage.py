"""What the caches hold on disk, and pruning what no run will read again.

``nanocompile cache`` reports, and ``nanocompile cache --prune`` removes:

* **compiled kernels** (``gcc.default_cache_dir()``): a library entry
  (``<key>.so .c .sha256 .lock``) or a program entry (``<key>.program.json``)
  is keyed by everything it depends on, the compiler's own source included, so
  after an upgrade or an edit the old entries are never looked up again. A hit
  refreshes the entry's modification time (``gcc.mark_used``: in
  ``gcc.compile_library`` and ``program_cache.load_entry``), so an entry not
  used for ``older_than_days`` is stale; a source kept from a failed compile
  (``failed/``) too. A library whose ``.lock`` another process holds
  (building it) is left alone; one that a running process has loaded stays
  mapped there after its file is gone. The tuning records (``tuning.json``)
  and the precompiled headers are never pruned.
* **int8 weights** (``Int8Cache``) and **realigned weights**
  (``AlignedCopies``): an entry directory whose files do not all name the
  current format (``INT8_FORMAT``, ``ALIGNED_FORMAT``) is stale: the loader
  would rewrite them, under another key, and never read these again.
* anything else in the home directory (the default snapshot, ``bench``'s
  GGUF files) is reported, never pruned.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from nanocompile.backend.gcc import try_locked
from nanocompile.checkpoint.aligned import ALIGNED_FORMAT
from nanocompile.checkpoint.snapshot import INT8_FORMAT, open_entry

DAY = 86400.0
LIBRARY_SUFFIXES = (".so", ".c", ".sha256", ".lock")
PROGRAM_SUFFIX = ".program.json"
MEMO_DIR = "snapshots"  # the content-hash memos beside the int8 and aligned entries


@dataclass(frozen=True)
class Stale:
    """One entry no run will read again: its files and why."""

    paths: tuple[Path, ...]
    nbytes: int
    reason: str
    lock: Path | None = None  # held by a builder: leave the entry alone


@dataclass
class Area:
    """One cache directory: what it holds and which of its entries are stale."""

    name: str
    path: Path
    entries: int
    nbytes: int
    detail: str = ""
    stale: list[Stale] = field(default_factory=list)

    @property
    def stale_bytes(self) -> int:
        return sum(s.nbytes for s in self.stale)


def survey(home: Path, kernels: Path, int8: Path, aligned: Path,
           older_than_days: float = 30.0, now: float | None = None) -> list[Area]:
    """The caches under these directories (any may be missing), with their stale
    entries (module docstring)."""
    if older_than_days < 0:
        raise ValueError(f"older_than_days must be >= 0, got {older_than_days}")
    cutoff = (time.time() if now is None else now) - older_than_days * DAY
    areas = [_kernels(kernels, cutoff, older_than_days),
             _formatted("int8 weights", int8, "format", INT8_FORMAT),
             _formatted("realigned weights", aligned, "nanocompile_format", ALIGNED_FORMAT)]
    known = {p.resolve() for p in (kernels, int8, aligned)}
    if home.is_dir():
        for child in sorted(home.iterdir()):
            if child.resolve() in known or child.name.startswith("."):
                continue
            areas.append(Area(child.name, child, 1, _size(child), "kept"))
    return areas


def prune(areas: list[Area]) -> tuple[int, int]:
    """Remove every stale entry of ``areas`` whose lock is free: (entries, bytes)."""
    removed = freed = 0
    for area in areas:
        for stale in area.stale:
            with try_locked(stale.lock) if stale.lock else nullcontext(True) as free:
                if not free:
                    continue
                for path in stale.paths:
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink(missing_ok=True)
            removed += 1
            freed += stale.nbytes
    return removed, freed


# --------------------------------------------------------------------------


def _kernels(root: Path, cutoff: float, days: float) -> Area:
    area = Area("compiled kernels", root, 0, _size(root))
    if not root.is_dir():
        return area
    libraries = programs = 0
    for directory in sorted(p for p in root.iterdir() if p.is_dir() and len(p.name) == 2):
        found = _key_directory(directory, cutoff, f"unused for {days:g} days", area.stale)
        libraries, programs = libraries + found[0], programs + found[1]
    failed = root / "failed"
    if failed.is_dir():
        for path in sorted(failed.iterdir()):
            if _mtime(path) < cutoff:
                area.stale.append(Stale((path,), _size(path), "a failed compile's source"))
    area.entries = libraries + programs
    area.detail = f"{libraries} libraries, {programs} programs"
    tuning = root / "tuning.json"
    if tuning.is_file():
        area.detail += f", tuning records {_mb(_size(tuning))}"
    return area


def _key_directory(directory: Path, cutoff: float, reason: str,
                   stale: list[Stale]) -> tuple[int, int]:
    """The library and program entries of one ``<key[:2]>`` directory, counted;
    those last used before ``cutoff`` appended to ``stale``."""
    groups: dict[str, list[Path]] = {}
    programs = 0
    for path in directory.iterdir():
        if path.name.startswith("."):
            continue  # a build in progress (gcc.remove_stale_builds sweeps it)
        if path.name.endswith(PROGRAM_SUFFIX):
            programs += 1
            if _mtime(path) < cutoff:
                stale.append(Stale((path,), _size(path), reason))
            continue
        key, suffix = os.path.splitext(path.name)
        if suffix in LIBRARY_SUFFIXES:
            groups.setdefault(key, []).append(path)
    libraries = 0
    for key, paths in sorted(groups.items()):
        libraries += any(p.suffix == ".so" for p in paths)
        used = max((_mtime(p) for p in paths if p.suffix in (".so", ".c")), default=0.0)
        if used < cutoff:
            lock = directory / f"{key}.lock"
            stale.append(Stale(tuple(sorted(paths)), sum(_size(p) for p in paths), reason,
                               lock if lock in paths else None))
    return libraries, programs


def _formatted(name: str, root: Path, key: str, current: str) -> Area:
    area = Area(name, root, 0, _size(root))
    if not root.is_dir():
        return area
    formats: dict[str, int] = {}
    for entry in sorted(p for p in root.iterdir() if p.is_dir() and p.name != MEMO_DIR
                        and not p.name.startswith(".")):
        area.entries += 1
        found = {_format_of(f, key) for f in entry.glob("*.safetensors")} or {"(empty)"}
        for fmt in found:
            formats[fmt] = formats.get(fmt, 0) + 1
        if found != {current}:
            old = ", ".join(sorted(found - {current}))
            area.stale.append(Stale((entry,), _size(entry), f"format {old}, not {current}"))
    area.detail = f"{area.entries} entries" + (
        f", {len(area.stale)} of another format" if area.stale else "")
    return area


def _format_of(path: Path, key: str) -> str:
    entry = open_entry(path)
    if entry is None:
        return "(unreadable)"
    try:
        return str(entry.metadata.get(key, "(none)"))
    finally:
        entry.close()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    """Bytes on disk under ``path`` (a file, or a tree; symlinks not followed)."""
    try:
        if path.is_symlink() or path.is_file():
            return path.lstat().st_size
    except OSError:
        return 0
    return sum(_size(p) for p in _walk(path))


def _walk(path: Path) -> Iterator[Path]:
    try:
        yield from path.iterdir()
    except OSError:
        return


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"

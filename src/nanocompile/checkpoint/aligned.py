"""bf16 weights on whole 32-byte lines: a realigned copy of a snapshot's weight file.

The bf16 kernels read a weight row 16 values (32 bytes) at a time and bind
the snapshot's tensors where the mapped file puts them. A safetensors file's
data starts 8 bytes after its header, and the format only pads the header to
a multiple of 8: in three headers of four the data is 8, 16 or 24 bytes off a
32-byte boundary, and then half of the 32-byte loads straddle two cache
lines (``python -m bench alignment`` on the AVX-512 Zen 4, data 8 bytes off:
decode 1.15x slower at 1 thread, prefill 1.05x; README, "On the AVX-512 Zen
4", session 19). A file cannot be mapped at a different offset within a
page, so such a file is rewritten once, its
tensors' bytes unchanged, with the data starting on a 64-byte boundary, and
the copy is mapped instead::

    <root>/<key>/<weight file name>

``key`` hashes ``ALIGNED_FORMAT`` and the snapshot's content
(``Snapshot.content_hash``, memoized in ``<root>/snapshots``). A copy's
metadata names its format, source file and the sha256 of its data; a copy
that does not open, does not hold the source's tensors (names, dtypes,
shapes), does not say exactly that or whose data does not hash to it is
rewritten. Memory is unchanged (the copy is mapped as the original was); the
disk holds the copy (``AlignedCopies.nbytes``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from nanocompile.checkpoint.safetensors import (
    SafetensorsError,
    SafetensorsFile,
    write_safetensors_stream,
)
from nanocompile.checkpoint.snapshot import Snapshot, open_entry, sweep_temporaries

ALIGNED_FORMAT = "nanocompile-aligned/1"  # bump when a copy's layout or metadata change
LOAD_BYTES = 32
"""A 16-lane bf16 load: a tensor starting on a multiple of this never splits one."""
DATA_ALIGNMENT = 64  # where a copy's data starts
TMP_PREFIX = ".tmp-aligned-"
CHUNK_BYTES = 1 << 24
ALIGNING = "aligning the bf16 weights on cache lines"

Progress = Callable[[str, int, int], None]


def misaligned_tensors(snapshot: Snapshot) -> list[str]:
    """The expected bf16 tensors of ``snapshot`` whose mapped data does not start
    on a multiple of ``LOAD_BYTES`` (sorted)."""
    return sorted(name for name in snapshot.expected_tensors()
                  if snapshot.dtype(name) == "BF16"
                  and snapshot.raw(name).ctypes.data % LOAD_BYTES)


class AlignedCopies:
    """The realigned copies of ``snapshot``'s weight files under ``root``."""

    def __init__(self, snapshot: Snapshot, root: Path) -> None:
        self.snapshot = snapshot
        self.root = Path(root)
        self._directory: Path | None = None
        self.written = 0  # files written (not found in the cache) by the last ``aligned``

    @property
    def directory(self) -> Path:
        """``<root>/<key>``: the key hashes the snapshot's content (read once, on first
        use: an aligned snapshot is never hashed)."""
        if self._directory is None:
            content = self.snapshot.content_hash(self.root / "snapshots")
            key = hashlib.sha256(json.dumps([ALIGNED_FORMAT, content]).encode())
            self._directory = self.root / key.hexdigest()[:32]
        return self._directory

    def path(self, source: Path) -> Path:
        """The copy of weight file ``source``."""
        return self.directory / source.name

    def aligned(self, progress: Progress | None = None) -> Snapshot:
        """``snapshot`` if none of its bf16 tensors is misaligned; else a snapshot of
        the same directory and config whose weight files holding a misaligned
        tensor are their realigned copies (read from the cache or written to it).
        The original's files are closed when they were replaced. If the cache
        cannot be written, ``snapshot`` itself."""
        snap = self.snapshot
        misaligned = misaligned_tensors(snap)
        if not misaligned:
            return snap
        holders = {id(snap.file_of(name)) for name in misaligned}
        owners = sorted(key for key, f in snap.files.items() if id(f) in holders)
        copies: dict[str, SafetensorsFile] = {}
        for done, name in enumerate(owners):
            source = snap.files[name]
            copy = self._read(source)
            if copy is None:
                if progress is not None:
                    progress(ALIGNING, done, len(owners))
                copy = self._write(source)
                if copy is None:  # the cache cannot be written: keep the original
                    for f in copies.values():
                        f.close()
                    return snap
                self.written += 1
            copies[name] = copy
        if progress is not None and self.written:
            progress(ALIGNING, len(owners), len(owners))
        return snap.with_files(copies)

    def nbytes(self) -> int:
        """Bytes of the copies on disk."""
        if not self.directory.is_dir():
            return 0
        return sum(p.stat().st_size for p in self.directory.iterdir() if p.is_file())

    # -- entries ------------------------------------------------------------

    def _metadata(self, source: SafetensorsFile, digest: str) -> dict[str, str]:
        return {**source.metadata, "nanocompile_format": ALIGNED_FORMAT,
                "nanocompile_source": source.path.name, "nanocompile_sha256": digest}

    def _read(self, source: SafetensorsFile) -> SafetensorsFile | None:
        """The copy of ``source`` if it verifies, else None (a bad copy is deleted)."""
        path = self.path(source.path)
        copy = open_entry(path)
        if copy is None:
            return None
        try:
            if copy.names != source.names or any(
                    (copy.dtype(n), copy.shape(n)) != (source.dtype(n), source.shape(n))
                    for n in source.names):
                raise SafetensorsError("not this file's tensors")
            if copy.metadata != self._metadata(source, _digest(copy)):
                raise SafetensorsError("metadata or data hash mismatch")
        except SafetensorsError:
            copy.close()
            path.unlink(missing_ok=True)
            return None
        return copy

    def _write(self, source: SafetensorsFile) -> SafetensorsFile | None:
        path = self.path(source.path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            sweep_temporaries(path.parent, TMP_PREFIX)
            staging = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-",
                                            dir=path.parent))
        except OSError:
            return None
        try:
            staged = staging / path.name
            specs = {n: (source.dtype(n), source.shape(n)) for n in source.names}
            write_safetensors_stream(staged, specs, lambda n: _chunks(source, n),
                                     self._metadata(source, _digest(source)),
                                     data_alignment=DATA_ALIGNMENT)
            os.replace(staged, path)
        except OSError:
            return None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return self._read(source)


def _chunks(source: SafetensorsFile, name: str) -> Iterator[np.ndarray]:
    """``name``'s stored values, a slice of its rows at a time (bf16 as uint16 bits)."""
    raw = source.raw(name)
    if raw.ndim == 0 or raw.nbytes <= CHUNK_BYTES:
        yield raw
        return
    rows = max(1, CHUNK_BYTES // max(1, raw[0].nbytes))
    for row in range(0, raw.shape[0], rows):
        yield raw[row:row + rows]


def _digest(f: SafetensorsFile) -> str:
    """sha256 over the names and stored bytes of ``f``'s tensors, in name order."""
    digest = hashlib.sha256()
    for name in f.names:
        digest.update(f"\0{name}\0".encode())
        for chunk in _chunks(f, name):
            digest.update(np.ascontiguousarray(chunk).reshape(-1).view(np.uint8).data)
    return digest.hexdigest()

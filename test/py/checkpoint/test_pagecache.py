"""checkpoint/pagecache.py: weight files written here leave the page cache, and
mappings of weights ask for huge pages.

Claims: a written file of 2 MiB or more is synced and dropped (small, missing
or unreadable ones are left alone, without an error); every safetensors file
the streaming writer produces is released, its bytes unchanged; a mapping of
weights gets ``MADV_HUGEPAGE`` where the platform has it. And the reason for
both, on a kernel that caches this file system in large folios (skipped
elsewhere, with the reason): a file written in 16 KiB pieces and read back
is mapped in 2 MiB pages (``FilePmdMapped``), as a file the kernel read
itself is (without the release, none of it is, on the Zen 4 of session 21).
"""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path

import numpy as np
import pytest

from nanocompile.checkpoint import pagecache
from nanocompile.checkpoint import safetensors as st

MIB = 1 << 20


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The ``os.fsync`` / ``os.posix_fadvise`` calls from now on (they still run)."""
    seen: list[tuple[str, int]] = []
    fsync, fadvise = os.fsync, os.posix_fadvise

    def spy_fsync(fd: int) -> None:
        seen.append(("fsync", os.fstat(fd).st_size))
        fsync(fd)

    def spy_fadvise(fd: int, offset: int, length: int, advice: int) -> None:
        seen.append(("fadvise", advice))
        fadvise(fd, offset, length, advice)

    monkeypatch.setattr(os, "fsync", spy_fsync)
    monkeypatch.setattr(os, "posix_fadvise", spy_fadvise)
    return seen


def test_a_large_written_file_is_synced_and_dropped(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "w.bin"
    data = os.urandom(3 * MIB)
    path.write_bytes(data)
    seen = _calls(monkeypatch)
    assert pagecache.release_written(path)
    assert seen == [("fsync", 3 * MIB), ("fadvise", os.POSIX_FADV_DONTNEED)]
    assert path.read_bytes() == data


def test_small_missing_and_failing_files_are_left_alone(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * (2 * MIB - 1))
    seen = _calls(monkeypatch)
    assert not pagecache.release_written(small)
    assert not pagecache.release_written(tmp_path / "missing.bin")
    assert seen == []

    def refuse(*args: object) -> None:
        raise OSError(22, "Invalid argument")

    big = tmp_path / "big.bin"
    big.write_bytes(b"y" * (2 * MIB))
    monkeypatch.setattr(os, "posix_fadvise", refuse)
    assert not pagecache.release_written(big)
    assert big.read_bytes() == b"y" * (2 * MIB)


def test_the_streaming_writer_releases_what_it_wrote(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    released: list[Path] = []
    monkeypatch.setattr(st, "release_written", lambda p: released.append(Path(p)))
    weights = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "model.safetensors"
    st.write_safetensors(path, {"w": ("F32", weights)})
    assert released == [path]
    with st.SafetensorsFile.open(path) as f:
        assert np.array_equal(f.raw("w"), weights)


@pytest.mark.skipif(not hasattr(mmap, "MADV_HUGEPAGE"), reason="no MADV_HUGEPAGE here")
def test_a_mapping_of_weights_asks_for_huge_pages(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    advised: list[int] = []
    path = tmp_path / "w.bin"
    path.write_bytes(b"\0" * (4 * MIB))
    with open(path, "rb") as fh:
        mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    assert pagecache.advise_huge(mapping)
    small = tmp_path / "s.bin"
    small.write_bytes(b"\0" * 4096)
    with open(small, "rb") as fh:
        assert not pagecache.advise_huge(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ))
    st.write_safetensors(tmp_path / "m.safetensors",
                         {"w": ("F32", np.zeros((1024, 1024), np.float32))})
    # the reader maps through pagecache.map_weights, which asks (its module's name)
    monkeypatch.setattr(pagecache, "advise_huge", lambda m: advised.append(len(m)) or True)
    with st.SafetensorsFile.open(tmp_path / "m.safetensors"):
        pass
    assert advised == [(tmp_path / "m.safetensors").stat().st_size]


def _pmd_mapped(path: Path) -> int | None:
    """Bytes of ``path`` this process maps with 2 MiB entries (None without smaps)."""
    try:
        text = Path("/proc/self/smaps").read_text()
    except OSError:
        return None
    total, current = 0, ""
    for line in text.splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            current = line
        elif current.endswith(str(path)) and line.startswith("FilePmdMapped:"):
            total += int(line.split()[1]) * 1024
    return total


def _touched(path: Path, view: np.ndarray) -> int | None:
    """Every page of ``view`` (a mapping of ``path``) faulted in; how much of
    ``path`` is then mapped in 2 MiB pages."""
    int(view[::4096].sum())
    return _pmd_mapped(path)


def test_a_written_snapshot_is_read_back_in_huge_pages(tmp_path: Path) -> None:
    # the kernel's part, by the direct route: a file dropped from the cache and
    # mapped with MADV_HUGEPAGE is read back in 2 MiB folios and mapped so
    probe = tmp_path / "probe.bin"
    probe.write_bytes(os.urandom(16 * MIB))
    fd = os.open(probe, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    with open(probe, "rb") as fh:
        mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    pagecache.advise_huge(mapping)
    view = np.frombuffer(mapping, np.uint8)
    if not _touched(probe, view):
        pytest.skip("this kernel maps this file system's page cache in 4 KiB pages only "
                    "(no FilePmdMapped after a fresh read): nothing to gain here")
    del view
    mapping.close()
    # ours: what the writer wrote in small pieces (as the synthetic snapshot's
    # writer does: its writes leave 4 KiB folios, mapped 4 KiB at a time),
    # opened by the reader, is mapped in 2 MiB pages
    weights = np.frombuffer(os.urandom(16 * MIB), np.float32).reshape(1024, -1)
    path = tmp_path / "model.safetensors"
    st.write_safetensors_stream(path, {"w": ("F32", weights.shape)},
                                lambda _: (weights[i:i + 4] for i in range(0, 1024, 4)),
                                data_alignment=64)
    with st.SafetensorsFile.open(path) as f:
        mapped = _touched(path, f.raw("w").view(np.uint8).reshape(-1))
    assert mapped is not None
    assert mapped >= 8 * MIB, mapped


def _skip_without_huge_file_pages(tmp_path: Path) -> None:
    """Skip unless a 4 MiB file dropped from the page cache and read back through
    a mapping that asks for huge pages is mapped whole in 2 MiB pages here."""
    probe = tmp_path / "probe.bin"
    probe.write_bytes(os.urandom(4 * MIB))
    pagecache.release_written(probe)
    with open(probe, "rb") as fh:
        mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    pagecache.advise_huge(mapping)
    view = np.frombuffer(mapping, np.uint8)
    whole = _touched(probe, view) == 4 * MIB
    del view
    mapping.close()
    if not whole:
        pytest.skip("this kernel does not map a freshly read 4 MiB file in 2 MiB pages "
                    "(FilePmdMapped): nothing to test here")


def test_the_reader_keeps_a_small_weight_file_whole_in_huge_pages(tmp_path: Path) -> None:
    # a file the size of an int8 gate/up/down entry (4.2 MiB: two whole 2 MiB
    # ranges): its header read with read() before the mapping left the first
    # pages in small folios and the whole file in 4 KiB pages (0 of 4 MiB on
    # the Zen 4 in session 26); read through the mapping, both ranges are huge
    _skip_without_huge_file_pages(tmp_path)
    q = np.frombuffer(os.urandom(896 * 4864), np.int8).reshape(4864, 896)
    path = tmp_path / "model.layers.0.mlp.gate_proj.weight.safetensors"
    st.write_safetensors(path, {"int8": ("I8", q), "scale": ("F32", np.ones(4864, np.float32))},
                         data_alignment=64)
    with st.SafetensorsFile.open(path) as f:
        mapped = _touched(path, f.raw("int8").view(np.uint8).reshape(-1))
        assert np.array_equal(f.raw("int8"), q)
    assert mapped == 4 * MIB


def test_a_layers_int8_entry_maps_its_small_matrices_in_huge_pages(
        full_snapshot: Path, tmp_path: Path) -> None:
    # q, k, v and o (0.1-0.8 MB) in int8 entries of their own were smaller than a
    # 2 MiB page, so mapped 4 KiB at a time (and read at ~19 GB/s where the MLP's
    # matrices read ~29 in a kernel-B decode step, session 27); a layer's matrices
    # share one file now, the smallest first, so every whole 2 MiB range of it
    # is mapped huge and the attention matrices lie in those ranges
    import json

    from nanocompile.checkpoint.snapshot import Int8Cache, Snapshot

    _skip_without_huge_file_pages(tmp_path)
    names = [f"model.layers.0.{p}.weight" for p in (
        "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")]
    with Snapshot.open(full_snapshot) as snap:
        Int8Cache(snap, tmp_path / "int8").load(names)  # quantized and written
        cache = Int8Cache(snap, tmp_path / "int8")
        got = cache.load(names)
        assert cache.quantized == 0
        path = cache.path(names[0])
        assert {cache.path(n) for n in names} == {path}
        whole = path.stat().st_size // (2 * MIB) * 2 * MIB
        assert whole >= 14 * MIB
        for q, scale in got.values():
            int(q.view(np.uint8).reshape(-1)[::4096].sum())
            int(scale.view(np.uint8)[::4096].sum())
        assert _pmd_mapped(path) == whole
        with open(path, "rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(size))
        start = 8 + size
        for name in names[:4]:
            for part in ("int8", "scale"):
                assert start + header[f"{name}.{part}"]["data_offsets"][1] <= whole, name
        del got


def test_hashing_a_snapshot_leaves_its_weights_in_huge_pages(tmp_path: Path) -> None:
    # the content hash is a weight file's first reader after the snapshot is
    # written: with read() in 16 MiB pieces an 8 MiB file was then 0 of 8 MiB in
    # 2 MiB pages (session 26); through a mapping that asks for huge pages, the
    # page cache keeps the file in 2 MiB folios
    import hashlib

    from nanocompile.checkpoint import snapshot

    path = tmp_path / "model.safetensors"
    data = os.urandom(8 * MIB)
    path.write_bytes(data)
    pagecache.release_written(path)
    digest = hashlib.sha256()
    snapshot._hash_file(digest, path)
    assert digest.hexdigest() == hashlib.sha256(data).hexdigest()
    with open(path, "rb") as fh:
        mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    view = np.frombuffer(mapping, np.uint8)
    mapped = _touched(path, view)
    del view
    mapping.close()
    if mapped is None:
        pytest.skip("no /proc/self/smaps here")
    if mapped == 0:
        pytest.skip("this kernel maps this file system's page cache in 4 KiB pages only "
                    "(none of a file read through a huge-page mapping is in 2 MiB pages)")
    assert mapped == 8 * MIB
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    snapshot._hash_file(digest, empty)  # a file mmap refuses is read


def test_a_large_weight_file_cached_in_small_folios_is_read_back_in_huge_pages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a file part of which came back into the page cache in small folios (here:
    # its first half read with read() in 4 KiB pieces after a release) is read
    # back once by the reader (the synthetic snapshot: 310 and 802 of 942 MiB
    # in 2 MiB pages on the Zen 4 in session 26, 942 of 942 after; the int8
    # cache's 14.6 MB layer files, unchecked below 64 MiB until session 30: 374
    # of 472 MiB); a file none of which is huge is left alone (below). 12 MiB
    # here, the size of a layer file's whole ranges
    _skip_without_huge_file_pages(tmp_path)
    weights = np.frombuffer(os.urandom(pagecache.SETTLE_BYTES + 8 * MIB), np.float32)
    path = tmp_path / "model.safetensors"
    header = b'{"w":{"dtype":"F32","shape":[%d],"data_offsets":[0,%d]}}' % (
        weights.size, weights.nbytes)
    header += b" " * (-len(header) % 64)
    with open(path, "wb") as fh:  # 4 KiB writes: small folios, left in the cache
        fh.write(len(header).to_bytes(8, "little") + header)
        data = weights.view(np.uint8)
        for start in range(0, data.size, 4096):
            fh.write(data[start:start + 4096].tobytes())
    seen = _calls(monkeypatch)
    with st.SafetensorsFile.open(path) as f:  # all of it small: left as it is
        assert f.raw("w")[:1024].tobytes() == weights[:1024].tobytes()
    assert ("fadvise", os.POSIX_FADV_DONTNEED) not in seen
    pagecache.release_written(path)
    with open(path, "rb") as fh:
        for _ in range(path.stat().st_size // 2 // 4096):
            fh.read(4096)
    seen.clear()
    with st.SafetensorsFile.open(path) as f:
        mapped = _touched(path, f.raw("w").view(np.uint8))
        assert f.raw("w").tobytes() == weights.tobytes()
    assert ("fadvise", os.POSIX_FADV_DONTNEED) in seen  # read back once
    whole = (path.stat().st_size // pagecache.HUGE_PAGE) * pagecache.HUGE_PAGE
    assert mapped is not None
    assert mapped >= pagecache.SETTLE_FRACTION * whole, (mapped, whole)
    seen.clear()
    with st.SafetensorsFile.open(path) as f:  # now in 2 MiB folios: kept as it is
        assert f.raw("w")[:1024].tobytes() == weights[:1024].tobytes()
    assert seen == []


def test_a_file_with_one_whole_huge_range_is_not_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # below SETTLE_BYTES (two whole 2 MiB ranges) the reader maps a file without
    # touching it or reading smaps; from there on it reads smaps once per file
    asked: list[int] = []
    monkeypatch.setattr(pagecache, "_vma_sizes", lambda start: asked.append(start) or None)
    monkeypatch.setattr(pagecache, "advise_huge", lambda m: True)
    for size, checked in ((pagecache.SETTLE_BYTES - 4096, False),
                          (pagecache.SETTLE_BYTES, True)):
        path = tmp_path / f"w{size}.bin"
        path.write_bytes(b"\0" * size)
        asked.clear()
        with open(path, "rb") as fh:
            mapping = pagecache.map_weights(fh.fileno())
        assert len(mapping) == size
        mapping.close()
        assert (len(asked) == 1) is checked, (size, asked)


def test_vma_sizes_reads_the_mapping_at_an_address(tmp_path: Path) -> None:
    smaps = tmp_path / "smaps"
    smaps.write_text(SMAPS_TEXT)
    assert pagecache._vma_sizes(0x7F00AA000000, smaps) == (8192 * 1024, 6144 * 1024)
    assert pagecache._vma_sizes(0x7F00AC000000, smaps) == (2048 * 1024, 2048 * 1024)
    assert pagecache._vma_sizes(0x7F00AB000000, smaps) == (4096 * 1024, 0)
    assert pagecache._vma_sizes(0x7F00AD001000, smaps) is None  # no mapping starts there
    assert pagecache._vma_sizes(0x7F00AA000000, tmp_path / "absent") is None


SMAPS_TEXT = """\
55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
Rss:                 132 kB
7f00aa000000-7f00ab000000 r--s 00000000 fd:01 1234                       /data/my model.safetensors
Size:              16384 kB
Rss:                8192 kB
FilePmdMapped:      6144 kB
7f00ab000000-7f00ab400000 rw-p 00000000 00:00 0
Rss:                4096 kB
7f00ac000000-7f00ac800000 r--s 01000000 fd:01 1234                       /data/my model.safetensors
Rss:                2048 kB
FilePmdMapped:      2048 kB
VmFlags: rd sh mr mw me ms hg
7f00ad000000-7f00ad001000 r-xp 00000000 fd:01 99                         /usr/lib/libc.so.6
Rss:                   4 kB
"""


def test_file_mappings_sums_each_files_mappings(tmp_path: Path) -> None:
    smaps = tmp_path / "smaps"
    smaps.write_text(SMAPS_TEXT)
    assert pagecache.file_mappings(smaps) == {
        "/data/my model.safetensors": (10240 * 1024, 8192 * 1024),
        "/usr/lib/libc.so.6": (4096, 0)}
    assert pagecache.file_mappings(tmp_path / "missing") == {}


def test_file_mappings_sees_this_process_map_a_file(tmp_path: Path) -> None:
    if not pagecache.SMAPS.exists():
        pytest.skip("no /proc/self/smaps (not Linux)")
    path = tmp_path / "w.bin"
    path.write_bytes(os.urandom(4 * MIB))
    with open(path, "rb") as fh:
        mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    view = np.frombuffer(mapping, np.uint8)
    int(view[::4096].sum())
    resident, huge = pagecache.file_mappings()[str(path)]
    assert resident == 4 * MIB
    assert 0 <= huge <= resident
    del view
    mapping.close()

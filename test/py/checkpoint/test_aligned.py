"""Realigned copies of bf16 weight files whose data is off a 32-byte boundary
(``checkpoint/aligned.py``): found by the mapped address, written once with the
same bytes, verified and reused, rewritten when damaged, bound by ``load`` with
the bits of the f32 path."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import pytest

from nanocompile.checkpoint.aligned import LOAD_BYTES, AlignedCopies, misaligned_tensors
from nanocompile.checkpoint.snapshot import WEIGHTS_NAME, Snapshot


def shifted_copy(source: Path, out: Path, start_mod_64: int) -> Path:
    """A copy of snapshot ``source`` whose weight file's data starts ``start_mod_64``
    bytes past a 64-byte boundary (the header padded with spaces, as the format
    allows; the tensors' bytes and offsets unchanged); the other files linked."""
    out.mkdir()
    for f in source.iterdir():
        if f.name != WEIGHTS_NAME:
            (out / f.name).symlink_to(f)
    data = (source / WEIGHTS_NAME).read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = data[8:8 + n].rstrip(b" ")
    header += b" " * ((start_mod_64 - 8 - len(header)) % 64)
    (out / WEIGHTS_NAME).write_bytes(struct.pack("<Q", len(header)) + header + data[8 + n:])
    return out


@pytest.fixture(scope="module")
def shifted(tiny_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("shifted")
    return {off: shifted_copy(tiny_snapshot, root / f"at{off}", off) for off in (0, 8, 24, 32)}


def _data_start(path: Path) -> int:
    return 8 + struct.unpack("<Q", (path / WEIGHTS_NAME).read_bytes()[:8])[0]


def _bf16_names(snap: Snapshot) -> list[str]:
    return sorted(n for n in snap.expected_tensors() if snap.dtype(n) == "BF16")


@pytest.mark.parametrize("off", [0, 8, 24, 32])
def test_misaligned_tensors_are_found_by_their_address(shifted: dict[int, Path],
                                                       off: int) -> None:
    assert _data_start(shifted[off]) % 64 == off
    with Snapshot.open(shifted[off]) as snap:
        names = _bf16_names(snap)
        assert len(names) > 10  # the tiny snapshot stores its weights in bf16
        # every tensor's size is a multiple of 64 bytes: all share the file's offset
        assert misaligned_tensors(snap) == (names if off % LOAD_BYTES else [])


@pytest.mark.parametrize("off", [8, 24])
def test_copy_is_aligned_holds_the_same_bytes_and_is_reused(
        shifted: dict[int, Path], tmp_path: Path, off: int) -> None:
    original = Snapshot.open(shifted[off])
    copies = AlignedCopies(original, tmp_path)
    snap = copies.aligned()
    assert copies.written == 1
    assert snap is not original
    assert snap.path == original.path
    assert snap.config == original.config
    assert snap.weight_files() == [copies.directory / WEIGHTS_NAME]
    assert copies.nbytes() == (copies.directory / WEIGHTS_NAME).stat().st_size
    assert misaligned_tensors(snap) == []
    with Snapshot.open(shifted[off]) as fresh:  # the original's bytes, read afresh
        for name in fresh.expected_tensors():
            assert snap.dtype(name) == fresh.dtype(name)
            assert snap.raw(name).ctypes.data % LOAD_BYTES == 0 or fresh.dtype(name) != "BF16"
            np.testing.assert_array_equal(snap.raw(name), fresh.raw(name))
    snap.close()
    with Snapshot.open(shifted[off]) as again:
        second = AlignedCopies(again, tmp_path)
        reused = second.aligned()
        assert second.written == 0
        assert reused.weight_files() == snap.weight_files()
        reused.close()


def test_aligned_snapshot_is_kept_and_never_hashed(shifted: dict[int, Path],
                                                   tmp_path: Path) -> None:
    with Snapshot.open(shifted[32]) as snap:
        copies = AlignedCopies(snap, tmp_path)
        assert copies.aligned() is snap
        assert copies.written == 0
    assert list(tmp_path.iterdir()) == []  # no copy, no content-hash memo


@pytest.mark.parametrize("damage", ["flipped-bit", "truncated", "other-file"])
def test_damaged_copy_is_rewritten(shifted: dict[int, Path], tmp_path: Path,
                                   damage: str) -> None:
    with Snapshot.open(shifted[8]) as snap:
        copies = AlignedCopies(snap, tmp_path)
        copies.aligned().close()
        path = copies.directory / WEIGHTS_NAME
    data = bytearray(path.read_bytes())
    if damage == "flipped-bit":
        data[-100] ^= 0x10
    elif damage == "truncated":
        del data[-64:]
    else:
        data = bytearray((shifted[0] / WEIGHTS_NAME).read_bytes())  # valid, unmarked
    os.unlink(path)
    path.write_bytes(bytes(data))
    with Snapshot.open(shifted[8]) as snap, Snapshot.open(shifted[8]) as fresh:
        again = AlignedCopies(snap, tmp_path)
        healed = again.aligned()
        assert again.written == 1
        for name in fresh.expected_tensors():
            np.testing.assert_array_equal(healed.raw(name), fresh.raw(name))
        healed.close()


def test_unwritable_cache_keeps_the_original(shifted: dict[int, Path], tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with Snapshot.open(shifted[8]) as snap:
        assert AlignedCopies(snap, blocker / "aligned").aligned() is snap
        assert misaligned_tensors(snap)  # still mapped and readable


def test_load_binds_the_copy_with_the_f32_paths_bits(
        shifted: dict[int, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nanocompile import load
    from nanocompile.api import aligned_cache_dir

    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path / "home"))
    ids = [9707, 11, 1879, 0, 151643, 42, 7, 1000]
    bf16 = load(shifted[8], weights="bf16")
    assert bf16.snapshot.weight_files()[0].parent.parent == aligned_cache_dir()
    assert misaligned_tensors(bf16.snapshot) == []
    got = bf16.logits(ids)
    f32 = load(shifted[8], weights="f32")  # widened at load: no copy involved
    assert f32.snapshot.weight_files() == [shifted[8] / WEIGHTS_NAME]
    np.testing.assert_array_equal(got.view(np.uint32), f32.logits(ids).view(np.uint32))


def test_realigned_follows_the_switch(shifted: dict[int, Path], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from nanocompile.api import REALIGN_ENV, realigned

    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path / "home"))
    with Snapshot.open(shifted[24]) as snap:
        monkeypatch.setenv(REALIGN_ENV, "off")
        assert realigned(snap) is snap  # as it lies
        monkeypatch.delenv(REALIGN_ENV)
        done = realigned(snap)
        assert done is not snap
        assert misaligned_tensors(done) == []
        done.close()

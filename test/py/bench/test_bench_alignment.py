"""bench/alignment.py (``python -m bench alignment``): the shifted copy is off its
lines by the offset asked for, the three models load as named (the realigned one
aligned, the one as it lies not), and the record holds the rounds it reports."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from bench import main
from bench.alignment import WEIGHTS_NAME, shifted_copy
from nanocompile.checkpoint.snapshot import Snapshot


@pytest.mark.parametrize("offset", [8, 40])
def test_shifted_copy_moves_the_data_only(tiny_snapshot: Path, tmp_path: Path,
                                          offset: int) -> None:
    out = shifted_copy(tiny_snapshot, tmp_path / "s", offset)
    n = struct.unpack("<Q", (out / WEIGHTS_NAME).read_bytes()[:8])[0]
    assert (8 + n) % 64 == offset
    with Snapshot.open(tiny_snapshot) as a, Snapshot.open(out) as b:
        assert a.names == b.names
        for name in a.names:
            np.testing.assert_array_equal(a.raw(name), b.raw(name))
            assert b.raw(name).ctypes.data % 64 == offset  # sizes are whole lines


def test_a_tiny_run_is_recorded(tiny_snapshot: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path / "home"))
    out = tmp_path / "results.jsonl"
    assert main(["alignment", "--model", str(tiny_snapshot), "--rounds", "2", "--prompt", "8",
                 "--decode", "2", "--threads", "1,2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["kind"] == "alignment"
    payload = record["payload"]
    counts = payload["misaligned_tensors"]
    assert counts["original"] == 0
    assert counts["realigned"] == 0
    assert counts["as-it-lies"] > 10
    for t in ("1", "2"):
        per = payload["by_threads"][t]
        assert per["pool_threads"] == {m: int(t) for m in ("original", "realigned", "as-it-lies")}
        for metric in ("prefill", "decode"):
            for model in ("original", "realigned", "as-it-lies"):
                assert len(per["ms"][model][metric]) == 2
                assert per[metric][model]["median"] == pytest.approx(
                    float(np.median(per["ms"][model][metric])))
            assert per[metric]["realigned_faster_than_as_it_lies"]["n"] <= 2
    printed = capsys.readouterr().out
    assert "1 thread(s) decode: original" in printed
    assert "2 thread(s) prefill" in printed


@pytest.mark.parametrize("offset", ["0", "32", "12", "64"])
def test_offsets_that_are_not_misaligned_are_refused(offset: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alignment", "--offset", offset, "--no-append"]) != 0
    assert "--offset must be" in capsys.readouterr().err

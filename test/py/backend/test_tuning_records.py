"""The tuner's records (``backend/tuning_records.py``): where they are, what they
hold per machine and thread count, and how a bad file is treated.

Quick: no compiler runs except ``gcc --version`` (``machine_key``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from nanocompile.backend import tuning_records
from nanocompile.backend.tuning_records import (
    FILE_NAME,
    TUNING_ENV,
    VERSION,
    default_threads,
    entries,
    load,
    machine_key,
    record,
    tuning_path,
    winners,
)

HAND = "rows=6 columns=4 decode=16 strided=1 row_block=1 slp=1"
OTHER = "rows=2 columns=2 decode=8 strided=0 row_block=1 slp=1"


def _entry(knobs: str = OTHER, winner: object = True, **more: object) -> dict[str, object]:
    out: dict[str, object] = {"kernel": "fused_matmul", "knobs": knobs, "hand": HAND,
                              "winner": winner, "hand_ns": 2000.0, "tuned_ns": 1000.0}
    out.update(more)
    return out


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees its own "warned once" set (the module's is per process)."""
    monkeypatch.setattr(tuning_records, "_warned", set())


# -- where -----------------------------------------------------------------


def test_tuning_path_is_the_variable_when_it_is_a_path(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "records.json"
    assert tuning_path({TUNING_ENV: str(target)}) == target
    assert tuning_path({TUNING_ENV: "~/t.json"}) == Path.home() / "t.json"


@pytest.mark.parametrize("value", ["off", "OFF", " Off "])
def test_tuning_path_off_is_none(value: str) -> None:
    assert tuning_path({TUNING_ENV: value}) is None


def test_tuning_path_reads_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TUNING_ENV, str(tmp_path / "mine.json"))
    assert tuning_path() == tmp_path / "mine.json"
    monkeypatch.setenv(TUNING_ENV, "off")
    assert tuning_path() is None


@pytest.mark.parametrize("unset", [True, False], ids=["unset", "empty"])
def test_tuning_path_defaults_to_the_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               unset: bool) -> None:
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(tmp_path / "kernels"))
    if unset:
        monkeypatch.delenv(TUNING_ENV, raising=False)
    else:
        monkeypatch.setenv(TUNING_ENV, "")
    assert tuning_path() == tmp_path / "kernels" / FILE_NAME
    assert FILE_NAME == "tuning.json"


# -- round trip ------------------------------------------------------------


def test_record_then_winners_and_entries_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "tuning.json"  # the parent is made
    threads = 3
    record(path, threads, "key-a", _entry())
    record(path, threads, "key-b", _entry(HAND, winner=False))
    found = entries(path, threads)
    assert set(found) == {"key-a", "key-b"}
    assert found["key-a"] == _entry()
    assert found["key-b"] == _entry(HAND, winner=False)
    assert winners(path, threads) == {"key-a": OTHER}
    data = json.loads(path.read_text())
    assert data["version"] == VERSION
    machine = data["machines"][machine_key(threads)]
    assert "threads 3" in machine["machine"]
    assert set(machine["kernels"]) == {"key-a", "key-b"}


def test_record_replaces_an_older_entry(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    record(path, 2, "key", _entry())
    record(path, 2, "key", _entry(HAND, winner=False, note="again"))
    assert entries(path, 2) == {"key": _entry(HAND, winner=False, note="again")}
    assert winners(path, 2) == {}


def test_only_entries_with_winner_true_are_winners(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    record(path, 2, "true", _entry())
    record(path, 2, "false", _entry(winner=False))
    record(path, 2, "string", _entry(winner="true"))
    record(path, 2, "one", _entry(winner=1))
    record(path, 2, "missing", {"kernel": "k", "knobs": OTHER})
    record(path, 2, "no-knobs", {"kernel": "k", "winner": True})
    assert len(entries(path, 2)) == 6  # every search is recorded
    assert winners(path, 2) == {"true": OTHER}


def test_other_thread_counts_see_nothing(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    record(path, 2, "key", _entry())
    assert machine_key(2) != machine_key(4)
    assert entries(path, 4) == {}
    assert winners(path, 4) == {}
    record(path, 4, "key", _entry(HAND, winner=False))  # a machine of its own in the file
    assert winners(path, 2) == {"key": OTHER}
    assert winners(path, 4) == {}
    assert len(json.loads(path.read_text())["machines"]) == 2


def test_another_machine_sees_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tuning.json"
    record(path, 2, "key", _entry())
    here = machine_key(2)
    for name, other in (("cpu_identity", "another CPU"),
                        ("compiler_identity", "gcc 1.0 | pdp11-unknown-bsd")):
        with monkeypatch.context() as m:
            m.setattr(tuning_records, name, lambda other=other: other)
            assert machine_key(2) != here
            assert entries(path, 2) == {}
            assert winners(path, 2) == {}
    assert machine_key(2) == here
    assert winners(path, 2) == {"key": OTHER}


def test_absent_and_off_are_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert entries(tmp_path / "none.json", 2) == {}
    assert winners(None, 2) == {}
    assert load(None) == {"version": VERSION, "machines": {}}
    assert capsys.readouterr().err == ""  # nothing to report


# -- a bad file ------------------------------------------------------------

CORRUPT = {
    "not-json": "{ this is not json",
    "not-an-object": "[1, 2, 3]",
    "wrong-version": json.dumps({"version": VERSION + 1, "machines": {}}),
    "older-version": json.dumps({"version": VERSION - 1, "machines": {}}),
    "no-version": json.dumps({"machines": {}}),
    "machines-not-a-dict": json.dumps({"version": VERSION, "machines": [1]}),
}


@pytest.mark.parametrize("text", CORRUPT.values(), ids=CORRUPT.keys())
def test_a_corrupt_file_is_empty_and_warns_once(tmp_path: Path, text: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tuning.json"
    path.write_text(text)
    assert entries(path, 2) == {}
    assert winners(path, 2) == {}
    assert load(path) == {"version": VERSION, "machines": {}}
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nanocompile: ignoring the tuning records in ")
    assert str(path) in lines[0]
    if text == CORRUPT["older-version"]:
        assert f"of version {VERSION - 1}" in lines[0]
        assert "'nanocompile tune'" in lines[0]
    assert path.read_text() == text  # reading never rewrites it


def test_an_unreadable_path_is_empty_and_warns_once(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tuning.json"
    path.mkdir()  # exists, but read_text fails (OSError)
    assert winners(path, 2) == {}
    assert winners(path, 2) == {}
    assert len(capsys.readouterr().err.splitlines()) == 1


@pytest.mark.parametrize("text", CORRUPT.values(), ids=CORRUPT.keys())
def test_record_over_a_corrupt_file_replaces_it(tmp_path: Path, text: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tuning.json"
    path.write_text(text)
    record(path, 2, "key", _entry())
    data = json.loads(path.read_text())
    assert data["version"] == VERSION
    assert isinstance(data["machines"], dict)
    assert list(data["machines"]) == [machine_key(2)]
    assert winners(path, 2) == {"key": OTHER}
    assert len(capsys.readouterr().err.splitlines()) == 1  # the corrupt file, once


def test_kernels_that_are_not_objects_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    record(path, 2, "good", _entry())
    data = json.loads(path.read_text())
    data["machines"][machine_key(2)]["kernels"]["bad"] = "not an entry"
    data["machines"][machine_key(4)] = "not a machine"
    path.write_text(json.dumps(data))
    assert set(entries(path, 2)) == {"good"}
    assert entries(path, 4) == {}


# -- atomic writes ---------------------------------------------------------


def test_writes_leave_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    for i in range(3):
        record(path, 2, f"key-{i}", _entry())
    assert sorted(os.listdir(tmp_path)) == ["tuning.json"]
    assert path.read_text().endswith("\n")


def test_a_failed_write_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "tuning.json"
    record(path, 2, "key", _entry())
    before = path.read_text()
    with pytest.raises(TypeError):
        record(path, 2, "other", _entry(costs=object()))  # not JSON: fails mid-write
    assert path.read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["tuning.json"]
    assert winners(path, 2) == {"key": OTHER}


# -- threads ---------------------------------------------------------------


def test_default_threads_honours_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NANOCOMPILE_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.setenv("NANOCOMPILE_THREADS", "17")
    assert default_threads() == 17


def test_default_threads_without_the_variable_counts_cores(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NANOCOMPILE_THREADS", raising=False)
    cores = default_threads()
    assert isinstance(cores, int)
    assert 1 <= cores <= (os.cpu_count() or 1)
    for bad in ("0", "x", "999"):  # what the pool would ignore: the default
        monkeypatch.setenv("NANOCOMPILE_THREADS", bad)
        assert default_threads() == cores

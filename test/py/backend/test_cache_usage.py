"""``nanocompile cache``: what the caches hold, which entries are stale, pruning them.

The caches are built here by hand in a temporary home (entry files named as
``gcc``, ``program_cache``, ``Int8Cache`` and ``AlignedCopies`` name them),
except where a real compile or a real cache hit is the point."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nanocompile.backend.cache_usage import DAY, prune, survey
from nanocompile.backend.gcc import compile_library
from nanocompile.checkpoint.aligned import ALIGNED_FORMAT
from nanocompile.checkpoint.safetensors import write_safetensors
from nanocompile.checkpoint.snapshot import INT8_FORMAT

NOW = 1_900_000_000.0  # the unit tests' "now" (2030), passed to survey
OLD = 1_000_000_000.0  # 2001: stale for any clock after 2001
RECENT = NOW - 2 * DAY  # fresh for the unit tests; for the command (the real
# clock) a time in its future: fresh too


def _file(path: Path, size: int, mtime: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (mtime, mtime))
    return path


def _library(root: Path, key: str, mtime: float) -> list[Path]:
    return [_file(root / key[:2] / f"{key}{suffix}", size, mtime)
            for suffix, size in ((".so", 1000), (".c", 300), (".sha256", 64), (".lock", 0))]


def _weights_entry(root: Path, name: str, key: str, fmt: str, files: int = 2) -> Path:
    entry = root / name
    entry.mkdir(parents=True)
    for i in range(files):
        write_safetensors(entry / f"part{i}.safetensors",
                          {"t": ("F32", np.zeros(16, np.float32))}, metadata={key: fmt})
    return entry


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    kernels = home / "kernels"
    _library(kernels, "ab" + "0" * 62, OLD)  # unused for 40 days
    _library(kernels, "ab" + "1" * 62, RECENT)
    _file(kernels / "cd" / ("cd" + "2" * 62 + ".program.json"), 500, OLD)
    _file(kernels / "cd" / ("cd" + "3" * 62 + ".program.json"), 500, RECENT)
    _file(kernels / "cd" / ".tmp-kernels-1-x" / "a.c", 10, OLD)  # a build: not an entry
    _file(kernels / "failed" / "kernels-abcd.c", 70, OLD)
    _file(kernels / "tuning.json", 40, OLD)
    _file(kernels / "pch" / "k" / "nc_pch.h", 50, OLD)
    _weights_entry(home / "int8", "current", "format", INT8_FORMAT)
    _weights_entry(home / "int8", "old", "format", "nanocompile-int8/2")
    mixed = _weights_entry(home / "int8", "mixed", "format", INT8_FORMAT)
    write_safetensors(mixed / "more.safetensors", {"t": ("F32", np.zeros(4, np.float32))},
                      metadata={"format": "nanocompile-int8/2"})
    (home / "int8" / "snapshots").mkdir()  # the content-hash memos: not an entry
    _file(home / "int8" / "snapshots" / "m.json", 20, OLD)
    _weights_entry(home / "aligned", "copy", "nanocompile_format", ALIGNED_FORMAT)
    _weights_entry(home / "aligned", "pt", "format", "pt")  # no format of ours: stale
    _file(home / "synthetic" / "model.safetensors", 2000, OLD)
    return home


def _survey(home: Path, days: float = 30.0) -> dict:
    areas = survey(home, home / "kernels", home / "int8", home / "aligned", days, now=NOW)
    return {a.name: a for a in areas}


def test_the_survey_names_each_stale_entry_and_nothing_else(home: Path) -> None:
    areas = _survey(home)
    kernels = areas["compiled kernels"]
    assert (kernels.entries, kernels.detail.split(", ")[:2]) == (4, ["2 libraries", "2 programs"])
    stale = {p.name for s in kernels.stale for p in s.paths}
    old_key = "ab" + "0" * 62
    assert stale == {f"{old_key}{x}" for x in (".so", ".c", ".sha256", ".lock")} | {
        "cd" + "2" * 62 + ".program.json", "kernels-abcd.c"}
    assert kernels.stale_bytes == 1000 + 300 + 64 + 500 + 70
    assert areas["int8 weights"].entries == 3
    assert {s.paths[0].name for s in areas["int8 weights"].stale} == {"old", "mixed"}
    assert {s.paths[0].name for s in areas["realigned weights"].stale} == {"pt"}
    assert areas["synthetic"].stale == []
    # a shorter horizon makes the recent entries stale too; a longer one none
    assert len(_survey(home, 1.0)["compiled kernels"].stale) == 5
    older = (NOW - OLD) / DAY + 1  # longer than the old entries' age: none stale
    assert _survey(home, older)["compiled kernels"].stale == []


def test_prune_removes_exactly_the_stale_entries(home: Path) -> None:
    before = {p for p in home.rglob("*")}
    areas = list(_survey(home).values())
    doomed = {p for a in areas for s in a.stale for p in s.paths}
    removed, freed = prune(areas)
    assert removed == sum(len(a.stale) for a in areas) == 6  # 3 kernels, 2 int8, 1 copy
    assert freed == sum(a.stale_bytes for a in areas)
    after = {p for p in home.rglob("*")}
    gone = before - after
    assert {p for p in gone if p in doomed} == doomed
    assert all(any(p == d or d in p.parents for d in doomed) for p in gone)
    for kept in ("kernels/tuning.json", "kernels/pch/k/nc_pch.h", "int8/current",
                 "int8/snapshots/m.json", "aligned/copy", "synthetic/model.safetensors"):
        assert (home / kept).exists(), kept
    again = list(_survey(home).values())
    assert sum(len(a.stale) for a in again) == 0


def test_a_library_being_built_is_left_alone(home: Path) -> None:
    key = "ab" + "0" * 62
    lock = home / "kernels" / "ab" / f"{key}.lock"
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as gcc's builder holds it
        removed, _ = prune(list(_survey(home).values()))
    finally:
        os.close(fd)
    assert removed == 5  # all but the library whose lock is held
    assert (home / "kernels" / "ab" / f"{key}.so").exists()


def test_missing_caches_are_reported_empty(tmp_path: Path) -> None:
    areas = survey(tmp_path / "none", tmp_path / "k", tmp_path / "i", tmp_path / "a")
    assert [(a.entries, a.nbytes, a.stale) for a in areas] == [(0, 0, [])] * 3
    with pytest.raises(ValueError, match=">= 0"):
        survey(tmp_path, tmp_path, tmp_path, tmp_path, older_than_days=-1)


SOURCE = "int nc_cache_usage_probe(void) { return 7; }\n"


def test_a_library_hit_marks_the_entry_used(tmp_path: Path) -> None:
    """A library found in the cache gets its modification time set to now: the
    last use ``--prune`` reads (a program entry's: test_program_cache)."""
    root = tmp_path / "kernels"
    first = compile_library(SOURCE, cache_dir=root)
    assert not first.cache_hit
    os.utime(first.path, (OLD, OLD))
    assert compile_library(SOURCE, cache_dir=root).cache_hit
    assert first.path.stat().st_mtime > OLD


def test_the_command_reports_and_prunes(home: Path) -> None:
    env = dict(os.environ, NANOCOMPILE_HOME=str(home),
               NANOCOMPILE_CACHE_DIR=str(home / "kernels"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "nanocompile.cli", "cache", *args],
                              capture_output=True, text=True, env=env, timeout=120)

    report = run()
    assert report.returncode == 0, report.stderr
    assert "--prune removes" in report.stdout
    assert "int8 weights: format nanocompile-int8/2, not " + INT8_FORMAT in report.stdout
    dry = run("--prune", "--dry-run")
    assert "would remove" in dry.stdout
    assert (home / "int8" / "old").exists()
    done = run("--prune")
    assert done.returncode == 0, done.stderr
    assert "removed 6 stale entries" in done.stdout
    assert not (home / "int8" / "old").exists()
    assert "nothing stale" in run().stdout
    bad = run("--older-than", "-2")
    assert bad.returncode == 2
    assert "expected a finite number >= 0" in bad.stderr

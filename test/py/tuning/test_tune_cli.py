"""``nanocompile tune`` and what ``compile`` and ``generate`` make of its records.

Quick: the command's refusals and help. Slow (a real search, ~20 s on the tiny
model): tune with a small search, check the JSON and the records file, then
``compile`` names the winners and ``generate`` gives the text of the
hand-written schedules. Every run gets its own kernel cache, home and tuning
file (``NANOCOMPILE_TUNING``; the session's conftest sets it to ``off``).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nanocompile import api
from nanocompile.backend import tuning_records
from nanocompile.cli import main
from nanocompile.compiler import CompileOptions, Pipeline
from nanocompile.schedule.knobs import ProjectionKnobs
from nanocompile.targets.arch import host_arch
from nanocompile.tuning.tune import THRESHOLD, Job, jobs, scheduled

TUNED_LINE = re.compile(r"^tuned schedules +(.*)$", re.MULTILINE)
OTHER_POINT = ProjectionKnobs(2, 2, 8, strided=False)
"""Knobs other than the hand ones, for a winner of the test's own."""
ENTRY_FIELDS = ("kernel", "kernels", "knobs", "hand", "winner", "hand_ns", "tuned_ns",
                "speedup", "candidates", "costs", "seed", "samples", "max_candidates",
                "workloads", "date", "toward_hand", "refined", "final_run")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kernel cache, a home and a tuning file of this test's own (returned)."""
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(tmp_path / "kernels"))
    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NANOCOMPILE_TRACEBACK", raising=False)
    records = tmp_path / "tuning.json"
    monkeypatch.setenv(tuning_records.TUNING_ENV, str(records))
    return records


def run(*args: str | Path, check: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "nanocompile.cli", *map(str, args)],
                          capture_output=True, text=True, encoding="utf-8",
                          env={**os.environ, **env}, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stderr}")
    return proc


# -- quick -----------------------------------------------------------------


def test_tune_with_tuning_off_is_a_one_line_error(env: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tuning_records.TUNING_ENV, "off")
    proc = run("tune", check=False)  # refused before any model is loaded or generated
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("nanocompile: error: NANOCOMPILE_TUNING=off")
    assert "Traceback" not in proc.stderr
    assert not (env.parent / "home").exists()  # the default model was not generated


@pytest.mark.parametrize("budget", ["0", "-1", "x", "nan"])
def test_a_bad_budget_is_refused_by_argparse(budget: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", "--budget", budget])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--budget" in err
    assert "expected a positive number" in err
    assert "Traceback" not in err


def test_tune_help_names_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for option in ("--budget", "--seed", "--threads", "--samples", "--max-candidates",
                   "--json", "--model"):
        assert option in out, option
    text = " ".join(out.split())
    assert "per token" in text
    assert "more than 3 % in" in text
    assert "%%" not in out


# -- slow: a real search ---------------------------------------------------


def _tuned_line(records: Path, snapshot: Path) -> str:
    out = run("compile", "--model", snapshot).stdout
    found = TUNED_LINE.search(out)
    assert found, out
    line = found.group(1)
    assert str(records) in line
    return line


def _check_tuned_line(line: str, winners: int) -> None:
    if winners == 0:
        assert line.startswith("none recorded for this machine"), line
    else:
        # the winners come from this very program: each schedules its kernel
        assert line.startswith(f"{winners} winners recorded for this machine"), line
        assert f", {winners} kernels scheduled by them" in line, line


def _jobs(snapshot: Path) -> list[Job]:
    """The kernels ``tune`` tunes, found as ``Model.tune`` finds them."""
    model = api.load(snapshot)
    graph = model._graph(model.last_only)
    loop_module = Pipeline(graph, CompileOptions(quantize=model._quantize)).module("loop")
    found = jobs(loop_module, host_arch())
    assert found, "no projection to tune"
    return found


def _check_json_entry(entry: dict[str, Any], max_candidates: int) -> None:
    for name in ENTRY_FIELDS:
        assert name in entry, name
    assert isinstance(entry["winner"], bool)
    for name in ("knobs", "hand"):
        knobs = entry[name]
        assert isinstance(knobs, str)
        ProjectionKnobs.parse(knobs)  # what compile will read back
    assert isinstance(entry["hand_ns"], float)
    assert entry["hand_ns"] > 0
    assert isinstance(entry["tuned_ns"], float)
    assert entry["tuned_ns"] > 0
    assert math.isclose(entry["speedup"], entry["hand_ns"] / entry["tuned_ns"])
    candidates = entry["candidates"]
    assert isinstance(candidates, int)
    assert 1 <= candidates <= max_candidates
    costs = entry["costs"]
    assert isinstance(costs, list)
    assert len(costs) == candidates
    assert costs[0][0] == entry["hand"]  # the hand point is measured first
    for knobs, ns in costs:
        ProjectionKnobs.parse(knobs)
        assert ns is None or ns > 0
    assert entry["search_best"] in [c[0] for c in costs]  # the search's best was measured
    steps = entry["toward_hand"]  # then taken toward hand: measured again, each step
    refined = entry["refined"]  # then refined: its neighbours measured beside it
    start = refined[0][0][0] if refined else entry["knobs"]
    if steps:
        assert steps[0][0][0] == entry["search_best"]
        assert start in [p for step in steps for p, _ in step]
        for before, step in itertools.pairwise(steps):  # each starts where the
            assert step[0][0] in [p for p, _ in before[1:]]  # one before moved to
    else:
        assert start == entry["search_best"]
    if refined:
        assert entry["knobs"] in [p for step in refined for p, _ in step]
        for before, step in itertools.pairwise(refined):
            assert step[0][0] in [p for p, _ in before[1:]]
    final = entry["final_run"]  # the refined point and the one before, against hand
    if entry["final_rounds"]:
        assert entry["knobs"] in [k for k, _, _ in final]
        assert 1 <= len(final) <= 2
        assert entry["tuned_ns"] == min(ns for _, ns, _ in final)
    else:
        assert final == []
    if entry["winner"]:
        assert entry["knobs"] != entry["hand"]
        assert entry["speedup"] > 1 + THRESHOLD
    assert entry["seed"] == 0
    assert entry["samples"] == 2
    assert entry["max_candidates"] == max_candidates


@pytest.mark.slow  # a real search and a few compiles (~30 s on two cores)
def test_tune_records_then_compile_and_generate_use_the_winners(
        env: Path, tiny_snapshot: Path) -> None:
    records = env
    threads = tuning_records.default_threads()
    _check_tuned_line(_tuned_line(records, tiny_snapshot), 0)  # no file yet: none recorded
    assert not records.exists()

    max_candidates = 4
    proc = run("tune", "--model", tiny_snapshot, "--samples", "2",
               "--max-candidates", str(max_candidates), "--json")
    report = json.loads(proc.stdout)
    assert report["records"] == str(records)
    kernels = report["kernels"]
    expected = _jobs(tiny_snapshot)
    assert [k["kernel"] for k in kernels] == [j.names[0] for j in expected]  # every kernel
    for entry in kernels:
        _check_json_entry(entry, max_candidates)

    # the records: one entry per kernel, for this machine at the default thread count
    found = tuning_records.entries(records, threads)
    assert set(found) == {j.key for j in expected}
    by_name = {j.names[0]: j.key for j in expected}
    for entry in kernels:
        stored = found[by_name[entry["kernel"]]]
        for name in ("knobs", "hand", "winner", "hand_ns", "tuned_ns", "candidates", "costs"):
            assert stored[name] == entry[name], name
    won = sum(1 for e in found.values() if e["winner"] is True)
    assert won == sum(1 for k in kernels if k["winner"])
    assert tuning_records.winners(records, threads).keys() == {
        by_name[k["kernel"]] for k in kernels if k["winner"]}
    assert len(json.loads(records.read_text())["machines"]) == 1
    _check_tuned_line(_tuned_line(records, tiny_snapshot), won)

    if won == 0:  # a winner of our own, so generate has one to use
        job = next(j for j in expected if j.hand != OTHER_POINT
                   and scheduled(j.kernel, host_arch(), OTHER_POINT) is not None)
        tuning_records.record(records, threads, job.key,
                              {"kernel": job.names[0], "knobs": OTHER_POINT.text(),
                               "hand": job.hand.text(), "winner": True})
        won = 1
        _check_tuned_line(_tuned_line(records, tiny_snapshot), won)

    args = ("generate", "--model", tiny_snapshot, "hello", "--max-tokens", "2", "--greedy")
    tuned = run(*args)
    hand = run(*args, NANOCOMPILE_TUNING="off")
    assert tuned.stdout == hand.stdout  # a schedule never changes a bit
    assert tuned.stdout.strip()
    assert (f"{won} kernels scheduled with this machine's tuned winners from {records}"
            in tuned.stderr)
    assert "tuned winners" not in hand.stderr
    # a program of another format: the winners are recorded, none is its kernel's
    other = run("compile", "--model", tiny_snapshot, "--weights", "f32").stdout
    assert f"{won} winners recorded for this machine and thread count, 0 kernels" in other
    f32 = run("generate", "--model", tiny_snapshot, "--weights", "f32", "hello",
              "--max-tokens", "2", "--greedy")
    assert "tuned winners" not in f32.stderr

"""The ``-tuned`` bench engines (bench/engines.py) run, at each thread count of a
run, the program scheduled by the winners recorded for that count.

Claims: with different winners recorded at 1 and at 2 threads, ``c-bf16-tuned``
builds two programs whose C differs, each scheduled by its count's winners
(every recorded kernel), and a slot at 1 thread runs the 1-thread program, one
at 2 threads the 2-thread one; a thread count whose kernels were searched
with the hand schedule kept for each runs the hand program there; a thread
count never searched makes the engine unavailable with the command that
records it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.engines import ENGINES, EngineUnavailable, Shared
from nanocompile.backend import tuning_records
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import CompileOptions, Pipeline
from nanocompile.targets.arch import host_arch
from nanocompile.tuning.tune import jobs, scheduled


def _record(snapshot: Path, records: Path) -> int:
    """Winners at 1 and at 2 threads for every projection of the bf16 program, a
    different point at each count; returns how many projections."""
    shared = Shared(Snapshot.open(snapshot))
    arch = host_arch()
    found = jobs(Pipeline(shared.bf16_graph, CompileOptions()).module("loop"), arch)
    assert found
    for job in found:
        points = [job.hand.replace(rows=r, columns=c) for r, c in ((2, 1), (1, 2), (3, 1))]
        points = [p for p in points if p != job.hand and scheduled(job.kernel, arch, p)]
        assert len(points) >= 2, job.names
        for threads, point in ((1, points[0]), (2, points[1])):
            tuning_records.record(records, threads, job.key,
                                  {"kernel": job.names[0], "knobs": point.text(),
                                   "hand": job.hand.text(), "winner": True})
    return len(found)


def test_each_thread_count_runs_its_own_winners(tiny_snapshot: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    if not host_arch().vector:
        pytest.skip("no vector arch here: nothing is tuned")
    records = tmp_path / "tuning.json"
    projections = _record(tiny_snapshot, records)
    monkeypatch.setenv("NANOCOMPILE_TUNING", str(records))
    shared = Shared(Snapshot.open(tiny_snapshot), thread_counts=(1, 2))
    model = ENGINES["c-bf16-tuned"].build(shared)
    by_threads = model.by_threads  # type: ignore[attr-defined]
    assert sorted(by_threads) == [1, 2]
    assert model.details()["tuned_kernels"] == {"1": projections, "2": projections}
    assert by_threads[1][1].source != by_threads[2][1].source
    for threads in (2, 1, 2):
        monkeypatch.setenv("NANOCOMPILE_THREADS", str(threads))
        model.new_state(8)
        assert model.program is by_threads[threads][1]  # type: ignore[attr-defined]
        assert model.program.threads() == threads  # type: ignore[attr-defined]

    shared = Shared(Snapshot.open(tiny_snapshot), thread_counts=(1, 3))
    with pytest.raises(EngineUnavailable, match=r"at 3 thread.*--threads 3"):
        ENGINES["c-bf16-tuned"].build(shared)


def test_a_count_searched_with_hand_kept_runs_the_hand_schedules(
        tiny_snapshot: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the tuner searched every kernel at 2 threads and kept the hand schedule for
    # each: the engine runs the hand program there (it had been skipped whole, its
    # 1-thread winners unmeasured); a count never searched still makes it unavailable
    if not host_arch().vector:
        pytest.skip("no vector arch here: nothing is tuned")
    records = tmp_path / "tuning.json"
    projections = _record(tiny_snapshot, records)
    shared = Shared(Snapshot.open(tiny_snapshot))
    for job in jobs(Pipeline(shared.bf16_graph, CompileOptions()).module("loop"), host_arch()):
        tuning_records.record(records, 2, job.key, {"kernel": job.names[0],
                                                    "knobs": job.hand.text(),
                                                    "hand": job.hand.text(), "winner": False})
    monkeypatch.setenv("NANOCOMPILE_TUNING", str(records))
    model = ENGINES["c-bf16-tuned"].build(Shared(Snapshot.open(tiny_snapshot),
                                                 thread_counts=(1, 2)))
    assert model.details()["tuned_kernels"] == {"1": projections, "2": 0}
    assert model.details()["tuned_winners"] == {"1": projections, "2": 0}
    hand = ENGINES["c-bf16"].build(Shared(Snapshot.open(tiny_snapshot), thread_counts=(2,)))
    by_threads = model.by_threads  # type: ignore[attr-defined]
    assert by_threads[2][1].source == hand.program.source  # type: ignore[attr-defined]
    assert by_threads[1][1].source != hand.program.source

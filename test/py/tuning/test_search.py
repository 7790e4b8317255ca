"""The tuner's search (``tuning/search.py``, issue 20 must-show 2).

Costs here are a fixed function of the point (no timing), so the tests are
exact: the first batch is the hand point and a seeded sample, greedy steps
follow the best point's neighbours, the cap holds, refused points (``inf``)
are never the best, and a search replayed from its recorded costs (as a
tuning record keeps them) tries exactly the same points in the same order;
so does a replay of a real recorded search of ``nanocompile tune`` (the
records' ``costs``), here from a small measured run of one kernel.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from nanocompile import api
from nanocompile.compiler import CompileOptions, Pipeline
from nanocompile.schedule.knobs import ProjectionKnobs
from nanocompile.targets.arch import Arch, host_arch
from nanocompile.tuning import tune as tuning
from nanocompile.tuning.search import neighbours, points, refine, replay, search, toward_hand

SPACE: dict[str, tuple[int | bool, ...]] = {
    "rows": (1, 2, 3, 4, 6), "columns": (1, 2, 4), "decode": (16,), "strided": (False, True),
    "row_block": (True,), "slp": (False, True)}
HAND = ProjectionKnobs(6, 4, 16)


def _cost(knobs: ProjectionKnobs) -> float:
    """A bowl around rows=3, columns=2, with a hash for ties, and inf at rows=1."""
    if knobs.rows == 1:
        return math.inf
    noise = int(hashlib.sha256(knobs.text().encode()).hexdigest()[:4], 16) / 65536
    return (knobs.rows - 3) ** 2 + (knobs.columns - 2) ** 2 + 0.5 * knobs.strided + noise


def _measure(log: list[list[ProjectionKnobs]]):  # type: ignore[no-untyped-def]
    def measure(batch):  # type: ignore[no-untyped-def]
        log.append(list(batch))
        return [_cost(k) for k in batch]
    return measure


def test_first_batch_is_hand_then_a_seeded_sample() -> None:
    log: list[list[ProjectionKnobs]] = []
    result = search(SPACE, HAND, _measure(log), seed=3, samples=5, max_candidates=40)
    first = log[0]
    assert first[0] == HAND
    assert len(first) == len(set(first)) == 6
    again: list[list[ProjectionKnobs]] = []
    search(SPACE, HAND, _measure(again), seed=3, samples=5, max_candidates=40)
    assert again == log  # same seed, same costs: the same points in the same order
    other: list[list[ProjectionKnobs]] = []
    search(SPACE, HAND, _measure(other), seed=4, samples=5, max_candidates=40)
    assert other[0] != first
    assert [k for k, _ in result.tried] == [k for batch in log for k in batch]


def test_greedy_steps_reach_the_bottom_of_the_bowl() -> None:
    result = search(SPACE, HAND, _measure([]), seed=0, samples=3, max_candidates=200)
    best = result.best
    assert (best.rows, best.columns, best.strided) == (3, 2, False)
    # it stopped: no neighbour of the best is cheaper
    tried = dict(result.tried)
    assert all(tried.get(n, math.inf) >= tried[best] for n in neighbours(best, SPACE))
    assert math.isfinite(result.best_cost)
    assert all(k.rows != 1 for k, c in result.tried if math.isfinite(c))


def test_the_cap_and_no_point_twice() -> None:
    result = search(SPACE, HAND, _measure([]), seed=1, samples=4, max_candidates=9)
    tried = [k for k, _ in result.tried]
    assert len(tried) == len(set(tried)) == 9
    assert len(points(SPACE)) == 5 * 3 * 2 * 2


def test_all_refused_keeps_the_hand_point() -> None:
    result = search(SPACE, HAND, lambda batch: [math.inf] * len(batch), seed=0, samples=4)
    assert result.best == HAND
    assert result.best_cost == math.inf


def test_replay_from_recorded_costs_tries_the_same_points() -> None:
    result = search(SPACE, HAND, _measure([]), seed=5, samples=6, max_candidates=30)
    again = replay(SPACE, HAND, result.costs(), seed=5, samples=6, max_candidates=30)
    assert again.tried == result.tried
    with pytest.raises(KeyError):  # another seed asks for points the record lacks
        replay(SPACE, HAND, result.costs(), seed=6, samples=6, max_candidates=30)


def _first_job(snapshot: Path) -> tuple[Arch, tuning.Job]:
    """The host arch and the first projection job of the tiny model (skips
    without a vector arch: nothing to tune)."""
    arch = host_arch()
    if not arch.vector:
        pytest.skip("no vector arch here: nothing to tune")
    model = api.load(snapshot)
    module = Pipeline(model._graph(True), CompileOptions(quantize=model._quantize)).module("loop")
    return arch, tuning.jobs(module, arch)[0]


def test_replay_of_a_measured_search(tiny_snapshot: Path) -> None:
    """A real (small) search of the tiny model's q projection: measured costs, then
    the record's costs replayed give the same points."""
    arch, job = _first_job(tiny_snapshot)
    measurer = tuning.Measurer(job, arch, threads=1, rounds=3, stream_bytes=1 << 20)
    result = search(job.space, job.hand, measurer, seed=2, samples=3, max_candidates=6)
    assert len(result.tried) == 6
    assert result.tried[0][0] == job.hand
    assert math.isfinite(result.tried[0][1])  # the hand point applies and is bitwise
    outcome = tuning.Outcome(job, result)
    entry = outcome.entry(seed=2, samples=3, max_candidates=6)
    costs = {k: (math.inf if c is None else c) for k, c in entry["costs"]}
    again = replay(job.space, job.hand, costs, seed=2, samples=3, max_candidates=6)
    assert [k for k, _ in again.tried] == [k for k, _ in result.tried]


def test_costs_count_time_per_token(tiny_snapshot: Path, monkeypatch: pytest.MonkeyPatch
                                    ) -> None:
    """A projection's workloads are a decode step (1 token) and a 64-row prefill
    (64 tokens); a candidate's cost is the sum of their medians per token, so the
    decode step is not drowned by the prefill's larger time."""
    _, job = _first_job(tiny_snapshot)
    assert [(w.name, w.syms.get("seq"), w.tokens) for w in job.workloads] == [
        ("decode", 1, 1), ("prefill64", 64, 64)]

    class Library:  # the harness, timed by a fixed table (ns per round per candidate)
        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def check(self) -> list[str | None]:
            return [None, None]

        def time(self, workload: int, rounds: int) -> np.ndarray:
            table = [[1000.0, 1500.0], [64000.0, 32000.0]][workload]
            return np.array([table] * rounds)

    monkeypatch.setattr(tuning, "CandidateLibrary", Library)
    costs, reasons = tuning.measure_kernels(job, [job.kernel, job.kernel], threads=1, rounds=3)
    assert reasons == [None, None]
    assert costs == [1000.0 + 1000.0, 1500.0 + 500.0]


def test_toward_hand_puts_back_the_knobs_that_buy_nothing() -> None:
    """From a best point with rows, slp and decode changed: putting slp back is
    cheaper (step 1), then rows back costs the same (a tie goes to hand, step 2),
    then decode back is dearer: the point keeps decode only. Each step measures
    the point itself beside every knob put back."""
    hand = ProjectionKnobs(6, 2, 16, strided=True, slp=True)
    best = hand.replace(rows=5, decode=4, slp=False)
    table = {best: 10.0, best.replace(rows=6): 11.0, best.replace(decode=16): 14.0,
             best.replace(slp=True): 9.0,  # = hand.replace(rows=5, decode=4)
             hand.replace(decode=4): 9.0, hand.replace(rows=5): 12.0, hand: 12.5}
    log: list[list[ProjectionKnobs]] = []

    def measure(batch: list[ProjectionKnobs]) -> list[float]:
        log.append(list(batch))
        return [table[k] for k in batch]

    chosen, steps = toward_hand(hand, best, measure)
    assert chosen == hand.replace(decode=4)
    assert log == [[best, best.replace(rows=6), best.replace(decode=16), best.replace(slp=True)],
                   [hand.replace(rows=5, decode=4), hand.replace(decode=4),
                    hand.replace(rows=5)],
                   [hand.replace(decode=4), hand]]
    assert [[c for _, c in step] for step in steps] == [[10.0, 11.0, 14.0, 9.0],
                                                        [9.0, 9.0, 12.0], [9.0, 12.5]]


def test_toward_hand_from_hand_measures_nothing() -> None:
    def measure(batch: list[ProjectionKnobs]) -> list[float]:
        raise AssertionError("nothing to measure")

    assert toward_hand(HAND, HAND, measure) == (HAND, [])
    with pytest.raises(ValueError, match="1 costs for 2 points"):
        toward_hand(HAND, HAND.replace(rows=3), lambda batch: [1.0])


def test_refine_takes_a_neighbour_only_for_more_than_the_margin() -> None:
    """From hand, whose decode tile costs more than a neighbour's by 20 %: the
    neighbours are measured beside the point, the point moves there, then the
    next step's best neighbour (2 % cheaper) is within the margin: it stays.
    Each step measures the point first, then every one-knob neighbour."""
    space = {"rows": (3, 6), "columns": (2,), "decode": (4, 8), "strided": (True,),
             "row_block": (True,), "slp": (False, True)}
    hand = ProjectionKnobs(6, 2, 8, strided=True, slp=True)
    table = {hand: 10.0, hand.replace(rows=3): 10.5, hand.replace(decode=4): 8.0,
             hand.replace(slp=False): 11.0, hand.replace(decode=4, rows=3): 7.9,
             hand.replace(decode=4, slp=False): 9.0, hand.replace(decode=4, rows=3, slp=False): 9.5}
    log: list[list[ProjectionKnobs]] = []

    def measure(batch: list[ProjectionKnobs]) -> list[float]:
        log.append(list(batch))
        return [table[k] for k in batch]

    chosen, steps = refine(space, hand, measure, margin=0.03)
    assert chosen == hand.replace(decode=4)
    assert log == [[hand, *neighbours(hand, space)],
                   [hand.replace(decode=4), *neighbours(hand.replace(decode=4), space)]]
    assert [[c for _, c in step] for step in steps] == [[10.0, 10.5, 8.0, 11.0],
                                                        [8.0, 7.9, 10.0, 9.0]]
    # with no margin the 1 % step is taken too; max_steps bounds the moves
    assert refine(space, hand, measure, margin=0.0)[0] == hand.replace(decode=4, rows=3)
    assert refine(space, hand, measure, margin=0.0, max_steps=1)[0] == hand.replace(decode=4)
    # refused neighbours (inf) are never taken; a point without neighbours measures nothing
    assert refine(space, hand, lambda b: [10.0] + [math.inf] * (len(b) - 1),
                  margin=0.03) == (hand, [[(k, 10.0 if k == hand else math.inf)
                                           for k in [hand, *neighbours(hand, space)]]])
    single = {name: (getattr(hand, name),) for name in space}
    assert refine(single, hand, lambda b: 1 / 0, margin=0.03) == (hand, [])
    with pytest.raises(ValueError, match="1 costs for 4 points"):
        refine(space, hand, lambda batch: [1.0], margin=0.03)


def test_the_line_names_a_refined_point() -> None:
    from nanocompile.cli import _tune_line
    from nanocompile.tuning.search import SearchResult

    best = HAND.replace(rows=3, slp=False)
    chosen = HAND.replace(rows=3, decode=4)
    job = tuning.Job("key", ["fused_mul_1"], None, HAND, SPACE, ())  # type: ignore[arg-type]
    outcome = tuning.Outcome(job, SearchResult(HAND, [(HAND, 2.0), (best, 1.0)]),
                             hand_ns=2.0e6, tuned_ns=1.5e6, rounds_won=15, final_rounds=15,
                             chosen=chosen, toward=[[(best, 1.1), (HAND.replace(rows=3), 1.0)]],
                             refined=[[(HAND.replace(rows=3), 1.0), (chosen, 0.8)],
                                      [(chosen, 0.8), (HAND.replace(rows=3, decode=8), 0.81)]])
    entry = outcome.entry(seed=0, samples=3, max_candidates=6)
    assert entry["knobs"] == chosen.text()
    assert entry["refined"][0] == [[HAND.replace(rows=3).text(), 1.0], [chosen.text(), 0.8]]
    assert _tune_line(outcome).startswith(
        f"fused_mul_1: 2 candidates, best {chosen.text()} (the search's {best.text()} taken "
        f"toward hand and refined: 2 knob(s) changed); ")


def test_the_record_and_the_line_name_the_point_taken_toward_hand() -> None:
    from nanocompile.cli import _tune_line
    from nanocompile.tuning.search import SearchResult

    best = HAND.replace(rows=3, slp=False)
    chosen = HAND.replace(rows=3)
    job = tuning.Job("key", ["fused_mul_1", "fused_mul_2"], None, HAND, SPACE, ())  # type: ignore[arg-type]
    outcome = tuning.Outcome(job, SearchResult(HAND, [(HAND, 2.0), (best, 1.0)]),
                             hand_ns=2.0e6, tuned_ns=1.5e6, rounds_won=15, final_rounds=15,
                             chosen=chosen, toward=[[(best, 1.1), (chosen, 1.0)],
                                                    [(chosen, 1.0), (HAND, 2.0)]])
    assert outcome.best == chosen
    assert outcome.winner
    entry = outcome.entry(seed=0, samples=3, max_candidates=6)
    assert entry["knobs"] == chosen.text()
    assert entry["search_best"] == best.text()
    assert entry["toward_hand"] == [[[best.text(), 1.1], [chosen.text(), 1.0]],
                                    [[chosen.text(), 1.0], [HAND.text(), 2.0]]]
    line = _tune_line(outcome)
    assert line.startswith(f"fused_mul_1 (+1): 2 candidates, best {chosen.text()} "
                           f"(the search's {best.text()} with 1 knob(s) put back); ")
    assert line.endswith("(1.333x, 15/15 rounds): kept")


def test_the_final_run_keeps_the_point_before_refining_when_it_is_faster(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Refining moved the point (its 15 rounds said 10 % cheaper); the final run
    holds both against hand and keeps the faster, here the one before."""
    from nanocompile.tuning.search import SearchResult

    best = HAND.replace(rows=3)
    moved = best.replace(columns=2)
    job = tuning.Job("key", ["fused_mul_1"], None, HAND, SPACE, ())  # type: ignore[arg-type]
    asked: list[list[ProjectionKnobs]] = []

    def final_runs(job, arch, points, threads, rounds=15, stream_bytes=None):  # type: ignore[no-untyped-def]
        asked.append(list(points))
        return 2.0, [(1.9, 4), (1.5, 14)]

    monkeypatch.setattr(tuning, "Measurer", lambda *a, **k: None)
    monkeypatch.setattr(tuning, "_same_schedule", lambda job, arch, knobs: knobs == HAND)
    monkeypatch.setattr(tuning, "toward_hand", lambda hand, best, measure: (best, []))
    monkeypatch.setattr(tuning, "refine", lambda space, start, measure, margin: (
        moved, [[(start, 1.0), (moved, 0.9)]]))
    monkeypatch.setattr(tuning, "final_runs", final_runs)
    outcome = tuning.Outcome(job, SearchResult(HAND, [(HAND, 2.0), (best, 1.0)]))
    tuning._finish(outcome, None, 1, math.inf, None)  # type: ignore[arg-type]
    assert asked == [[moved, best]]
    assert (outcome.best, outcome.hand_ns, outcome.tuned_ns, outcome.rounds_won) == \
        (best, 2.0, 1.5, 14)
    assert outcome.winner
    assert outcome.entry(0, 3, 6)["final_run"] == [[moved.text(), 1.9, 4], [best.text(), 1.5, 14]]

"""Tuning a program's projections on this machine: measure, search, keep, record.

For each distinct projection kernel of a program's Loop IR (``jobs``: one
per kernel key, however many launches share it; ``hand_knobs`` is not None)
the search of ``tuning/search.py`` runs over its knob space
(``knob_space``), with a cost measured here:

* a point becomes a schedule: the first of ``default_schedules(kernel, arch,
  knobs=point)`` that applies (points giving the same directives are one
  candidate, timed once); a point none of whose candidates applies, or that
  packs a weight, costs ``inf``;
* a batch's candidates are compiled into one library with the unscheduled
  kernel (``tuning/harness.py``), each checked bitwise against it, in guard
  regions, on every workload before anything is timed (a failure costs
  ``inf`` and is reported: it would be a bug in a schedule primitive);
* the workloads are a decode step and a short prefill (``WORKLOADS``: 1 and
  64 rows), the weights rotated through enough copies to stream from memory
  as in a decode step; a C loop times every candidate once per round, each
  round starting at another candidate; the cost of a candidate is the sum
  over the workloads of its median time per token (a decode step's time,
  plus the prefill's divided by its 64 rows: summed unweighted, the prefill
  took ~95 % of gate/up's cost on a Zen 4 and the decode tile was chosen by
  prefill alone).

The search's best point is first taken back toward the hand point, a knob at
a time, measured with ``FINAL_ROUNDS`` rounds (``search.toward_hand``: a knob
the noise of the search changed for nothing goes back), then refined
(``search.refine``: its one-knob neighbours measured with ``FINAL_ROUNDS``
rounds too, a move taken only for more than ``THRESHOLD``). That point and,
if refining moved it, the one before (the noise of 15 rounds moves it too:
on a Zen 4 a refined point ran 16 % slower than hand in the final run) are
run against the hand-written schedule in a final run (``FINAL_ROUNDS`` rounds
in one library); the faster is kept only if it is more than ``THRESHOLD``
faster than hand; either way the entry is recorded (``backend/tuning_records.py``) with
every cost measured, so the search can be replayed, and ``compile`` then uses
the winners.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nanocompile.backend import tuning_records
from nanocompile.dialects import loop, sched
from nanocompile.passes.apply_schedule import apply_directives
from nanocompile.schedule.defaults import default_schedules, hand_knobs, knob_space
from nanocompile.schedule.knobs import ProjectionKnobs, kernel_key
from nanocompile.schedule.pack import PackPlan
from nanocompile.schedule.primitives import ScheduleError
from nanocompile.targets.arch import Arch
from nanocompile.tuning.harness import CandidateLibrary, TuningError, Workload
from nanocompile.tuning.search import SearchResult, refine, search, toward_hand

PREFILL_ROWS = 64
WORKLOADS = (("decode", 1), (f"prefill{PREFILL_ROWS}", PREFILL_ROWS))
"""The workloads (name, rows of ``x``): a decode step and a short prefill."""
ROUNDS = 7
"""Rounds per batch in the search (the median of 7 per candidate and workload)."""
FINAL_ROUNDS = 15
THRESHOLD = 0.03
"""A winner is kept when the hand schedule takes more than ``1 + THRESHOLD``
times its time in the final paired run."""


class BudgetExhausted(RuntimeError):
    """The time budget ran out."""


@dataclass
class Job:
    """One projection kernel to tune: its key, the names sharing it, the
    unscheduled kernel, the hand-written point and the space."""

    key: str
    names: list[str]
    kernel: loop.KernelOp
    hand: ProjectionKnobs
    space: dict[str, tuple[int | bool, ...]]
    workloads: tuple[Workload, ...]


def _workloads(kernel: loop.KernelOp) -> tuple[Workload, ...] | None:
    """``WORKLOADS`` as symbol values for ``kernel``: ``seq`` the rows, ``past`` 0,
    ``capacity`` the most rows; None for a kernel with another symbol."""
    symbols = list(kernel.symbols)
    if not set(symbols) <= {"seq", "past", "capacity"}:
        return None
    out = []
    for name, rows in WORKLOADS:
        values = {"seq": rows, "past": 0, "capacity": PREFILL_ROWS}
        out.append(Workload(name, {s: values[s] for s in symbols},
                            tokens=rows if "seq" in symbols else 1))
    if "seq" not in symbols:  # one shape whatever the rows: one workload
        return tuple(out[:1])
    return tuple(out)


def jobs(loop_module: ModuleOp, arch: Arch) -> list[Job]:
    """The distinct projection kernels of ``loop_module`` to tune on ``arch``, in
    module order (the first kernel of each key)."""
    found: dict[str, Job] = {}
    for kernel in loop_module.ops:
        if not isinstance(kernel, loop.KernelOp):
            continue
        hand = hand_knobs(kernel, arch)
        workloads = _workloads(kernel)
        if hand is None or workloads is None:
            continue
        key = kernel_key(kernel, arch.name)
        if key in found:
            found[key].names.append(kernel.sym_name.data)
            continue
        found[key] = Job(key, [kernel.sym_name.data], kernel, hand, knob_space(kernel, arch),
                         workloads)
    return list(found.values())


def scheduled(kernel: loop.KernelOp, arch: Arch, knobs: ProjectionKnobs
              ) -> tuple[tuple[sched.Directive, ...], loop.KernelOp] | None:
    """The first of ``default_schedules(kernel, arch, knobs=knobs)`` that applies
    without packing, with the scheduled kernel; None if none does."""
    for directives in default_schedules(kernel, arch, knobs=knobs):
        packs: list[PackPlan] = []
        try:
            out = apply_directives(kernel, directives, None, packs)
        except ScheduleError:
            continue
        if not packs:
            return tuple(directives), out
    return None


@dataclass
class Measurer:
    """The cost of a batch of points of one job (the module docstring), and what
    happened to each: ``notes`` by the points' text (refused, not bitwise)."""

    job: Job
    arch: Arch
    threads: int
    rounds: int = ROUNDS
    deadline: float = math.inf
    stream_bytes: int | None = None
    notes: dict[str, str] = field(default_factory=dict)
    libraries: int = 0

    def __call__(self, batch: Sequence[ProjectionKnobs]) -> list[float]:
        if time.monotonic() > self.deadline:
            raise BudgetExhausted(f"budget spent before {self.job.names[0]}'s next batch")
        by_directives: dict[tuple[sched.Directive, ...], loop.KernelOp] = {}
        which: list[tuple[sched.Directive, ...] | None] = []
        for knobs in batch:
            found = scheduled(self.job.kernel, self.arch, knobs)
            if found is None:
                self.notes[knobs.text()] = "no candidate schedule applies"
                which.append(None)
                continue
            by_directives.setdefault(found[0], found[1])
            which.append(found[0])
        costs = dict.fromkeys(by_directives, math.inf)
        if by_directives:
            kernels = list(by_directives.values())
            times, reasons = measure_kernels(self.job, kernels, self.threads, self.rounds,
                                             self.stream_bytes)
            self.libraries += 1
            for directives, cost, reason in zip(by_directives, times, reasons, strict=True):
                costs[directives] = cost
                if reason is not None:
                    for knobs, d in zip(batch, which, strict=True):
                        if d == directives:
                            self.notes[knobs.text()] = f"not bitwise: {reason}"
        return [math.inf if d is None else costs[d] for d in which]


def measure_kernels(job: Job, kernels: Sequence[loop.KernelOp], threads: int, rounds: int,
                    stream_bytes: int | None = None
                    ) -> tuple[list[float], list[str | None]]:
    """Per kernel (scheduled forms of ``job.kernel``), the sum over the workloads of
    its median ns per token over ``rounds`` rounds in one library (``inf`` if its
    bitwise check failed), and the check's reason (None: bitwise)."""
    library = CandidateLibrary(job.kernel, kernels, job.workloads, threads=threads,
                               stream_bytes=stream_bytes)
    reasons = library.check()
    good = [i for i, r in enumerate(reasons) if r is None]
    costs = [math.inf] * len(kernels)
    if good:
        total = np.zeros(len(kernels))
        for w, workload in enumerate(job.workloads):
            ns = library.time(w, rounds)
            total += np.median(ns, axis=0) / workload.tokens
        for i in good:
            costs[i] = float(total[i])
    return costs, reasons


@dataclass
class Outcome:
    """One job's search and final run."""

    job: Job
    result: SearchResult
    hand_ns: float = math.nan
    tuned_ns: float = math.nan
    rounds_won: int = 0
    final_rounds: int = 0
    seconds: float = 0.0
    note: str = ""
    chosen: ProjectionKnobs | None = None  # the search's best taken toward hand, refined
    toward: list[list[tuple[ProjectionKnobs, float]]] = field(default_factory=list)
    refined: list[list[tuple[ProjectionKnobs, float]]] = field(default_factory=list)
    final: list[tuple[ProjectionKnobs, float, int]] = field(default_factory=list)

    @property
    def best(self) -> ProjectionKnobs:
        """The point run against hand: the search's best taken toward hand, then
        refined."""
        return self.result.best if self.chosen is None else self.chosen

    @property
    def speedup(self) -> float:
        """Hand time over the best point's in the final run."""
        return self.hand_ns / self.tuned_ns if self.tuned_ns > 0 else math.nan

    @property
    def winner(self) -> bool:
        return (self.best != self.job.hand and math.isfinite(self.speedup)
                and self.speedup > 1 + THRESHOLD)

    def entry(self, seed: int, samples: int, max_candidates: int) -> dict[str, Any]:
        """The record of this outcome (``backend/tuning_records.py``)."""
        return {"kernel": self.job.names[0], "kernels": self.job.names,
                "knobs": self.best.text(), "hand": self.job.hand.text(),
                "search_best": self.result.best.text(),
                "toward_hand": [[[k.text(), c if math.isfinite(c) else None] for k, c in step]
                                for step in self.toward],
                "refined": [[[k.text(), c if math.isfinite(c) else None] for k, c in step]
                            for step in self.refined],
                "final_run": [[k.text(), ns, won] for k, ns, won in self.final],
                "winner": self.winner, "hand_ns": self.hand_ns, "tuned_ns": self.tuned_ns,
                "speedup": self.speedup, "rounds_won": self.rounds_won,
                "final_rounds": self.final_rounds, "candidates": len(self.result.tried),
                "seed": seed, "samples": samples, "max_candidates": max_candidates,
                "costs": [[k.text(), c if math.isfinite(c) else None]
                          for k, c in self.result.tried],
                "workloads": [w.name for w in self.job.workloads],
                "seconds": round(self.seconds, 1), "note": self.note,
                "date": datetime.now(UTC).isoformat(timespec="seconds")}


def final_runs(job: Job, arch: Arch, points: Sequence[ProjectionKnobs], threads: int,
               rounds: int = FINAL_ROUNDS, stream_bytes: int | None = None
               ) -> tuple[float, list[tuple[float, int]]]:
    """The hand schedule against ``points`` in one library, ``rounds`` rounds per
    workload: (hand ns, per point (its ns, the rounds whose summed time per
    token it won against hand)); ns: sums over the workloads of the medians
    per token."""
    found = [scheduled(job.kernel, arch, k) for k in (job.hand, *points)]
    if any(f is None for f in found):
        raise TuningError(f"{job.names[0]}: the hand or the best point does not apply")
    library = CandidateLibrary(job.kernel, [f[1] for f in found if f is not None],
                               job.workloads, threads=threads, stream_bytes=stream_bytes)
    bad = [r for r in library.check() if r is not None]
    if bad:
        raise TuningError(f"{job.names[0]}: not bitwise in the final run: {bad[0]}")
    per_round = np.zeros((rounds, len(found)))
    medians = np.zeros(len(found))
    for w, workload in enumerate(job.workloads):
        ns = library.time(w, rounds).astype(np.float64) / workload.tokens
        per_round += ns
        medians += np.median(ns, axis=0)
    return float(medians[0]), [(float(medians[i]), int(np.sum(per_round[:, i] < per_round[:, 0])))
                               for i in range(1, len(found))]


Progress = Callable[[int, int, Job, SearchResult | None], None]
"""Called with (kernels done, kernels in all, the job, its search so far)."""


def tune(job_list: Sequence[Job], arch: Arch, *, threads: int, seed: int = 0,
         samples: int = 12, max_candidates: int = 48, budget: float = math.inf,
         records: Path | None = None, progress: Progress | None = None,
         on_outcome: Callable[[Outcome, int, int], None] | None = None,
         stream_bytes: int | None = None) -> list[Outcome]:
    """Search every job, run each best point against the hand schedule (unless
    it schedules the kernel as the hand point does), record the outcomes in
    ``records`` (each as soon as it is known) and pass each to ``on_outcome``
    with (kernels done, kernels in all); stops when ``budget`` seconds are
    spent (the jobs not reached are not in the result)."""
    deadline = time.monotonic() + budget
    outcomes = []
    for index, job in enumerate(job_list):
        if time.monotonic() > deadline:
            break
        start = time.monotonic()
        measurer = Measurer(job, arch, threads, deadline=deadline, stream_bytes=stream_bytes)
        partial: SearchResult | None = None

        def report(result: SearchResult, index: int = index, job: Job = job) -> None:
            nonlocal partial
            partial = result
            if progress is not None:
                progress(index, len(job_list), job, result)

        if progress is not None:
            progress(index, len(job_list), job, None)
        try:
            result = search(job.space, job.hand, measurer, seed=seed, samples=samples,
                            max_candidates=max_candidates, progress=report)
            note = ""
        except BudgetExhausted as e:
            result = partial if partial is not None else SearchResult(job.hand)
            note = str(e)
        outcome = Outcome(job, result, note=note)
        if result.tried:
            _finish(outcome, arch, threads, deadline, stream_bytes)
        outcome.seconds = time.monotonic() - start
        if records is not None and result.tried:
            tuning_records.record(records, threads, job.key,
                                  outcome.entry(seed, samples, max_candidates))
        outcomes.append(outcome)
        if progress is not None:
            progress(index + 1, len(job_list), job, result)
        if on_outcome is not None:
            on_outcome(outcome, index + 1, len(job_list))
    return outcomes


def _finish(outcome: Outcome, arch: Arch, threads: int, deadline: float,
            stream_bytes: int | None) -> None:
    """After a search: its best taken toward hand and refined (not when the budget
    cut the search short), then run against the hand schedule unless it is
    hand's."""
    job, result = outcome.job, outcome.result
    final = Measurer(job, arch, threads, rounds=FINAL_ROUNDS, deadline=deadline,
                     stream_bytes=stream_bytes)
    if not _same_schedule(job, arch, result.best) and not outcome.note:
        try:
            outcome.chosen, outcome.toward = toward_hand(job.hand, result.best, final)
        except BudgetExhausted as e:
            outcome.note = f"{e} (the search's best kept)"
    before = outcome.best
    if not outcome.note:
        try:
            outcome.chosen, outcome.refined = refine(job.space, before, final,
                                                     margin=THRESHOLD)
        except BudgetExhausted as e:
            outcome.note = f"{e} (the point before refining kept)"
    # the final run holds the refined point and the one before it (a move the
    # noise made is undone there: each is against hand in the same rounds)
    points = [k for k in dict.fromkeys([outcome.best, before])
              if not _same_schedule(job, arch, k)]
    if not points:
        # the hand schedule is the best: nothing to run against it
        outcome.hand_ns = outcome.tuned_ns = dict(result.tried).get(job.hand, math.nan)
        return
    hand_ns, runs = final_runs(job, arch, points, threads, stream_bytes=stream_bytes)
    pick = min(range(len(points)), key=lambda i: runs[i][0])
    outcome.chosen = points[pick]
    outcome.final = [(k, ns, won) for k, (ns, won) in zip(points, runs, strict=True)]
    outcome.hand_ns, outcome.tuned_ns = hand_ns, runs[pick][0]
    outcome.rounds_won, outcome.final_rounds = runs[pick][1], FINAL_ROUNDS


def _same_schedule(job: Job, arch: Arch, knobs: ProjectionKnobs) -> bool:
    """``knobs`` schedules ``job``'s kernel as the hand point does."""
    if knobs == job.hand:
        return True
    hand, other = scheduled(job.kernel, arch, job.hand), scheduled(job.kernel, arch, knobs)
    return hand is not None and other is not None and hand[0] == other[0]

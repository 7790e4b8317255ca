"""The search over one kernel's knobs: a seeded random sample, then greedy steps.

``search(space, hand, measure, seed=...)``:

1. the first batch is the hand-written point followed by ``samples``
   distinct points drawn from ``space`` (every combination of the knob
   values) by ``random.Random(seed)``;
2. then, from the best point so far, every neighbour (one knob changed to
   another of its values) not tried yet is one batch; when a batch holds a
   better point the search moves there and looks at its neighbours, else it
   stops. ``max_candidates`` caps the points measured in all.

``measure`` gets a batch of points and returns a cost per point (lower is
better; ``math.inf``: refused, e.g. not bitwise or not applicable). The
search is a function of ``space``, ``hand``, ``seed`` and the costs only, so
replaying it with recorded costs (``replay``) tries exactly the same points in
the same order: what the tests check.

``toward_hand(hand, best, measure)`` then takes the best point back toward
the hand one, a knob at a time, measured again (``tuning/tune.py`` measures
it with more rounds): each step measures the point with every knob it changed
from hand put back, one at a time, beside the point itself, and moves to the
cheapest of them (a point put back wins a tie) until the point itself is the
cheapest. The search measures with noise (a decode step streams its weights
from memory: ~10-15 % between batches on a Zen 4), so its best point may
change knobs that cost nothing in one workload and something in the other:
on a Zen 4 at 1 thread gate/up's best had 4 knobs changed, one of them
(``slp`` off) 16 % slower in the prefill and no faster in decode.

``refine(space, start, measure, margin=...)`` last measures the point's one-knob
neighbours beside it (``tune.py``: with the final run's rounds too) and moves
to the cheapest while it costs less than the point by more than ``margin``:
the noise that made the search keep a knob for nothing also hides a knob
that buys something. On a Zen 4 at 2 threads, bf16 gate/up's decode tile of 4
sums cost 0.55 ms per token against the hand tile's 0.72 in the search, but
the search's best (another prefill tile, 0.53) was taken back to hand, and
with it the hand decode tile; in the model that tile was 8-15 % of a decode
step slower.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from nanocompile.schedule.knobs import ProjectionKnobs

Measure = Callable[[Sequence[ProjectionKnobs]], Sequence[float]]


@dataclass
class SearchResult:
    """What a search tried, in order, with the costs, and the best point."""

    hand: ProjectionKnobs
    tried: list[tuple[ProjectionKnobs, float]] = field(default_factory=list)

    @property
    def best(self) -> ProjectionKnobs:
        """The cheapest point tried (the hand point on a tie: it was tried first)."""
        return min(self.tried, key=lambda item: item[1])[0] if self.tried else self.hand

    @property
    def best_cost(self) -> float:
        return min((cost for _, cost in self.tried), default=math.inf)

    def costs(self) -> dict[str, float]:
        """The costs by the points' text (what ``replay`` needs)."""
        return {knobs.text(): cost for knobs, cost in self.tried}


def points(space: Mapping[str, Sequence[int | bool]]) -> list[ProjectionKnobs]:
    """Every point of ``space`` (knob name -> values), in a fixed order."""
    names = list(space)
    return [ProjectionKnobs(**dict(zip(names, values, strict=True)))  # type: ignore[arg-type]
            for values in itertools.product(*(space[n] for n in names))]


def neighbours(knobs: ProjectionKnobs, space: Mapping[str, Sequence[int | bool]]
               ) -> list[ProjectionKnobs]:
    """The points one knob away from ``knobs`` in ``space``, knob by knob, value by value."""
    out = []
    for name, values in space.items():
        for value in values:
            if value != getattr(knobs, name):
                out.append(knobs.replace(**{name: value}))
    return out


def search(space: Mapping[str, Sequence[int | bool]], hand: ProjectionKnobs, measure: Measure,
           *, seed: int = 0, samples: int = 12, max_candidates: int = 48,
           progress: Callable[[SearchResult], None] | None = None) -> SearchResult:
    """Search ``space`` from ``hand`` (module docstring); ``progress`` is called
    after every batch."""
    result = SearchResult(hand)
    seen: set[ProjectionKnobs] = set()

    def run(batch: list[ProjectionKnobs]) -> None:
        batch = [k for k in dict.fromkeys(batch) if k not in seen]
        batch = batch[:max(0, max_candidates - len(result.tried))]
        if not batch:
            return
        costs = list(measure(batch))
        if len(costs) != len(batch):
            raise ValueError(f"measure returned {len(costs)} costs for {len(batch)} points")
        seen.update(batch)
        result.tried += list(zip(batch, (float(c) for c in costs), strict=True))
        if progress is not None:
            progress(result)

    rng = random.Random(seed)
    others = [p for p in points(space) if p != hand]
    run([hand, *rng.sample(others, min(samples, len(others)))])
    while len(result.tried) < max_candidates:
        best, cost = result.best, result.best_cost
        run(neighbours(best, space))
        if result.best_cost >= cost or result.best == best:
            break
    return result


def refine(space: Mapping[str, Sequence[int | bool]], start: ProjectionKnobs, measure: Measure,
           *, margin: float, max_steps: int = 3
           ) -> tuple[ProjectionKnobs, list[list[tuple[ProjectionKnobs, float]]]]:
    """``start`` moved to a one-knob neighbour while one costs less than
    ``1 / (1 + margin)`` of the point's, measured beside it (module docstring),
    at most ``max_steps`` times: the point reached and every step's batch with
    its costs (the point first)."""
    current, steps = start, []
    for _ in range(max_steps):
        batch = [current, *neighbours(current, space)]
        if len(batch) == 1:
            break
        costs = [float(c) for c in measure(batch)]
        if len(costs) != len(batch):
            raise ValueError(f"measure returned {len(costs)} costs for {len(batch)} points")
        steps.append(list(zip(batch, costs, strict=True)))
        cheapest = min(range(1, len(batch)), key=lambda i: costs[i])
        if not costs[cheapest] * (1 + margin) < costs[0]:
            break
        current = batch[cheapest]
    return current, steps


def replay(space: Mapping[str, Sequence[int | bool]], hand: ProjectionKnobs,
           costs: Mapping[str, float], *, seed: int = 0, samples: int = 12,
           max_candidates: int = 48) -> SearchResult:
    """The search again with the costs a search recorded (``SearchResult.costs``):
    KeyError if it asks for a point the record lacks."""
    return search(space, hand, lambda batch: [costs[k.text()] for k in batch], seed=seed,
                  samples=samples, max_candidates=max_candidates)


def toward_hand(hand: ProjectionKnobs, best: ProjectionKnobs, measure: Measure
                ) -> tuple[ProjectionKnobs, list[list[tuple[ProjectionKnobs, float]]]]:
    """``best`` taken back toward ``hand`` knob by knob (module docstring): the
    point chosen and every step's batch with its costs (the point first)."""
    names = [f.name for f in dataclasses.fields(ProjectionKnobs)]
    current, steps = best, []
    while True:
        back = [current.replace(**{n: getattr(hand, n)}) for n in names
                if getattr(current, n) != getattr(hand, n)]
        if not back:
            break
        batch = [current, *back]
        costs = [float(c) for c in measure(batch)]
        if len(costs) != len(batch):
            raise ValueError(f"measure returned {len(costs)} costs for {len(batch)} points")
        steps.append(list(zip(batch, costs, strict=True)))
        cheapest = min(range(1, len(batch)), key=lambda i: costs[i])
        if not costs[cheapest] <= costs[0]:
            break
        current = batch[cheapest]
    return current, steps

"""Statistics for benchmark rounds: centre, spread, a paired sign test, a control.

Timings on a shared 2-core machine are noisy and skewed (interference only
ever adds time), so the harness reports medians and minima with their spread,
decides head-to-heads with an exact sign test over paired rounds (no
distributional assumption), and checks each engine against its own history.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction


def _checked(values: Sequence[float]) -> list[float]:
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("need at least one value")
    if any(math.isnan(x) for x in xs):
        raise ValueError("values contain NaN")
    return xs


def median(values: Sequence[float]) -> float:
    """The median (mean of the two middle values for an even count)."""
    xs = sorted(_checked(values))
    n, mid = len(xs), len(xs) // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2


def minimum(values: Sequence[float]) -> float:
    """The smallest value: the least-disturbed round for a timing."""
    return min(_checked(values))


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics.

    Position ``q * (n - 1)`` in the sorted values (NumPy's default "linear"
    method, ``statistics.quantiles(method="inclusive")``).
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q}")
    xs = sorted(_checked(values))
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Spread:
    """How far a set of rounds scatters around its median."""

    n: int
    median: float
    minimum: float
    maximum: float
    q1: float
    q3: float
    iqr: float  # q3 - q1
    range: float  # maximum - minimum
    rel_iqr: float  # iqr / median
    rel_range: float  # range / median

    def as_dict(self) -> dict[str, float]:
        """Plain dict for JSON records."""
        return asdict(self)


def spread(values: Sequence[float]) -> Spread:
    """Median, min, max, quartiles, IQR and min–max range, absolute and relative.

    Relative spreads divide by the median; they are ``inf`` when the median
    is 0 and the spread is not.
    """
    xs = _checked(values)
    med = median(xs)
    q1, q3 = quantile(xs, 0.25), quantile(xs, 0.75)
    lo, hi = min(xs), max(xs)

    def rel(width: float) -> float:
        if med == 0:
            return 0.0 if width == 0 else math.inf
        return width / abs(med)

    return Spread(
        n=len(xs),
        median=med,
        minimum=lo,
        maximum=hi,
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        range=hi - lo,
        rel_iqr=rel(q3 - q1),
        rel_range=rel(hi - lo),
    )


def summarize(values: Sequence[float]) -> dict[str, float]:
    """``spread(values)`` as a dict: what a measurement record stores."""
    return spread(values).as_dict()


def binomial_upper_tail(k: int, n: int) -> Fraction:
    """Exact P(X >= k) for X ~ Binomial(n, 1/2): sum_{i>=k} C(n, i) / 2**n."""
    if n < 0:
        raise ValueError("n must be >= 0")
    if k <= 0:
        return Fraction(1)
    if k > n:
        return Fraction(0)
    return Fraction(sum(math.comb(n, i) for i in range(k, n + 1)), 2**n)


@dataclass(frozen=True)
class SignTest:
    """An exact one-sided sign test over paired rounds."""

    wins: int  # rounds where a beat b
    losses: int  # rounds where b beat a
    ties: int  # dropped
    p_exact: Fraction  # P(wins >= observed | no difference)

    @property
    def n(self) -> int:
        """Paired rounds that count (ties dropped)."""
        return self.wins + self.losses

    @property
    def p_value(self) -> float:
        """``p_exact`` as a float."""
        return float(self.p_exact)

    def as_dict(self) -> dict[str, int | float | str]:
        """Plain dict for JSON records (the exact p as a "num/den" string too)."""
        return {
            "wins": self.wins,
            "losses": self.losses,
            "ties": self.ties,
            "n": self.n,
            "p_value": self.p_value,
            "p_exact": str(self.p_exact),
        }


def sign_test(a: Sequence[float], b: Sequence[float], *, lower_is_better: bool = True) -> SignTest:
    """Is ``a`` better than ``b``? Exact one-sided sign test over paired rounds.

    Round i pairs ``a[i]`` with ``b[i]`` (measured back to back in the same
    round). A win is ``a[i] < b[i]`` (or ``>`` when ``lower_is_better`` is
    False, e.g. tokens/s); equal pairs are ties and dropped. Under the null
    hypothesis each remaining round is a fair coin, so the p-value is the
    binomial upper tail P(X >= wins), X ~ Binomial(wins + losses, 1/2),
    computed exactly. With no untied rounds p = 1. Example: 6 of 6 wins gives
    p = 1/64 ≈ 0.016.
    """
    if len(a) != len(b):
        raise ValueError(f"paired rounds need equal lengths, got {len(a)} and {len(b)}")
    xs, ys = [float(x) for x in a], [float(y) for y in b]
    if any(math.isnan(v) for v in xs + ys):
        raise ValueError("values contain NaN")
    wins = losses = ties = 0
    for x, y in zip(xs, ys, strict=True):
        better, worse = (x < y, x > y) if lower_is_better else (x > y, x < y)
        wins += better
        losses += worse
        ties += not (better or worse)
    return SignTest(wins, losses, ties, binomial_upper_tail(wins, wins + losses))


@dataclass(frozen=True)
class Control:
    """Whether a run reads far off the engine's own best recorded median."""

    flagged: bool
    median: float
    best: float | None  # best recorded median, None without history
    ratio: float | None  # how many times worse than best (>= 1 means worse)
    threshold: float
    history: int  # how many recorded medians were compared

    def as_dict(self) -> dict[str, float | int | bool | None]:
        """Plain dict for JSON records."""
        return asdict(self)


def control_check(
    median_now: float,
    history: Sequence[float],
    *,
    threshold: float = 1.5,
    lower_is_better: bool = True,
) -> Control:
    """Flag a run whose median is more than ``threshold`` × worse than the best in ``history``.

    ``history`` holds the engine's earlier medians for the same machine,
    metric and thread count (see ``bench.results.history_medians``). For
    times the best is the smallest and the run is flagged when
    ``median_now > threshold * best``; for rates (``lower_is_better=False``)
    the best is the largest and the run is flagged when
    ``median_now < best / threshold``. No history never flags.
    """
    if threshold < 1:
        raise ValueError(f"threshold must be >= 1, got {threshold}")
    if math.isnan(median_now):
        raise ValueError("median is NaN")
    past = [float(h) for h in history if not math.isnan(float(h))]
    if not past:
        return Control(False, median_now, None, None, threshold, 0)
    if lower_is_better:
        best = min(past)
        ratio = median_now / best if best > 0 else math.inf
    else:
        best = max(past)
        ratio = best / median_now if median_now > 0 else math.inf
    return Control(ratio > threshold, median_now, best, ratio, threshold, len(past))

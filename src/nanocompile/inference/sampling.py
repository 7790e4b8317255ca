"""Choosing the next token from a row of logits (spec §1.4).

The order and the masks are those of transformers' warpers: temperature
(``TemperatureLogitsWarper``), then top-k (``TopKLogitsWarper``), then top-p
(``TopPLogitsWarper``), then a softmax and a draw. Every mask is computed on
f32 logits the way torch computes it on CPU:

- temperature divides by ``f32(T)`` in f32 (bit for bit torch's division);
- top-k keeps every value ``>=`` the k-th largest (ties at the threshold
  survive);
- top-p sorts ascending (stably; torch's sort is not stable past 16 entries,
  which only changes *which* of several tied logits straddling the boundary
  go), takes an f32 softmax (exp rounded from f64, then ``e * (1 / Σ e)``),
  accumulates it in f64 rounding each partial sum to f32 (torch's CPU
  ``cumsum`` accumulates f32 in double), removes entries whose cumulative
  probability is ``<= f32(1 - p)`` and always keeps the top. torch's softmax
  uses a faster exp a few ulp off, so a cumulative sum within a few ulp of
  ``1 - p`` could fall on the other side; the tests bound how often.

The draw is an inverse-CDF search over f64 probabilities with a seeded
``numpy.random.Generator``: the same seed gives the same tokens. Temperature 0
is argmax (the first maximal index, as ``torch.argmax``) and uses no
randomness. A repetition penalty (``RepetitionPenaltyLogitsProcessor``) exists
but is applied only when asked for.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nanocompile.checkpoint.jsonfile import JSONFileError, read_json

# What transformers uses for a generation_config.json key that is absent
# (``GenerationConfig._get_default_generation_params``).
_HF_DEFAULTS: dict[str, object] = {
    "do_sample": False,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
    "repetition_penalty": 1.0,
}


class GenerationConfigError(ValueError):
    """A generation_config.json that cannot be read as sampling parameters."""


@dataclass(frozen=True)
class SamplingParams:
    """How to pick a token: temperature, top-k, top-p, seed.

    ``temperature == 0`` is greedy; ``top_k == 0`` and ``top_p == 1`` disable
    their filters; ``seed=None`` draws fresh entropy. ``repetition_penalty``
    (1.0 = off) is applied by :class:`Sampler` only when the caller passes the
    previous token ids.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        _check_temperature(self.temperature)
        _check_top_k(self.top_k)
        _check_top_p(self.top_p)
        _check_penalty(self.repetition_penalty)
        if self.seed is not None and (_not_int(self.seed) or self.seed < 0):
            raise ValueError(f"seed must be a non-negative integer or None, got {self.seed!r}")

    @property
    def greedy(self) -> bool:
        """True when the choice is argmax (temperature 0)."""
        return self.temperature == 0


def _not_int(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int | np.integer)


def _not_real(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating)


def _real(name: str, value: object) -> float:
    """``value`` as a float, or a ValueError naming ``name`` (an integer too large
    for a float, as JSON allows, is not finite)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)
    except OverflowError:  # only an int is too large for a float
        bits = int(value).bit_length()
        raise ValueError(f"{name} must be finite, got an integer of {bits} bits") from None


def _check_temperature(t: float) -> None:
    t = _real("temperature", t)
    if math.isnan(t) or t < 0:
        raise ValueError(f"temperature must be >= 0, got {t}")
    if math.isinf(t):
        raise ValueError(f"temperature must be finite, got {t}")
    if t > 0 and _f32(t) == 0:
        raise ValueError(f"temperature {t} is 0 in f32; use 0 for greedy")
    if math.isinf(_f32(t)):  # the logits are divided by f32(T)
        raise ValueError(f"temperature must be at most {np.finfo(np.float32).max:.8g} "
                         f"(finite in f32), got {t}")


def _check_top_k(k: int) -> None:
    if _not_int(k):
        raise ValueError(f"top_k must be an integer, got {k!r}")
    if k < 0:
        raise ValueError(f"top_k must be >= 0 (0 disables it), got {k}")


def _check_top_p(p: float) -> None:
    p = _real("top_p", p)
    if not 0 < p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {p}")


def _check_penalty(penalty: float) -> None:
    penalty = _real("repetition_penalty", penalty)
    if not 0 < penalty < math.inf:
        raise ValueError(f"repetition_penalty must be finite and > 0, got {penalty}")
    if not 0 < _f32(penalty) < math.inf:  # logits are multiplied or divided by f32(penalty)
        raise ValueError(f"repetition_penalty must be finite and > 0 in f32, got {penalty}")


def _f32(value: float) -> float:
    """``value`` rounded to f32 (inf beyond its range, without NumPy's warning)."""
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def _as_row(logits: np.ndarray) -> np.ndarray:
    """Check a row of logits: 1-D, non-empty, f32, no NaN."""
    if not isinstance(logits, np.ndarray):
        raise TypeError(f"logits must be a numpy array, got {type(logits).__name__}")
    if logits.ndim != 1 or logits.size == 0:
        raise ValueError(f"logits must be a non-empty 1-D row, got shape {logits.shape}")
    if logits.dtype != np.float32:
        raise ValueError(f"logits must be float32, got {logits.dtype}")
    if np.isnan(logits).any():
        raise ValueError("logits contain NaN")
    return logits


def warp_temperature(logits: np.ndarray, temperature: float) -> np.ndarray:
    """``logits / f32(T)`` in f32, for ``T > 0`` (as ``TemperatureLogitsWarper``)."""
    x = _as_row(logits)
    _check_temperature(temperature)
    if temperature == 0:
        raise ValueError("temperature 0 is greedy: use greedy(), not a division")
    with np.errstate(over="ignore"):  # an overflow to inf is reported by warp()
        return x / np.float32(temperature)


def warp_top_k(logits: np.ndarray, k: int) -> np.ndarray:
    """Set every value strictly below the k-th largest to -inf (as ``TopKLogitsWarper``).

    ``k == 0`` or ``k >= V`` returns an unchanged copy.
    """
    x = _as_row(logits)
    _check_top_k(k)
    v = x.size
    if k == 0 or k >= v:
        return x.copy()
    kth = np.partition(x, v - k)[v - k]
    return np.where(x < kth, np.float32(-np.inf), x)


def warp_top_p(logits: np.ndarray, p: float) -> np.ndarray:
    """Nucleus filter (as ``TopPLogitsWarper`` with ``min_tokens_to_keep=1``).

    ``p == 1`` returns an unchanged copy, as transformers' generation does
    (it adds no top-p warper at 1.0; the warper itself would only mask
    tokens whose f32 probability is already exactly 0). Entries already -inf
    have probability 0, contribute 0 to every cumulative sum and stay -inf,
    so only the finite ones are sorted.
    """
    x = _as_row(logits)
    _check_top_p(p)
    out = x.copy()
    if p == 1:
        return out
    live = np.flatnonzero(x > -np.inf)
    if live.size == 0:
        return out
    order = live[np.argsort(x[live], kind="stable")]
    ascending = x[order]
    e = np.exp((ascending - ascending[-1]).astype(np.float64)).astype(np.float32)
    probs = e * (np.float32(1) / e.sum(dtype=np.float32))
    cumulative = np.cumsum(probs, dtype=np.float64).astype(np.float32)
    remove = cumulative <= np.float32(1.0 - p)
    remove[-1] = False
    out[order[remove]] = -np.inf
    return out


def warp(logits: np.ndarray, params: SamplingParams) -> np.ndarray:
    """Temperature → top-k → top-p; the masked f32 logits a draw is taken from.

    For temperature 0 only the argmax survives (everything else is -inf), so
    a softmax of the result is the one-hot of :func:`greedy`.
    """
    x = _as_row(logits)
    if params.greedy:
        out = np.full_like(x, -np.inf)
        top = greedy(x)
        out[top] = x[top]
        return out
    if np.isposinf(x).any():
        raise ValueError("logits contain +inf")
    x = warp_temperature(x, params.temperature)
    if np.isposinf(x).any():
        raise ValueError(
            f"temperature {params.temperature} overflows the logits to inf; "
            "use a larger temperature or 0 (greedy)"
        )
    return warp_top_p(warp_top_k(x, params.top_k), params.top_p)


def greedy(logits_row: np.ndarray) -> int:
    """The index of the largest logit (the first one if tied)."""
    return int(np.argmax(_as_row(logits_row)))


def draw(masked: np.ndarray, rng: np.random.Generator) -> int:
    """Inverse-CDF draw from ``softmax(masked)`` (f64) with one uniform from ``rng``.

    Only the entries above -inf are summed: a -inf entry adds exactly 0 to the
    CDF, so it could never be chosen anyway.
    """
    x = _as_row(masked)
    live = np.flatnonzero(x > -np.inf)
    if live.size == 0:
        raise ValueError("every logit is -inf: nothing to sample")
    y = x[live].astype(np.float64)
    cdf = np.cumsum(np.exp(y - y.max()))
    u = rng.random() * cdf[-1]
    index = min(int(np.searchsorted(cdf, u, side="right")), live.size - 1)
    return int(live[index])  # the min() catches u rounding up to the total


def apply_repetition_penalty(
    logits: np.ndarray, previous_ids: Sequence[int] | np.ndarray, penalty: float
) -> np.ndarray:
    """Penalize every token already seen (as ``RepetitionPenaltyLogitsProcessor``).

    A seen token's logit ``s`` becomes ``s * f32(penalty)`` if ``s < 0`` and
    ``s / f32(penalty)`` otherwise, once however often it was seen; ids at or
    past the vocabulary are ignored, as transformers does.
    """
    x = _as_row(logits)
    _check_penalty(penalty)
    ids = np.asarray(previous_ids)
    if ids.size == 0:
        return x.copy()
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"previous_ids must be a 1-D sequence of integers, got {ids.dtype}")
    if (ids < 0).any():
        raise ValueError(f"previous_ids must be >= 0, got {int(ids.min())}")
    seen = np.unique(ids[ids < x.size])
    f = np.float32(penalty)
    out = x.copy()
    s = x[seen]
    out[seen] = np.where(s < 0, s * f, s / f)
    return out


class Sampler:
    """Picks tokens with fixed :class:`SamplingParams` and its own seeded generator."""

    def __init__(self, params: SamplingParams | None = None) -> None:
        self.params = params if params is not None else SamplingParams()
        self.rng = np.random.default_rng(self.params.seed)

    def sample(
        self, logits_row: np.ndarray, previous_ids: Sequence[int] | np.ndarray | None = None
    ) -> int:
        """One token id; ``previous_ids`` turns the repetition penalty on (if not 1.0)."""
        x = _as_row(logits_row)
        if previous_ids is not None and self.params.repetition_penalty != 1.0:
            x = apply_repetition_penalty(x, previous_ids, self.params.repetition_penalty)
        if self.params.greedy:
            return greedy(x)
        return draw(warp(x, self.params), self.rng)


def from_generation_config(
    path: str | Path, *, seed: int | None = None, with_repetition_penalty: bool = False
) -> SamplingParams:
    """Sampling parameters from a snapshot's ``generation_config.json``.

    ``path`` is the file or the snapshot directory. Absent keys take
    transformers' defaults (``top_k`` 50, ``top_p`` 1.0, ``temperature``
    1.0, ``do_sample`` false); ``do_sample: false`` means greedy
    (temperature 0). The file's ``repetition_penalty`` is carried over only
    with ``with_repetition_penalty=True`` (spec §1.4: not applied unless
    asked for); otherwise the result's penalty is 1.0.
    """
    file = Path(path)
    if file.is_dir():
        file = file / "generation_config.json"
    if not os.path.lexists(file):
        raise GenerationConfigError(f"{file}: no such file")
    try:
        raw = read_json(file)  # a regular file only: a FIFO would block forever
    except JSONFileError as exc:
        raise GenerationConfigError(f"{file}: not readable JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise GenerationConfigError(f"{file}: expected a JSON object")
    value: dict[str, Any] = {key: raw.get(key) for key in _HF_DEFAULTS}  # SamplingParams checks
    value = {key: _HF_DEFAULTS[key] if v is None else v for key, v in value.items()}
    if not isinstance(value["do_sample"], bool):
        raise GenerationConfigError(f"{file}: do_sample must be true or false")
    penalty = value["repetition_penalty"] if with_repetition_penalty else 1.0
    try:
        return SamplingParams(
            temperature=value["temperature"] if value["do_sample"] else 0.0,
            top_k=value["top_k"],
            top_p=value["top_p"],
            seed=seed,
            repetition_penalty=penalty,
        )
    except ValueError as exc:
        raise GenerationConfigError(f"{file}: {exc}") from None

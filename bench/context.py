"""``python -m bench context``: prefill and decode at long context, side by side.

Issue 19, "Must show" item 4: nanocompile's compiled model (through the public
API, ``nanocompile.load``), llama.cpp on the F32 GGUF and the hand-written
NumPy engine, at 1 and 2 threads, after prompts of 128, 1,024 and 4,096 tokens.

Protocol (spec §6, as ``bench run``):

* Every engine is built in this one process from the same snapshot bytes:
  ``nanocompile-<format>`` is ``nanocompile.load(DIR, weights=<format>)``
  (default: the snapshot's format, bf16 for the synthetic model; ``--weights``
  takes every format ``load`` does, comma-separated, one engine each) driven
  through ``Model.engine`` (its ``PREFILL_CHUNK``-token prefill steps, its pool set per slot
  with ``set_threads``); ``llama-f32`` is llama.cpp on the F32 GGUF of
  :mod:`bench.llama_engine`, its ``n_ctx`` set to the longest prompt plus the
  decode steps (its prompt batches are 512 tokens, ``n_batch``); ``numpy`` is
  :mod:`bench.numpy_engine` with a KV cache of the same capacity, its prompt
  fed in cached steps of 512 tokens (llama.cpp's batch; one 4,096-token
  step would hold a ``[2, 7 x 4096, 4096]`` f32 score tensor, 0.9 GB).
* A **warm-up** (untimed): every engine prefills the shortest prompt and
  decodes a few steps, at the smallest thread count.
* A **slot** is an (engine, thread count) pair. Round r runs, for each prompt
  length in turn, every slot once, the slot list rotated by r plus the length's
  index, so at every length a different engine goes first. One slot's run at
  length L: a fresh cache (capacity L + N + 1), the prompt's prefill to the
  first token, then N (``--decode-steps``, default 16) greedy decode steps.
* **prefill ms/token** = time to the first token / L; **decode ms/token** =
  (time from the first token to the last) / N, spec §6's "decode time /
  (generated - 1)" (:func:`bench.run.timed_generation`, the same clock as
  ``bench run``).
* Prompts: ``bench.engines.prompt_ids`` (seeded random ids, no tokenizer); the
  prompt of length L is the first L ids of the longest, for every engine.
* Threads: ``bench.run.Threads`` (BLAS pools through threadpoolctl,
  ``NANOCOMPILE_THREADS``, which nanocompile's pool and llama.cpp follow).
* An engine that is not installed or fails to build is skipped with one line;
  one that fails while running at length L is reported once and runs only the
  shorter lengths after that (what it measured completely is kept).
* Per engine, threads and metric: median, minimum and spread over the rounds
  (``bench.stats``), the control check against the engine's own earlier
  ``context`` records (same machine, model, metric, threads), and the greedy
  tokens' agreement with the NumPy engine at the same length.
* One record (kind ``"context"``) per engine x threads is appended to the
  results file (machine, CPU, versions, git and the BLAS threads recorded by
  ``bench.results``); the plot (``--out``) draws ms/token against the prompt
  length, prefill and decode, one line per engine and thread count.

Gates of issue 19 item 4 (:func:`evaluate_gates`), per nanocompile engine and
thread count, on the medians of the run:

* prefill ms/token within 1.2x of ``llama-f32`` at 1,024 and at 4,096 tokens:
  median(nanocompile) <= 1.2 x median(llama-f32), the same run and threads
  (beside it, the exact one-sided sign test over the paired rounds of
  ``nanocompile < 1.2 x llama``, for information);
* decode after 4,096 tokens <= 1.15x decode after 128: the ratio of the two
  medians. ``llama-f32``'s own ratio, measured the same way, is printed
  beside it (a reference, not a gate).

A gate whose engines or lengths are not in the run is reported as not judged,
with the reason.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench import BenchError, command, results, stats

KIND = "context"  # the records' kind
NANOCOMPILE = "nanocompile"
LLAMA_F32 = "llama-f32"
NUMPY = "numpy"
ENGINE_KINDS = (NANOCOMPILE, LLAMA_F32, NUMPY)
DEFAULT_CONTEXTS = (128, 1024, 4096)
DEFAULT_THREADS = (1, 2)
DEFAULT_ROUNDS = 3
DEFAULT_DECODE_STEPS = 16
WARMUP_DECODE_STEPS = 2
PREFILL_CHUNK = 512  # the NumPy engine's prompt step: llama.cpp's n_batch
MAX_CONTEXT = 32_768
ALPHA = 0.05
GATE_PREFILL_CONTEXTS = (1024, 4096)
GATE_PREFILL_FACTOR = 1.2  # nanocompile's prefill median <= this x llama-f32's
GATE_DECODE_SHORT = 128
GATE_DECODE_LONG = 4096
GATE_DECODE_FACTOR = 1.15  # decode median after LONG <= this x the one after SHORT
DEFAULT_OUT = results.REPO_ROOT / "docs" / "bench_context.png"
PREFILL = "prefill"
DECODE = "decode"


def metric_name(phase: str, context: int) -> str:
    """``prefill_ms_per_token@1024`` or ``decode_ms_per_token@1024`` (decode after
    a prompt of that length)."""
    return f"{phase}_ms_per_token@{context}"


def is_ours(engine: str) -> bool:
    """Whether ``engine`` is one of nanocompile's (``nanocompile-<format>``)."""
    return engine.startswith(NANOCOMPILE + "-")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# settings


@dataclass(frozen=True)
class Settings:
    """A validated ``bench context`` command line."""

    engines: tuple[str, ...]  # of ENGINE_KINDS
    weights: tuple[str | None, ...]  # nanocompile's formats; None: the snapshot's
    threads: tuple[int, ...]
    contexts: tuple[int, ...]  # sorted
    rounds: int
    decode_steps: int
    model: Path | None
    results_path: Path
    record: bool
    plot_path: Path | None

    @property
    def capacity(self) -> int:
        """Positions every engine's cache needs: the longest prompt, its first token
        and the decode steps (``timed_generation`` sizes it so)."""
        return self.contexts[-1] + self.decode_steps + 1

    @property
    def metrics(self) -> list[str]:
        """Every metric a slot measures, prefill and decode per length."""
        return [metric_name(phase, c) for c in self.contexts for phase in (PREFILL, DECODE)]

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for records."""
        return {
            "engines": list(self.engines),
            "weights": [w or "snapshot default" for w in self.weights],
            "threads": list(self.threads),
            "contexts": list(self.contexts),
            "rounds": self.rounds,
            "warmup": {"context": self.contexts[0], "decode_steps": WARMUP_DECODE_STEPS},
            "decode_steps": self.decode_steps,
            "capacity": self.capacity,
            "numpy_prefill_chunk": PREFILL_CHUNK,
        }


def _int_list(text: str, flag: str, low: int, high: int) -> tuple[int, ...]:
    try:
        values = [int(t.replace("_", "")) for t in text.split(",") if t.strip()]
    except ValueError:
        raise BenchError(f"{flag} wants comma-separated integers, got {text!r}") from None
    if not values or any(not low <= v <= high for v in values):
        raise BenchError(f"{flag} wants integers in {low}..{high}, got {text!r}")
    return tuple(sorted(set(values)))


def _names(text: str, flag: str, choices: Sequence[str]) -> tuple[str, ...]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in choices]
    if unknown or not names:
        raise BenchError(f"{flag}: unknown {', '.join(unknown) or '(none given)'}; choose from "
                         f"{','.join(choices)}")
    return tuple(dict.fromkeys(names))


def settings_from(args: argparse.Namespace) -> Settings:
    """Validate the arguments of ``bench context`` (a bad one: ``BenchError``)."""
    from nanocompile.api import FORMATS

    engines = _names(args.engines, "--engines", ENGINE_KINDS)
    weights: tuple[str | None, ...] = (None,)
    if args.weights is not None:
        if NANOCOMPILE not in engines:
            raise BenchError(f"--weights chooses the {NANOCOMPILE} engine's formats, but "
                             "--engines leaves it out")
        weights = _names(args.weights, "--weights", FORMATS)
    if not 1 <= args.rounds <= 1000:
        raise BenchError(f"--rounds must be in 1..1000, got {args.rounds}")
    if not 1 <= args.decode_steps <= 4096:
        raise BenchError(f"--decode-steps must be in 1..4096, got {args.decode_steps}")
    contexts = _int_list(args.contexts, "--contexts", 1, MAX_CONTEXT)
    model = Path(args.model) if args.model is not None else None
    if model is not None and not model.is_dir():
        raise BenchError(f"--model {model}: not a directory")
    return Settings(
        engines=engines,
        weights=weights,
        threads=_int_list(args.threads, "--threads", 1, 256),
        contexts=contexts,
        rounds=args.rounds,
        decode_steps=args.decode_steps,
        model=model,
        results_path=Path(args.results),
        record=not args.no_record,
        plot_path=None if args.no_plot else Path(args.out),
    )


# --------------------------------------------------------------------------
# the engines


class ApiModel:
    """nanocompile through the public API: ``nanocompile.load`` and ``Model.engine``
    (the bench's ``Model`` protocol: ``new_state``, ``next_token``)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.engine = model.engine

    def _program(self) -> Any:
        return getattr(getattr(self.engine, "backend", None), "program", None)

    def details(self) -> dict[str, Any]:
        """Facts for the record: the model, its weight format, the engine's chunk."""
        from bench.engines import host_arch_name

        program = self._program()
        return {"api": repr(self.model), "weights": self.model.weights,
                "graph_weights": getattr(self.model, "graph_weights", None),
                "prefill_chunk": getattr(self.engine, "chunk", None),
                "arch": host_arch_name(),
                "library": str(program.library.path) if program is not None
                and hasattr(program, "library") else None}

    def new_state(self, capacity: int) -> Any:
        """A fresh KV cache; the pool first set to ``NANOCOMPILE_THREADS`` (the slot's)."""
        program = self._program()
        wanted = os.environ.get("NANOCOMPILE_THREADS", "")
        if (program is not None and hasattr(program, "set_threads") and wanted.isdigit()
                and int(wanted) != program.threads()):
            program.set_threads(int(wanted))
        return self.engine.new_cache(capacity)

    def next_token(self, ids: Sequence[int], state: Any) -> int:
        """Run ``ids`` after the cache's tokens; the argmax of the last position."""
        return int(np.argmax(self.engine.forward(ids, state)[-1]))


class ChunkedNumpy:
    """The NumPy engine with its prompt fed in cached steps of ``chunk`` tokens."""

    def __init__(self, engine: Any, chunk: int = PREFILL_CHUNK) -> None:
        self.engine = engine
        self.chunk = chunk

    def details(self) -> dict[str, Any]:
        """Facts for the record."""
        return {"prefill_chunk": self.chunk, "weight_bytes": self.engine.weight_bytes}

    def new_state(self, capacity: int) -> Any:
        """A preallocated KV cache of ``capacity`` positions."""
        return self.engine.new_cache(capacity)

    def next_token(self, ids: Sequence[int], state: Any) -> int:
        """Run ``ids`` (``chunk`` at a time) after the cache's tokens; the last argmax."""
        logits = None
        for start in range(0, len(ids), self.chunk):
            logits = self.engine.forward(ids[start:start + self.chunk], state)
        if logits is None:
            raise ValueError("no token ids to run")
        return int(np.argmax(logits[-1]))


@dataclass
class Built:
    """An engine ready to time."""

    name: str
    model: Any
    description: str
    build_seconds: float

    @property
    def details(self) -> dict[str, Any]:
        """The engine's own facts for the record."""
        details = getattr(self.model, "details", None)
        return details() if details is not None else {}


def _load_progress() -> Callable[[str, int, int], None]:
    started: set[str] = set()

    def progress(what: str, done: int, total: int) -> None:
        if what not in started:
            started.add(what)
            _log(f"    {what}...")

    return progress


def _build_nanocompile(directory: Path, weights: str | None) -> tuple[str, Any, str]:
    from nanocompile.api import load

    model = load(directory, weights=weights, progress=_load_progress())
    return (f"{NANOCOMPILE}-{model.weights}", ApiModel(model),
            f"nanocompile.load(weights={model.weights!r}): compiled C, default schedules, "
            "the pool, Model.engine")


def _build_llama(directory: Path, capacity: int) -> tuple[str, Any, str]:
    from bench.llama_engine import LlamaCppModel, gguf_file, require_llama_cpp

    require_llama_cpp()
    model = LlamaCppModel(gguf_file(directory, "f32", log=_log), f32_cache=True, n_ctx=capacity)
    return LLAMA_F32, model, (f"llama.cpp (llama-cpp-python) F32 GGUF, f32 KV cache, "
                              f"n_ctx {model.n_ctx}, n_batch {model.n_batch}")


def _build_numpy(directory: Path) -> tuple[str, Any, str]:
    from bench.numpy_engine import NumpyQwen2
    from nanocompile.checkpoint.snapshot import Snapshot

    engine = NumpyQwen2.from_snapshot(Snapshot.open(directory))
    return NUMPY, ChunkedNumpy(engine), (f"hand-written NumPy f32 engine, prompt in cached "
                                         f"steps of {PREFILL_CHUNK}")


def _nanocompile_job(directory: Path, weights: str | None
                     ) -> Callable[[], tuple[str, Any, str]]:
    return lambda: _build_nanocompile(directory, weights)


def build_engines(settings: Settings, directory: Path) -> list[Built]:
    """Build every requested engine; one that is unavailable or fails is skipped
    with one line (on stderr)."""
    from bench.engines import EngineUnavailable

    jobs: list[tuple[str, Callable[[], tuple[str, Any, str]]]] = []
    for kind in settings.engines:
        if kind == NANOCOMPILE:
            jobs += [(f"{NANOCOMPILE}-{w or 'default'}", _nanocompile_job(directory, w))
                     for w in settings.weights]
        elif kind == LLAMA_F32:
            jobs.append((kind, lambda: _build_llama(directory, settings.capacity)))
        else:
            jobs.append((kind, lambda: _build_numpy(directory)))
    built: list[Built] = []
    for label, job in jobs:
        _log(f"  building {label}")
        start = time.perf_counter()
        try:
            name, model, description = job()
        except EngineUnavailable as exc:
            _log(f"  skipping {label}: {exc}")
            continue
        except Exception as exc:  # a peer that cannot be built must not stop the others
            _log(f"  skipping {label}: building it failed: {type(exc).__name__}: {exc}")
            continue
        if any(b.name == name for b in built):
            _log(f"  skipping {label}: {name} is built already")
            continue
        seconds = time.perf_counter() - start
        built.append(Built(name, model, description, seconds))
        _log(f"  {name} ready in {seconds:.1f} s ({description})")
    return built


# --------------------------------------------------------------------------
# measuring


@dataclass
class Slot:
    """One engine at one thread count: per metric its per-round values; per prompt
    length the greedy tokens of the first round."""

    engine: str
    threads: int
    values: dict[str, list[float]] = field(default_factory=dict)
    tokens: dict[int, list[int]] = field(default_factory=dict)

    def add(self, metric: str, ms_per_token: float) -> None:
        """Append one round's value."""
        self.values.setdefault(metric, []).append(ms_per_token)


def _rotated(items: list[Any], by: int) -> list[Any]:
    k = by % len(items)
    return items[k:] + items[:k]


def run_once(model: Any, prompt: Sequence[int], decode_steps: int) -> tuple[float, float,
                                                                             list[int]]:
    """One timed run: (prefill ms/token, decode ms/token, the greedy tokens)."""
    from bench.run import timed_generation

    gen = timed_generation(model, list(prompt), decode_steps + 1)
    return 1e3 * gen.ttft / len(prompt), 1e3 * gen.decode / decode_steps, gen.tokens


def measure(built: list[Built], settings: Settings, threads: Any,
            prompt: Sequence[int]) -> dict[tuple[str, int], Slot]:
    """The warm-up, then ``settings.rounds`` rounds of every length and slot."""
    by_name = {b.name: b for b in built}
    slots = [Slot(b.name, t) for t in settings.threads for b in built]
    failed_at: dict[str, int] = {}  # engine -> the shortest length it failed at
    short = settings.contexts[0]
    _log(f"warm-up (untimed, {short} tokens, {min(settings.threads)} thread(s))")
    with threads.limit(min(settings.threads)):
        for b in built:
            _guarded(b.name, short, failed_at,
                     lambda b=b: run_once(b.model, prompt[:short], WARMUP_DECODE_STEPS))
    for r in range(settings.rounds):
        start = time.perf_counter()
        for i, length in enumerate(settings.contexts):
            for slot in _rotated(slots, r + i):
                if length >= failed_at.get(slot.engine, MAX_CONTEXT + 1):
                    continue
                with threads.limit(slot.threads):
                    _timed_run(by_name[slot.engine].model, slot, prompt[:length], settings,
                               failed_at, f"round {r + 1}/{settings.rounds}")
        _log(f"round {r + 1}/{settings.rounds} done in {time.perf_counter() - start:.1f} s "
             f"(load {os.getloadavg()[0]:.2f})")
    return {(s.engine, s.threads): s for s in slots}


def _timed_run(model: Any, slot: Slot, prompt: Sequence[int], settings: Settings,
               failed_at: dict[str, int], where: str) -> None:
    length = len(prompt)
    start = time.perf_counter()
    out = _guarded(slot.engine, length, failed_at,
                   lambda: run_once(model, prompt, settings.decode_steps))
    if out is None:
        return
    prefill, decode, tokens = out
    slot.add(metric_name(PREFILL, length), prefill)
    slot.add(metric_name(DECODE, length), decode)
    slot.tokens.setdefault(length, tokens)
    _log(f"  {where} @{length}: {slot.engine} {slot.threads} thr: prefill {prefill:.2f}, "
         f"decode {decode:.2f} ms/token ({time.perf_counter() - start:.1f} s)")


def _guarded(name: str, length: int, failed_at: dict[str, int], action: Any) -> Any:
    """``action()``; an engine that raises is reported and runs only shorter prompts
    from then on (None returned)."""
    try:
        return action()
    except Exception as exc:
        _log(f"  {name} failed at {length} tokens: {type(exc).__name__}: {exc}; it runs "
             f"only shorter prompts from now on")
        failed_at[name] = min(length, failed_at.get(name, length))
        return None


# --------------------------------------------------------------------------
# statistics


def leading_equal(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                min(len(a), len(b)))


def summarize(slots: dict[tuple[str, int], Slot], settings: Settings,
              history: list[dict[str, Any]], model_id: str,
              machine_id: str) -> list[dict[str, Any]]:
    """One measurement per engine x threads x metric that has every round's value
    (stats, control, the tokens' agreement with the NumPy engine)."""
    reference = {(t, c): s.tokens.get(c) for (e, t), s in slots.items() if e == NUMPY
                 for c in settings.contexts}
    out = []
    for (engine, threads), slot in slots.items():
        for metric in settings.metrics:
            values = slot.values.get(metric, [])
            if len(values) != settings.rounds:
                continue
            phase, context = metric.split("_ms_per_token@")
            length = int(context)
            summary = stats.summarize(values)
            past = results.history_medians(history, engine=engine, metric=metric,
                                           threads=threads, machine_id=machine_id)
            m: dict[str, Any] = {
                "engine": engine, "metric": metric, "phase": phase, "threads": threads,
                "context_tokens": length, "decode_steps": settings.decode_steps,
                "unit": "ms/token", "median": summary["median"], "min": summary["minimum"],
                "n": len(values), "spread": summary, "values": values,
                "control": stats.control_check(summary["median"], past).as_dict(),
                "model_id": model_id,
            }
            ref, tokens = reference.get((threads, length)), slot.tokens.get(length)
            if ref is not None and tokens is not None and engine != NUMPY:
                m["tokens_vs_numpy"] = {"leading_equal": leading_equal(tokens, ref),
                                        "of": min(len(tokens), len(ref))}
            out.append(m)
    return out


# --------------------------------------------------------------------------
# issue 19's gates


def _not_judged(reason: str) -> dict[str, Any]:
    return {"met": None, "reason": reason}


def _prefill_gate(index: dict[tuple[str, int, str], dict[str, Any]], engine: str,
                  threads: int, context: int) -> dict[str, Any]:
    metric = metric_name(PREFILL, context)
    ours, llama = index.get((engine, threads, metric)), index.get((LLAMA_F32, threads, metric))
    if ours is None or llama is None:
        missing = [e for e, m in ((engine, ours), (LLAMA_F32, llama)) if m is None]
        return _not_judged(f"no {metric} of {' and '.join(missing)} at {threads} thr")
    if llama["min"] <= 0:
        return _not_judged(f"{LLAMA_F32}'s {metric} at {threads} thr reads 0 ms")
    ratio = ours["median"] / llama["median"]
    # per round: a win when ours < factor x llama's (for information)
    test = stats.sign_test(ours["values"], [GATE_PREFILL_FACTOR * v for v in llama["values"]])
    return {"met": ratio <= GATE_PREFILL_FACTOR, "factor": GATE_PREFILL_FACTOR,
            "median": ours["median"], "llama_median": llama["median"], "ratio": ratio,
            "min_ratio": ours["min"] / llama["min"], "sign_test_within_factor": test.as_dict()}


def decode_growth(index: dict[tuple[str, int, str], dict[str, Any]], engine: str,
                  threads: int) -> dict[str, Any]:
    """Decode after GATE_DECODE_LONG tokens over decode after GATE_DECODE_SHORT
    (medians; ``met`` against GATE_DECODE_FACTOR)."""
    short = index.get((engine, threads, metric_name(DECODE, GATE_DECODE_SHORT)))
    long = index.get((engine, threads, metric_name(DECODE, GATE_DECODE_LONG)))
    if short is None or long is None:
        missing = [c for c, m in ((GATE_DECODE_SHORT, short), (GATE_DECODE_LONG, long))
                   if m is None]
        return _not_judged(f"no decode of {engine} after {' and '.join(map(str, missing))} "
                           f"tokens at {threads} thr")
    if short["median"] <= 0:
        return _not_judged(f"{engine}'s decode after {GATE_DECODE_SHORT} tokens at {threads} "
                           "thr reads 0 ms")
    ratio = long["median"] / short["median"]
    return {"met": ratio <= GATE_DECODE_FACTOR, "factor": GATE_DECODE_FACTOR,
            "short_median": short["median"], "long_median": long["median"], "ratio": ratio}


def evaluate_gates(measurements: list[dict[str, Any]],
                   threads: Sequence[int]) -> dict[str, Any]:
    """Issue 19's item-4 gates over one run's measurements (see the module doc).

    Per nanocompile engine and thread count: ``prefill_vs_llama_f32`` (per gate
    length) and ``decode_growth``; ``llama_decode_growth`` per thread count, the
    reference. Each has ``met``: True, False, or None when it could not be
    judged (with a ``reason``).
    """
    index = {(m["engine"], m["threads"], m["metric"]): m for m in measurements}
    ours = sorted({m["engine"] for m in measurements if is_ours(m["engine"])})
    return {
        "prefill_factor": GATE_PREFILL_FACTOR, "decode_factor": GATE_DECODE_FACTOR,
        "engines": {e: {
            "prefill_vs_llama_f32": {str(t): {str(c): _prefill_gate(index, e, t, c)
                                              for c in GATE_PREFILL_CONTEXTS}
                                     for t in threads},
            "decode_growth": {str(t): decode_growth(index, e, t) for t in threads},
        } for e in ours},
        "llama_decode_growth": {str(t): decode_growth(index, LLAMA_F32, t) for t in threads},
    }


def _met(g: dict[str, Any]) -> str:
    return "not judged: " + g["reason"] if g["met"] is None else "MET" if g["met"] else "MISSED"


def format_gates(gates: dict[str, Any]) -> str:
    """The gates, one line each, then the tally and the misses."""
    pf, df = gates["prefill_factor"], gates["decode_factor"]
    lines = ["issue 19 gates (must-show 4; medians of the run's rounds):"]
    if not gates["engines"]:
        lines.append("  not judged: no nanocompile engine measured")
    missed, judged, met = [], 0, 0

    def tally(title: str, g: dict[str, Any], detail: Callable[[dict[str, Any]], str]) -> None:
        nonlocal judged, met
        line = f"  {title}: {_met(g)}"
        if g["met"] is not None:
            judged += 1
            met += bool(g["met"])
            line += f" ({detail(g)})"
            if not g["met"]:
                missed.append(title)
        lines.append(line)

    for engine, per in gates["engines"].items():
        for t, by_context in per["prefill_vs_llama_f32"].items():
            for c, g in by_context.items():
                tally(f"{engine} prefill @{c} within {pf:g}x of {LLAMA_F32}, {t} thr", g,
                      lambda g: (f"{g['median']:.2f} vs {g['llama_median']:.2f} ms/token: "
                                 f"{g['ratio']:.2f}x; minima {g['min_ratio']:.2f}x; within "
                                 f"{pf:g}x in {g['sign_test_within_factor']['wins']}/"
                                 f"{g['sign_test_within_factor']['n']} rounds"))
        for t, g in per["decode_growth"].items():
            tally(f"{engine} decode @{GATE_DECODE_LONG} <= {df:g}x decode @{GATE_DECODE_SHORT}, "
                  f"{t} thr", g, _growth_detail)
    for t, g in gates["llama_decode_growth"].items():
        text = _growth_detail(g) if g["met"] is not None else "not measured: " + g["reason"]
        lines.append(f"  reference: {LLAMA_F32} decode @{GATE_DECODE_LONG} / decode "
                     f"@{GATE_DECODE_SHORT}, {t} thr: {text}")
    lines.append(f"  issue 19: {met} of {judged} judged gates met"
                 + (f"; missed: {'; '.join(missed)}" if missed else ""))
    return "\n".join(lines)


def _growth_detail(g: dict[str, Any]) -> str:
    return (f"{g['long_median']:.2f} vs {g['short_median']:.2f} ms/token: {g['ratio']:.3f}x")


# --------------------------------------------------------------------------
# printing, records, the plot


def _ms(x: float) -> str:
    return f"{x:8.2f}"


def format_table(measurements: list[dict[str, Any]], settings: Settings) -> str:
    """Per prompt length, engine and threads: prefill and decode median, minimum and
    relative IQR, and the greedy tokens' agreement with the NumPy engine."""
    index = {(m["engine"], m["threads"], m["metric"]): m for m in measurements}
    keys = sorted({(m["engine"], m["threads"]) for m in measurements})
    width = max([len(e) for e, _ in keys] + [6])
    lines = [f"ms/token: median  minimum  relative IQR; {settings.rounds} round(s), "
             f"decode = {settings.decode_steps} steps after the prompt",
             f"{'tokens':>6} {'engine':{width}} {'thr':>3} | {'prefill':>25} | "
             f"{'decode':>25} | {'tokens = numpy':>14}"]
    for c in settings.contexts:
        for engine, t in keys:
            cells = []
            for phase in (PREFILL, DECODE):
                m = index.get((engine, t, metric_name(phase, c)))
                cells.append(f"{_ms(m['median'])} {_ms(m['min'])} "
                             f"{100 * m['spread']['rel_iqr']:6.1f}%" if m else f"{'-':>25}")
            m = index.get((engine, t, metric_name(PREFILL, c)))
            agree = m.get("tokens_vs_numpy") if m else None
            agree_text = f"{agree['leading_equal']}/{agree['of']}" if agree else "-"
            flag = " CONTROL" if any(index[k]["control"]["flagged"] for k in
                                     ((engine, t, metric_name(p, c)) for p in (PREFILL, DECODE))
                                     if k in index) else ""
            lines.append(f"{c:>6} {engine:{width}} {t:>3} | {cells[0]} | {cells[1]} | "
                         f"{agree_text:>14}{flag}")
    return "\n".join(lines)


def make_records(measurements: list[dict[str, Any]], built: list[Built],
                 context: dict[str, Any], threads: Any) -> list[dict[str, Any]]:
    """One ``context`` record per engine x threads (its measurements of every length)."""
    by_name = {b.name: b for b in built}
    records = []
    for engine, t in sorted({(m["engine"], m["threads"]) for m in measurements}):
        b = by_name[engine]
        payload = context | {
            "engine": {"name": engine, "description": b.description,
                       "build_seconds": b.build_seconds, **b.details},
            "measurements": [m for m in measurements
                             if m["engine"] == engine and m["threads"] == t],
        }
        with threads.limit(t):  # so the record's BLAS pools show this count
            records.append(results.make_record(KIND, payload, threads=t))
    return records


def draw(measurements: list[dict[str, Any]], title: str, out: Path) -> None:
    """ms/token against the prompt length (log-log), prefill and decode side by side,
    one line per engine and thread count: medians, whiskers min..max."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullLocator

    keys = sorted({(m["engine"], m["threads"]) for m in measurements})
    engines = sorted({e for e, _ in keys})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    threads = sorted({t for _, t in keys})
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
    for ax, phase in zip(axes, (PREFILL, DECODE), strict=True):
        for engine, t in keys:
            ms = sorted((m for m in measurements if m["engine"] == engine
                         and m["threads"] == t and m["phase"] == phase),
                        key=lambda m: m["context_tokens"])
            if not ms:
                continue
            xs = [m["context_tokens"] for m in ms]
            med = [m["median"] for m in ms]
            err = [[m["median"] - m["min"] for m in ms],
                   [m["spread"]["maximum"] - m["median"] for m in ms]]
            ax.errorbar(xs, med, yerr=err, capsize=3, marker="o",
                        color=colors[engines.index(engine) % len(colors)],
                        linestyle=styles[threads.index(t) % len(styles)],
                        label=f"{engine}, {t} thr")
        ax.set_xscale("log", base=2)
        ticks = sorted({m["context_tokens"] for m in measurements})
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.set_xlabel("prompt tokens (context)")
        ax.set_ylabel("ms / token (median; whiskers min..max)")
        ax.set_title("prefill of the prompt" if phase == PREFILL
                     else "decode right after the prompt")
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------
# the command


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engines", default=",".join(ENGINE_KINDS),
                        help="comma-separated engines of %(default)s (default: all)")
    parser.add_argument("--weights", default=None,
                        help="comma-separated weight formats of the nanocompile engine, one "
                        "engine each (bf16, f32, int8, int8-dot; default: the snapshot's)")
    parser.add_argument("--threads", default=",".join(map(str, DEFAULT_THREADS)),
                        help="comma-separated thread counts (default: %(default)s)")
    parser.add_argument("--contexts", default=",".join(map(str, DEFAULT_CONTEXTS)),
                        help="comma-separated prompt lengths (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help="timed rounds after the warm-up (default: %(default)s)")
    parser.add_argument("--decode-steps", type=int, default=DEFAULT_DECODE_STEPS,
                        help="greedy decode steps after each prompt (default: %(default)s)")
    parser.add_argument("--model", default=None,
                        help="snapshot directory (default: the full-size synthetic model)")
    parser.add_argument("--results", default=str(results.RESULTS_PATH),
                        help="results file to append to (default: %(default)s)")
    parser.add_argument("--no-record", "--no-append", dest="no_record", action="store_true",
                        help="print only, append nothing")
    parser.add_argument("--out", default=str(DEFAULT_OUT),
                        help="the plot's PNG (default: %(default)s)")
    parser.add_argument("--no-plot", action="store_true", help="write no plot")


def _resolve_model(settings: Settings) -> tuple[Path, str]:
    if settings.model is not None:
        return settings.model, f"snapshot {settings.model.name}"
    from bench.engines import full_synthetic_snapshot

    return full_synthetic_snapshot(log=_log), "synthetic full-size seed 0"


@command("context", help="prefill and decode ms/token at long context (issue 19 item 4)",
         arguments=_arguments)
def context_command(args: argparse.Namespace) -> int:
    """Build the engines, measure every length, print the table and the gates,
    append the records, draw the plot."""
    from bench.engines import model_facts, prompt_ids
    from bench.run import Threads
    from nanocompile.checkpoint.snapshot import Snapshot

    settings = settings_from(args)
    threads = Threads(strict=False)
    load_start = list(os.getloadavg())
    directory, label = _resolve_model(settings)
    snapshot = Snapshot.open(directory)
    limit = snapshot.config.max_position_embeddings
    if settings.capacity > limit:
        raise BenchError(f"the longest prompt plus the decode steps ({settings.capacity} "
                         f"positions) exceed the model's context of {limit}")
    model = model_facts(snapshot, label)
    print(f"model: {label} ({directory}); {model['parameters']:,} parameters; "
          f"load {load_start[0]:.2f}", flush=True)
    built = build_engines(settings, directory)
    if not built:
        raise BenchError("no engine could be built")
    prompt = prompt_ids(snapshot.config, settings.contexts[-1])
    slots = measure(built, settings, threads, prompt)
    facts = results.machine_facts()
    history = [r for r in results.load_records(settings.results_path, kind=KIND)
               if r.get("payload", {}).get("model", {}).get("id") == model["id"]]
    measurements = summarize(slots, settings, history, model["id"], facts["id"])
    if not measurements:
        raise BenchError("no engine measured any prompt length completely")
    gates = evaluate_gates(measurements, settings.threads)
    load_end = list(os.getloadavg())
    print()
    print(format_table(measurements, settings))
    print(f"\nload average: {load_start[0]:.2f} at start, {load_end[0]:.2f} at end "
          f"({os.cpu_count()} CPUs); BLAS threads "
          f"{'set by threadpoolctl' if threads.controlled else 'NOT controlled'}")
    print(format_gates(gates))
    if settings.record:
        context = {"run_id": uuid.uuid4().hex[:12], "model": model,
                   "settings": settings.as_dict(), "loadavg_start": load_start,
                   "loadavg_end": load_end, "blas_threads_controlled": threads.controlled,
                   "goals_issue19": gates}
        records = make_records(measurements, built, context, threads)
        for record in records:
            results.append_record(record, settings.results_path)
        print(f"appended {len(records)} records to {settings.results_path}")
    if settings.plot_path is not None:
        _plot(measurements, settings, label, facts)
    return 0


def _plot(measurements: list[dict[str, Any]], settings: Settings, label: str,
          facts: dict[str, Any]) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("no plot: matplotlib is not installed (pip install -e '.[bench]')")
        return
    commit = str(results.git_info().get("commit"))[:8]
    title = (f"nanocompile bench context: {label}, {facts['cpu_model']}, "
             f"{time.strftime('%Y-%m-%d', time.gmtime())}, git {commit}; "
             f"{settings.rounds} round(s), decode {settings.decode_steps} steps")
    assert settings.plot_path is not None
    draw(measurements, title, settings.plot_path)
    print(f"wrote {settings.plot_path}")

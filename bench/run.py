"""``python -m bench run``: decode and prefill ms/token of every engine, side by side.

Protocol (spec §6, issue 7):

* All engines are built in this one process from the same snapshot bytes, then
  a **warm-up** round (untimed) runs every engine once: a short generation
  (4 tokens) after the short prompt and one prefill at every other prompt
  length, at the smallest thread count (on a busy 2-core machine spin-waiting
  2-thread pools only make the untimed warm-up slower).
* A **slot** is an (engine, thread count) pair. Round r runs every slot once,
  the slot list rotated by r, so no engine always runs first or after the
  same neighbour. Each slot's run: a greedy generation of ``--decode-tokens``
  tokens after a prompt of the smallest ``--prompt-tokens`` length, then an
  uncached prefill (time to first token) at each longer prompt length.
* **decode ms/token** = (time from the first to the last generated token) /
  (generated − 1). **prefill ms/token** = time to first token / prompt
  tokens; the short prompt's comes from the generation itself.
* Threads: BLAS pools through threadpoolctl, ``torch.set_num_threads`` (also
  torch-compile's generated kernels, which read OpenMP's count at run time) and
  ``NANOCOMPILE_THREADS`` (phase 2 and 3 C is single-threaded; phase 4's pool
  follows it per slot through ``CompiledProgram.set_threads``;
  llama.cpp re-reads it before every step and applies it with
  ``llama_set_n_threads``).
* Engines whose packages are missing, or that cannot be built here (e.g.
  torch-compile over ``--compile-budget``), are skipped with one line each.
* Per slot and metric: median, minimum and spread (``bench.stats``); an exact
  one-sided sign test over the paired rounds against the scheduled C engine
  (``c-phase4``) at the same thread count; the control check against the
  engine's own recorded medians (same machine, model, metric, threads).
* One record per engine × threads × metric is appended to the results file.

Work beside the times: bytes per decode step and launches per step from the
loop IR (at past = the short prompt's length), achieved GB/s (those bytes /
decode time) and prefill GFLOP/s (matmul FLOPs, see ``bench.engines``).

Goals of issue 16, "Must show" item 4 (:func:`evaluate_goals`), printed after
the tables and stored in every record of the run (``goals_issue16``); all are
about ``c-phase4``, judged per machine kind (``results.machine_kind``):

* prefill at 128 tokens against ``llama-f32`` at the same threads, same run:
  on an AVX-512 machine >= 1.5x faster, shown by the one-sided exact sign test
  over the paired rounds (a round counts when 1.5 x nanocompile's time is
  below llama.cpp's; p <= ALPHA); on an AVX2-only one at least level: the sign
  test does not show llama.cpp faster *and* nanocompile's median is no higher;
* the second thread buys >= 1.7x in prefill at 128 tokens: the ratio of the
  1- and 2-thread medians (the paired per-round sign test printed beside);
* decode at 2 threads within 15 % of the 2-thread bandwidth roofline: the
  median <= 1.15 x (IR bytes per decode step / the read bandwidth at 2
  threads, the best read of the run: see "Bandwidth" below);
* decode no slower than before: the median <= 1.05 x the median of the
  latest earlier run's ``c-phase4`` decode at that thread count on the same
  machine kind, model and decode prompt. A *cross-run* comparison (different
  moments, unpaired, the machine's load may differ), so it allows 5 % and
  says so.

Goals of issue 17, "Must show" item 4 (:func:`evaluate_goals_issue17`), about
``c-bf16`` (the scheduled C engine on the mapped bf16 weights), per thread
count of the run, printed after issue 16's and stored in every record of the
run (``goals_issue17``):

* decode >= 1.8x faster than ``llama-f32``: the one-sided exact sign test over
  the paired rounds counts a round when 1.8 x c-bf16's time is below
  llama.cpp's (p <= ALPHA);
* decode faster than ``llama-bf16`` (llama.cpp on the BF16 GGUF of the same
  weights): the sign test of c-bf16's rounds against llama.cpp's (p <= ALPHA);
* decode at >= 85 % of the bandwidth roofline for its bytes: (c-bf16's IR
  bytes per decode step / the read bandwidth at that thread count, the best
  read of the run) / the median >= 0.85;
* prefill at 128 tokens no slower than the f32 mode (``c-phase4``): at least
  level, as issue 16's AVX2-only prefill goal: the sign test does not show
  c-phase4 faster *and* c-bf16's median is no higher.

Goals of issue 18, "Must show" item 4 (:func:`evaluate_goals_issue18`), about
``c-int8`` (spec §5's kernel A: the scheduled C engine on int8 weights), per
thread count, printed after issue 17's and stored in every record of the run
(``goals_issue18``):

* decode >= 1.5x faster than ``llama-q8_0`` (llama.cpp on the Q8_0 GGUF of the
  same weights): the one-sided exact sign test over the paired rounds counts a
  round when 1.5 x c-int8's time is below llama.cpp's (p <= ALPHA);
* decode at >= 80 % of its own bandwidth roofline: (c-int8's IR bytes per
  decode step / the read bandwidth at that thread count, the best read of the
  run) / the median >= 0.80;
* kernel-B prefill at 128 tokens >= 2x faster than ``llama-q8_0``: the sign
  test counts a round when 2 x ``c-int8-dot``'s prefill ms/token is below
  llama.cpp's (p <= ALPHA).

The issue asks the decode goals of "int8", naming no kernel; kernel B
(``c-int8-dot``, W8A8 as Q8_0 is) is held to both decode goals as well, judged
and printed on its own lines (its own IR bytes for the roofline), so neither
kernel's decode stands for the other's.

Beside them, as the precondition a llama.cpp peer is held to: how many
leading greedy tokens ``llama-q8_0`` shares with ``c-int8`` on the decode
prompt (two different quantizations of random weights: they need not agree
to the end; both are also compared with the reference in the work table).

A goal whose engines or thread counts are not in the run is reported as not
judged, with the reason. When the ``-tuned`` twins ran (``c-bf16-tuned``;
``c-int8-tuned`` / ``c-int8-dot-tuned``: the same programs with this
machine's tuned schedules), issue 17's and 18's goals are judged on them as
well, printed after the hand schedules' and stored as ``goals_issue17_tuned``
and ``goals_issue18_tuned`` (None when they did not run).

Bandwidth: the roofline goals divide bytes by a read bandwidth, until
session 22 the newest clean probe record's: a figure from another hour. On
the shared VMs here the bandwidth a second thread gets is not one number: on
the AMD EPYC Zen 4 (session 22) 50 reads at 2 threads in 28 s went 35-37,
then 46-57, then 36 GB/s again, flipping within seconds (1 thread: 31-34).
So each round runs a ``bandwidth`` slot per thread count, rotated with the
engines (``bench.probe.read_bandwidth`` once this process's other threads
sleep: the probe binary with ``--bandwidth-only``, best of 3 passes over
1 GiB, ~0.5 s; its 64 MiB buffer in a smoke run), and a roofline goal uses
the **best** read of the run at its thread count: the probe's own definition
(best of its passes), made in the same run. Pairing each round's decode with
that round's read was tried and dropped: the flips are faster than a round
(a round's decode ran faster than its own read allowed, 1.26x, and two
rounds read 62-64 GB/s while their decodes were no faster than the others').
The lines give the reads' median and least beside the best and the newest
clean probe record's figure; the reads are printed ("read bandwidth in the
run") and stored (``bandwidth_in_run_gbs``); ``--no-bandwidth`` skips them,
and a failing probe drops them (the probe record is used then).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import BenchError, command, results, stats
from bench.engines import (
    ALL_ENGINE_NAMES,
    ENGINE_NAMES,
    ENGINES,
    REFERENCE_ENGINE,
    EngineUnavailable,
    Model,
    Shared,
    Work,
    full_synthetic_snapshot,
    model_facts,
    prefill_flops,
    prompt_ids,
)
from bench.idle import wait_for_idle_threads
from bench.probe import read_bandwidth

ALPHA = 0.05  # sign-test level for a verdict
WARMUP_TOKENS = 4
DEFAULT_ROUNDS = 5  # 5 of 5 paired wins is p = 1/32; fewer rounds can never reach 0.05
DEFAULT_PROMPTS = (16, 128)
DEFAULT_DECODE = 32
SMOKE = {"rounds": 2, "prompt_tokens": (4, 8), "decode_tokens": 4}
DECODE = "decode_ms_per_token"
NAME_WIDTH = max(len(name) for name in ALL_ENGINE_NAMES)  # the engine column of the tables
DEFAULT_COMPILE_BUDGET = 180.0
# Goals of issue 16, "Must show" item 4 (see the module doc).
GOAL_PREFILL_TOKENS = 128
LLAMA_F32 = "llama-f32"
GOAL_VS_LLAMA = {"avx512": 1.5, "avx2-only": 1.0}  # prefill: c-phase4 this many x faster
GOAL_SECOND_THREAD = 1.7  # prefill speed-up, 1 -> 2 threads
GOAL_DECODE_THREADS = 2
GOAL_DECODE_ROOFLINE = 1.15  # decode ms/token <= this x (bytes per step / bandwidth)
GOAL_DECODE_NO_SLOWER = 1.05  # cross-run: decode median <= this x the previous run's
# Goals of issue 17, "Must show" item 4 (see the module doc).
BF16_ENGINE = "c-bf16"
LLAMA_BF16 = "llama-bf16"
GOAL17_VS_LLAMA_F32 = 1.8  # decode: c-bf16 this many x faster than llama-f32
GOAL17_ROOFLINE = 0.85  # decode: at >= this fraction of the bandwidth roofline
# Goals of issue 18, "Must show" item 4 (see the module doc).
INT8_ENGINE = "c-int8"
LLAMA_Q8 = "llama-q8_0"
GOAL18_VS_LLAMA_Q8 = 1.5  # decode: c-int8 this many x faster than llama-q8_0
GOAL18_ROOFLINE = 0.80  # decode: at >= this fraction of its bandwidth roofline
GOAL18_KERNEL_B_PREFILL = 2.0  # kernel-B prefill@128: this many x faster than llama-q8_0
INT8_DOT_ENGINE = "c-int8-dot"  # spec §5 kernel B (W8A8, integer dot products)
BF16_TUNED, INT8_TUNED, INT8_DOT_TUNED = (f"{e}-tuned" for e in (BF16_ENGINE, "c-int8",
                                                                  "c-int8-dot"))
"""The ``-tuned`` twins the goals of issues 17 and 18 are judged on too, when they ran."""


def prefill_metric(prompt: int) -> str:
    """The metric name of prefill ms/token at one prompt length."""
    return f"prefill_ms_per_token@{prompt}"


# --------------------------------------------------------------------------
# settings


@dataclass(frozen=True)
class Settings:
    """A validated ``bench run`` command line."""

    engines: tuple[str, ...]
    threads: tuple[int, ...]
    rounds: int
    prompt_tokens: tuple[int, ...]  # sorted; the first is the decode prompt
    decode_tokens: int
    smoke: bool
    model: Path | None
    results_path: Path
    record: bool
    compile_budget: float = DEFAULT_COMPILE_BUDGET
    bandwidth: bool = True  # read the memory bandwidth in every round (the rooflines')

    @property
    def metrics(self) -> list[str]:
        """Every metric a slot measures, decode first."""
        return [DECODE, *(prefill_metric(p) for p in self.prompt_tokens)]

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for records."""
        return {
            "engines": list(self.engines),
            "threads": list(self.threads),
            "rounds": self.rounds,
            "warmup_rounds": 1,
            "prompt_tokens": list(self.prompt_tokens),
            "decode_prompt_tokens": self.prompt_tokens[0],
            "decode_tokens": self.decode_tokens,
            "smoke": self.smoke,
            "compile_budget_seconds": self.compile_budget,
            "bandwidth_in_run": self.bandwidth,
        }


def _int_list(text: str, flag: str, low: int, high: int) -> tuple[int, ...]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise BenchError(f"{flag} wants comma-separated integers, got {text!r}") from None
    if not values or any(not low <= v <= high for v in values):
        raise BenchError(f"{flag} wants integers in {low}..{high}, got {text!r}")
    return tuple(sorted(set(values)))


def _engine_list(text: str) -> tuple[str, ...]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [n for n in names if n not in ENGINES]
    if unknown or not names:
        raise BenchError(f"--engines: unknown engine {', '.join(unknown) or '(none)'}; "
                         f"choose from {','.join(ALL_ENGINE_NAMES)}")
    return tuple(dict.fromkeys(names))


def settings_from(args: argparse.Namespace) -> Settings:
    """Validate the arguments (``--smoke`` fills in what was not given)."""
    smoke = bool(args.smoke)
    if smoke and args.model is not None:
        raise BenchError("--smoke uses the tiny synthetic model; drop --model")
    rounds = args.rounds if args.rounds is not None else (
        SMOKE["rounds"] if smoke else DEFAULT_ROUNDS)
    if not 1 <= rounds <= 1000:
        raise BenchError(f"--rounds must be in 1..1000, got {rounds}")
    prompts = (_int_list(args.prompt_tokens, "--prompt-tokens", 1, 4096)
               if args.prompt_tokens else SMOKE["prompt_tokens"] if smoke else DEFAULT_PROMPTS)
    decode = args.decode_tokens if args.decode_tokens is not None else (
        SMOKE["decode_tokens"] if smoke else DEFAULT_DECODE)
    if not 2 <= decode <= 4096:
        raise BenchError(f"--decode-tokens must be in 2..4096 (ms/token divides by "
                         f"generated - 1), got {decode}")
    if not 1 <= args.compile_budget <= 86_400:
        raise BenchError(f"--compile-budget must be in 1..86400 seconds, got {args.compile_budget}")
    model = Path(args.model) if args.model is not None else None
    if model is not None and not model.is_dir():
        raise BenchError(f"--model {model}: not a directory")
    return Settings(
        engines=_engine_list(args.engines),
        threads=_int_list(args.threads, "--threads", 1, 256),
        rounds=rounds,
        prompt_tokens=prompts,
        decode_tokens=decode,
        smoke=smoke,
        model=model,
        results_path=Path(args.results),
        record=not args.no_record,
        compile_budget=float(args.compile_budget),
        bandwidth=not getattr(args, "no_bandwidth", False),
    )


# --------------------------------------------------------------------------
# threads


class Threads:
    """Sets every thread pool the engines use to one count, and restores it."""

    def __init__(self, strict: bool) -> None:
        try:
            import threadpoolctl
        except ImportError:
            if strict:
                raise BenchError("threadpoolctl is not installed, so BLAS threads cannot be "
                                 "set: pip install -e '.[bench]'") from None
            print("bench run: threadpoolctl not installed: BLAS threads are NOT controlled "
                  "(pip install -e '.[bench]')", file=sys.stderr)
            threadpoolctl = None
        self._threadpoolctl = threadpoolctl
        self.controlled = threadpoolctl is not None

    @contextlib.contextmanager
    def limit(self, n: int) -> Iterator[None]:
        """Within the block, BLAS/OpenMP pools, torch and NANOCOMPILE_THREADS use ``n``."""
        torch = sys.modules.get("torch")
        old_torch = torch.get_num_threads() if torch is not None else None
        old_env = os.environ.get("NANOCOMPILE_THREADS")
        os.environ["NANOCOMPILE_THREADS"] = str(n)
        limiter = (self._threadpoolctl.threadpool_limits(limits=n)
                   if self._threadpoolctl is not None else contextlib.nullcontext())
        try:
            with limiter:
                if torch is not None:
                    torch.set_num_threads(n)
                yield
        finally:
            if torch is not None and old_torch is not None:
                torch.set_num_threads(old_torch)
            if old_env is None:
                os.environ.pop("NANOCOMPILE_THREADS", None)
            else:
                os.environ["NANOCOMPILE_THREADS"] = old_env


# --------------------------------------------------------------------------
# timing


@dataclass(frozen=True)
class Generation:
    """One timed greedy generation."""

    ttft: float  # seconds to the first token (the prefill)
    decode: float  # seconds from the first token to the last
    tokens: list[int]


def timed_generation(model: Model, prompt: Sequence[int], n_tokens: int) -> Generation:
    """Greedy-generate ``n_tokens`` after ``prompt``, timing the prefill and the rest."""
    state = model.new_state(len(prompt) + n_tokens)
    start = time.perf_counter()
    token = model.next_token(prompt, state)
    first = time.perf_counter()
    tokens = [token]
    for _ in range(n_tokens - 1):
        token = model.next_token([token], state)
        tokens.append(token)
    end = time.perf_counter()
    return Generation(first - start, end - first, tokens)


@dataclass
class Slot:
    """One engine at one thread count: its per-round values for every metric."""

    engine: str
    threads: int
    values: dict[str, list[float]] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=list)

    def add(self, metric: str, ms_per_token: float) -> None:
        """Append one round's value."""
        self.values.setdefault(metric, []).append(ms_per_token)


def run_slot(model: Model, slot: Slot | None, prompt: list[int], settings: Settings,
             decode_tokens: int) -> None:
    """One run of one engine: the generation, then each longer prefill (``slot`` None: untimed)."""
    short = settings.prompt_tokens[0]
    gen = timed_generation(model, prompt[:short], decode_tokens)
    if slot is not None:
        slot.add(DECODE, 1e3 * gen.decode / (decode_tokens - 1))
        slot.add(prefill_metric(short), 1e3 * gen.ttft / short)
        slot.tokens = gen.tokens
    for length in settings.prompt_tokens[1:]:
        ttft = timed_generation(model, prompt[:length], 1).ttft
        if slot is not None:
            slot.add(prefill_metric(length), 1e3 * ttft / length)


# --------------------------------------------------------------------------
# the run


@dataclass
class Built:
    """An engine ready to time, with its work counters."""

    name: str
    model: Model
    work: Work
    build_seconds: float

    @property
    def details(self) -> dict[str, Any]:
        """The engine's own facts for the record, read when asked (after the run, for
        counts that the timed rounds may change, e.g. torch-compile's graphs)."""
        details = getattr(self.model, "details", None)
        return details() if details is not None else {}


def resolve_model(settings: Settings, scratch: Path) -> tuple[Path, str]:
    """The snapshot directory to benchmark and a label for it."""
    if settings.smoke:
        from nanocompile.checkpoint.synth import write_synthetic_snapshot

        return write_synthetic_snapshot(scratch / "tiny", tiny=True, seed=0,
                                        tokenizer=False), "synthetic tiny seed 0"
    if settings.model is not None:
        return settings.model, f"snapshot {settings.model.name}"
    return full_synthetic_snapshot(), "synthetic full-size seed 0"


def build_engines(settings: Settings, shared: Shared) -> list[Built]:
    """Build every requested engine; an unavailable or failing one is skipped with a message."""
    built = []
    for name in settings.engines:
        spec = ENGINES[name]
        start = time.perf_counter()
        try:
            model = spec.build(shared)
            work = spec.work(shared)
        except EngineUnavailable as exc:
            print(f"  skipping {name}: {exc}")
            continue
        except Exception as exc:  # a peer that cannot be built must not stop the others
            print(f"  skipping {name}: building it failed: {type(exc).__name__}: {exc}")
            continue
        seconds = time.perf_counter() - start
        built.append(Built(name, model, work, seconds))
        print(f"  {name:{NAME_WIDTH}} ready in {seconds:5.1f} s  ({spec.description})", flush=True)
    return built


def _rotated(items: list[Any], by: int) -> list[Any]:
    k = by % len(items)
    return items[k:] + items[:k]


BANDWIDTH = "bandwidth"  # the slot that reads this moment's memory bandwidth (no engine)


def measure(built: list[Built], settings: Settings, threads: Threads,
            prompt: list[int], bandwidth: dict[int, list[float]] | None = None
            ) -> dict[tuple[str, int], Slot]:
    """The warm-up round, then ``settings.rounds`` rotated rounds; per-slot values.

    ``bandwidth`` (a dict to fill, or None: not measured): a ``BANDWIDTH`` slot per
    thread count joins the rotation and appends each round's read bandwidth in
    GB/s (``bench.probe.read_bandwidth``, once this process's other threads
    sleep) under its thread count: the rooflines' bandwidth measured in the
    run itself; a probe that fails drops it (the goals then use the probe
    record)."""
    by_name = {b.name: b for b in built}
    slots = [Slot(b.name, t) for t in settings.threads for b in built]
    if bandwidth is not None:
        slots += [Slot(BANDWIDTH, t) for t in settings.threads]
        bandwidth.update({t: [] for t in settings.threads})
    failed: set[str] = set()
    print(f"warm-up round (untimed, {min(settings.threads)} thread"
          f"{'s' if min(settings.threads) > 1 else ''})", flush=True)
    with threads.limit(min(settings.threads)):
        for b in built:
            _guarded(b.name, failed, lambda b=b: run_slot(
                b.model, None, prompt, settings, min(settings.decode_tokens, WARMUP_TOKENS)))
    for r in range(settings.rounds):
        start = time.perf_counter()
        for slot in _rotated(slots, r):
            if slot.engine in failed:
                continue
            if slot.engine == BANDWIDTH:
                assert bandwidth is not None
                wait_for_idle_threads()  # no engine's pool still spinning beside the read
                _guarded(BANDWIDTH, failed, lambda s=slot: bandwidth[s.threads].append(
                    read_bandwidth(s.threads, quick=settings.smoke)))
                continue
            with threads.limit(slot.threads):
                _guarded(slot.engine, failed, lambda s=slot: run_slot(
                    by_name[s.engine].model, s, prompt, settings, settings.decode_tokens))
        load = os.getloadavg()[0]
        print(f"round {r + 1}/{settings.rounds}: {time.perf_counter() - start:6.1f} s"
              f"  (load {load:.2f})", flush=True)
    if bandwidth is not None and (BANDWIDTH in failed or any(
            len(v) != settings.rounds for v in bandwidth.values())):
        bandwidth.clear()
    return {(s.engine, s.threads): s for s in slots
            if s.engine not in failed and s.engine != BANDWIDTH
            and len(s.values.get(DECODE, ())) == settings.rounds}


def _guarded(name: str, failed: set[str], action: Any) -> None:
    """Run ``action``; an engine that raises is reported once and dropped from the run."""
    try:
        action()
    except Exception as exc:
        print(f"  dropping {name}: it failed while running: {type(exc).__name__}: {exc}")
        failed.add(name)


# --------------------------------------------------------------------------
# statistics and records


def head_to_head(reference: list[float], other: list[float], ref_name: str,
                 other_name: str) -> dict[str, Any]:
    """Exact one-sided sign tests both ways over paired rounds, and the verdict at ALPHA."""
    ref_faster = stats.sign_test(reference, other)
    other_faster = stats.sign_test(other, reference)
    if ref_faster.p_value <= ALPHA:
        verdict = f"{ref_name} faster"
    elif other_faster.p_value <= ALPHA:
        verdict = f"{other_name} faster"
    else:
        verdict = "no difference shown"
    return {
        "reference": ref_name,
        "reference_faster": ref_faster.as_dict(),
        "other_faster": other_faster.as_dict(),
        "alpha": ALPHA,
        "verdict": verdict,
    }


def _throughput(metric: str, median_ms: float, work: Work, shared: Shared,
                decode_past: int) -> dict[str, float]:
    """Achieved GB/s (decode) or GFLOP/s (prefill) at the median."""
    if median_ms <= 0:
        return {}
    if metric == DECODE:
        return {"gb_per_s": work.decode_bytes(decode_past) / (median_ms * 1e-3) / 1e9}
    length = int(metric.rsplit("@", 1)[1])
    flops = prefill_flops(shared.config, length)
    return {"gflop_per_s": flops / (median_ms * 1e-3 * length) / 1e9,
            "flops_per_token": flops / length}


def summarize_slots(slots: dict[tuple[str, int], Slot], built: list[Built], shared: Shared,
                    settings: Settings, history: list[dict[str, Any]],
                    model_id: str) -> list[dict[str, Any]]:
    """One measurement dict per engine × threads × metric (stats, sign test, control)."""
    machine_id = results.machine_facts()["id"]
    by_name = {b.name: b for b in built}
    out = []
    for (engine, threads), slot in slots.items():
        ref = slots.get((REFERENCE_ENGINE, threads))
        for metric in settings.metrics:
            values = slot.values[metric]
            summary = stats.summarize(values)
            m: dict[str, Any] = {
                "engine": engine, "metric": metric, "threads": threads, "unit": "ms/token",
                "median": summary["median"], "min": summary["minimum"], "n": len(values),
                "spread": summary, "values": values,
                "prompt_tokens": (settings.prompt_tokens[0] if metric == DECODE
                                  else int(metric.rsplit("@", 1)[1])),
            }
            m |= _throughput(metric, summary["median"], by_name[engine].work, shared,
                             settings.prompt_tokens[0])
            if ref is not None and engine != REFERENCE_ENGINE:
                m["sign_test"] = head_to_head(ref.values[metric], values, REFERENCE_ENGINE,
                                              engine)
            past = results.history_medians(history, engine=engine, metric=metric,
                                           threads=threads, machine_id=machine_id)
            m["control"] = stats.control_check(summary["median"], past).as_dict()
            m["model_id"] = model_id
            out.append(m)
    return out


WEIGHT_SUFFIXES = (".safetensors", ".gguf")


def weights_mapped() -> dict[str, dict[str, int]]:
    """The weight files the engines map (``.safetensors``, ``.gguf``, 2 MiB or more
    resident): bytes resident and bytes mapped in 2 MiB pages. A decode step
    reads its weights 8-18 % faster in 2 MiB pages (``checkpoint/pagecache.py``),
    so a run records the state of each engine's files."""
    from nanocompile.checkpoint.pagecache import HUGE_PAGE, file_mappings

    return {path: {"resident": rss, "huge": huge}
            for path, (rss, huge) in sorted(file_mappings().items())
            if path.endswith(WEIGHT_SUFFIXES) and rss >= HUGE_PAGE}


FILES_PER_LINE_ITEM = 3  # more weight files than this in one directory are summed


def format_weights_mapped(mapped: dict[str, dict[str, int]]) -> str:
    """One line: each weight file's share mapped in 2 MiB pages; a directory of
    more than ``FILES_PER_LINE_ITEM`` of them (the int8 cache: a file per layer)
    as their sum."""
    if not mapped:
        return "weights mapped in 2 MiB pages: (no /proc/self/smaps, or no weight file mapped)"
    folders: dict[Path, list[str]] = {}
    for path in mapped:
        folders.setdefault(Path(path).parent, []).append(path)
    parts = []
    for folder, paths in folders.items():
        if len(paths) > FILES_PER_LINE_ITEM:
            huge = sum(mapped[p]["huge"] for p in paths) >> 20
            resident = sum(mapped[p]["resident"] for p in paths) >> 20
            parts.append(f"{len(paths)} files in {folder.name}/ {huge} of {resident} MiB")
        else:
            parts += [f"{Path(p).name} {mapped[p]['huge'] >> 20} of "
                      f"{mapped[p]['resident'] >> 20} MiB" for p in paths]
    return "weights mapped in 2 MiB pages: " + ", ".join(parts)


def agreement(slots: dict[tuple[str, int], Slot]) -> dict[str, dict[str, Any]]:
    """How many leading greedy tokens each engine shares with the reference engine.

    The reference is the interpreter (the graph's meaning) when it ran, else c-phase3.
    """
    engines = {e: s.tokens for (e, _), s in slots.items()}
    ref_name = next((e for e in ("interp", REFERENCE_ENGINE) if e in engines), None)
    if ref_name is None:
        return {}
    ref = engines[ref_name]
    out = {}
    for engine, tokens in engines.items():
        same = next((i for i, (a, b) in enumerate(zip(tokens, ref, strict=False)) if a != b),
                    min(len(tokens), len(ref)))
        out[engine] = {"reference": ref_name, "leading_equal": same, "of": len(ref)}
    return out


def write_records(measurements: list[dict[str, Any]], built: list[Built], settings: Settings,
                  context: dict[str, Any], threads: Threads) -> int:
    """Append one record per measurement; returns how many."""
    by_name = {b.name: b for b in built}
    details = {b.name: b.details for b in built}
    for m in measurements:
        b = by_name[m["engine"]]
        payload = context | {
            "engine": {"name": b.name, "description": ENGINES[b.name].description,
                       "build_seconds": b.build_seconds, **details[b.name]},
            "work": b.work.as_dict(settings.prompt_tokens[0])
            | {"own_ir": ENGINES[b.name].work_is_own},
            "agreement": context["agreement"].get(b.name),
            "measurements": [m],
        }
        with threads.limit(m["threads"]):  # so the record's BLAS pools show this count
            record = results.make_record("run", payload, threads=m["threads"])
        results.append_record(record, settings.results_path)
    return len(measurements)


# --------------------------------------------------------------------------
# issue 16's goals


def paired_factor_test(slow: list[float], fast: list[float], factor: float) -> stats.SignTest:
    """Is ``fast`` more than ``factor`` times faster than ``slow``, round by round?

    The exact one-sided sign test over paired rounds of ``factor * fast[i]``
    against ``slow[i]`` (a win: ``factor * fast[i] < slow[i]``).
    """
    return stats.sign_test([factor * v for v in fast], slow)


def _not_judged(reason: str) -> dict[str, Any]:
    return {"met": None, "reason": reason}


def _vs_llama(index: dict[tuple[str, int, str], dict[str, Any]], threads: int,
              kind: str) -> dict[str, Any]:
    metric = prefill_metric(GOAL_PREFILL_TOKENS)
    nc = index.get((REFERENCE_ENGINE, threads, metric))
    llama = index.get((LLAMA_F32, threads, metric))
    if nc is None or llama is None:
        missing = [e for e, m in ((REFERENCE_ENGINE, nc), (LLAMA_F32, llama)) if m is None]
        return _not_judged(f"no {metric} of {' and '.join(missing)} at {threads} "
                           f"thread{'s' * (threads != 1)}")
    factor = GOAL_VS_LLAMA.get(kind, 1.0)
    faster = paired_factor_test(llama["values"], nc["values"], factor)
    llama_faster = stats.sign_test(llama["values"], nc["values"])
    ratio = llama["median"] / nc["median"] if nc["median"] > 0 else 0.0
    met = (faster.p_value <= ALPHA if factor > 1
           else llama_faster.p_value > ALPHA and ratio >= 1.0)
    return {"met": met, "factor": factor, "llama_over_nanocompile": ratio,
            "nanocompile_median": nc["median"], "llama_median": llama["median"],
            "nanocompile_factor_faster": faster.as_dict(),
            "llama_faster": llama_faster.as_dict()}


def _second_thread(index: dict[tuple[str, int, str], dict[str, Any]]) -> dict[str, Any]:
    metric = prefill_metric(GOAL_PREFILL_TOKENS)
    one = index.get((REFERENCE_ENGINE, 1, metric))
    two = index.get((REFERENCE_ENGINE, 2, metric))
    if one is None or two is None:
        return _not_judged(f"no {REFERENCE_ENGINE} {metric} at both 1 and 2 threads")
    speedup = one["median"] / two["median"] if two["median"] > 0 else 0.0
    return {"met": speedup >= GOAL_SECOND_THREAD, "factor": GOAL_SECOND_THREAD,
            "speedup": speedup, "median_1": one["median"], "median_2": two["median"],
            "paired": paired_factor_test(one["values"], two["values"],
                                         GOAL_SECOND_THREAD).as_dict()}


def _bandwidth_facts(bandwidth: dict[str, Any], threads: int, decode_bytes: int
                     ) -> dict[str, Any]:
    """What a roofline goal records of the bandwidth it used."""
    out: dict[str, Any] = {"bytes_per_step": decode_bytes,
                           "bandwidth_gbs": float(bandwidth["gbs"][str(threads)]),
                           "bandwidth_source": bandwidth.get("source", "probe record"),
                           "probe_time": bandwidth.get("time")}
    reads = (bandwidth.get("rounds") or {}).get(str(threads))
    if reads:
        out["bandwidth_rounds_gbs"] = list(reads)
    record = bandwidth.get("record")
    if record is not None and str(threads) in record.get("gbs", {}):
        out["probe_record_gbs"] = float(record["gbs"][str(threads)])
        out["probe_record_time"] = record.get("time")
    return out


def _decode_roofline(index: dict[tuple[str, int, str], dict[str, Any]],
                     decode_bytes: int | None, bandwidth: dict[str, Any] | None
                     ) -> dict[str, Any]:
    t = GOAL_DECODE_THREADS
    m = index.get((REFERENCE_ENGINE, t, DECODE))
    if m is None or decode_bytes is None:
        return _not_judged(f"no {REFERENCE_ENGINE} decode at {t} threads")
    if bandwidth is None or str(t) not in bandwidth.get("gbs", {}):
        return _not_judged(f"no bandwidth at {t} threads: none measured in the run and no "
                           "clean probe record of this machine (python -m bench probe "
                           "--threads 1,2)")
    gbs = float(bandwidth["gbs"][str(t)])
    floor = 1e3 * decode_bytes / (gbs * 1e9)
    ratio = m["median"] / floor
    return {"met": ratio <= GOAL_DECODE_ROOFLINE, "limit": GOAL_DECODE_ROOFLINE,
            "median": m["median"], "floor_ms": floor, "over_floor": ratio,
            "pct_roofline": 100 / ratio if ratio > 0 else 0.0,
            **_bandwidth_facts(bandwidth, t, decode_bytes)}


def previous_decode(history: list[dict[str, Any]], *, kind: str, model_id: str,
                    decode_prompt: int, machine_id: str | None = None
                    ) -> dict[int, dict[str, Any]]:
    """Per thread count, the latest recorded ``c-phase4`` decode measurement on machine
    kind ``kind`` for this model and decode prompt length (smoke runs have their own
    model id, so they only meet each other); with ``machine_id``, only on that CPU
    (``results.machine_facts``' id: a kind holds CPUs of twice each other's bandwidth,
    a Xeon at 15.6 GB/s and a Zen 4 at 30.5, whose decode times say nothing of each
    other)."""
    latest: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
    for record, m in results.iter_measurements(history):
        payload = record.get("payload") or {}
        if (m.get("engine") != REFERENCE_ENGINE or m.get("metric") != DECODE
                or results.kind_of(record) != kind
                or (machine_id is not None
                    and (record.get("machine") or {}).get("id") != machine_id)
                or (payload.get("model") or {}).get("id") != model_id
                or (payload.get("settings") or {}).get("decode_prompt_tokens") != decode_prompt
                or not isinstance(m.get("median"), int | float)):
            continue
        t = m.get("threads")
        if not isinstance(t, int):
            continue
        if t not in latest or record.get("unix_time", 0) >= latest[t][0].get("unix_time", 0):
            latest[t] = (record, m)
    return {t: {"median": float(m["median"]), "run_id": record["payload"].get("run_id"),
                "time": record.get("time"), "git": (record.get("git") or {}).get("commit"),
                "machine_id": (record.get("machine") or {}).get("id")}
            for t, (record, m) in latest.items()}


def _no_slower(index: dict[tuple[str, int, str], dict[str, Any]], threads: Sequence[int],
               previous: dict[int, dict[str, Any]], machine_id: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in threads:
        m = index.get((REFERENCE_ENGINE, t, DECODE))
        if m is None:
            out[str(t)] = _not_judged(f"no {REFERENCE_ENGINE} decode at {t} threads")
            continue
        before = previous.get(t)
        if before is None:
            out[str(t)] = _not_judged("no earlier decode record of this model and decode "
                                      "prompt on this CPU (machine id "
                                      f"{machine_id})")
            continue
        ratio = m["median"] / before["median"] if before["median"] > 0 else float("inf")
        out[str(t)] = {"met": ratio <= GOAL_DECODE_NO_SLOWER, "limit": GOAL_DECODE_NO_SLOWER,
                       "median": m["median"], "previous": before, "ratio": ratio,
                       "cross_run": True,
                       "same_machine": machine_id is not None
                       and before.get("machine_id") == machine_id}
    return out


def evaluate_goals(measurements: list[dict[str, Any]], *, kind: str, threads: Sequence[int],
                   decode_bytes: int | None, bandwidth: dict[str, Any] | None,
                   previous: dict[int, dict[str, Any]], machine_id: str | None = None
                   ) -> dict[str, Any]:
    """Issue 16's item-4 goals over one run's measurements (see the module doc).

    ``kind`` is the machine kind; ``decode_bytes`` c-phase4's IR bytes per
    decode step; ``bandwidth`` ``{"gbs": {threads: GB/s}, "time": ...}`` from
    a clean probe record (None: the roofline goal is not judged);
    ``previous`` :func:`previous_decode`'s result; ``machine_id`` this machine's
    (to say whether the previous run was on this machine or another of its
    kind). Every goal has ``met``:
    True, False, or None when it could not be judged (with a ``reason``).
    """
    index = {(m["engine"], m["threads"], m["metric"]): m for m in measurements}
    return {
        "machine_kind": kind, "prefill_tokens": GOAL_PREFILL_TOKENS, "alpha": ALPHA,
        "vs_llama_f32": {str(t): _vs_llama(index, t, kind) for t in threads},
        "second_thread": _second_thread(index),
        "decode_roofline": _decode_roofline(index, decode_bytes, bandwidth),
        "decode_no_slower": _no_slower(index, threads, previous, machine_id),
    }


def probe_bandwidth(path: Path = results.RESULTS_PATH,
                    threads: Sequence[int] = (GOAL_DECODE_THREADS,)) -> dict[str, Any] | None:
    """Read bandwidth per thread count of this machine's newest probe record clean at
    every count of ``threads`` (default ``GOAL_DECODE_THREADS``),
    ``{"gbs": {...}, "time": ...}``; None if none."""
    try:
        records = results.load_records(path, kind="probe")
    except ValueError:
        return None
    from bench.probe import clean_limits

    found = clean_limits(records, results.machine_facts()["id"], list(threads), ())
    if found is None:
        return None
    return {"gbs": found["bandwidth_gbs"], "time": found["record"].get("time")}


def roofline_bandwidth(in_run: dict[int, list[float]],
                       record: dict[str, Any] | None) -> dict[str, Any] | None:
    """The bandwidth the roofline goals use: where the run read its own, the best
    read per thread count (``"gbs"``; the probe's definition, best of its
    passes, made in this run), all the reads under ``"rounds"`` and the probe
    record kept beside under ``"record"``; else the probe record's."""
    if not in_run or not all(in_run.values()):
        return None if record is None else {**record, "source": "probe record"}
    return {"gbs": {str(t): max(v) for t, v in in_run.items()},
            "rounds": {str(t): list(v) for t, v in in_run.items()},
            "source": "in-run", "time": None, "record": record}


def _bandwidth_text(g: dict[str, Any]) -> str:
    """Where a roofline goal's bandwidth came from, for its line."""
    if g.get("bandwidth_source") == "in-run":
        reads = g.get("bandwidth_rounds_gbs") or []
        text = (f"the best of the run's {len(reads)} reads "
                f"(median {stats.summarize(reads)['median']:.1f}, least {min(reads):.1f})")
        if "probe_record_gbs" in g:
            text += f"; the probe record's {g['probe_record_gbs']:.1f} GB/s"
        return text
    return f"probe {g.get('probe_time')}"


def _roofline_detail(g: dict[str, Any], fraction: float) -> str:
    """A roofline goal's numbers: the median time, the floor, where its bandwidth
    came from, and the fraction of the roofline (floor / median time)."""
    return (f"{g['median']:.2f} ms/token vs floor {g['floor_ms']:.2f} = "
            f"{g['bytes_per_step'] / 1e9:.3f} GB / {g['bandwidth_gbs']:.1f} GB/s, "
            f"{_bandwidth_text(g)}: {100 * fraction:.0f}%")


def _met(g: dict[str, Any]) -> str:
    if g["met"] is None:
        return f"not judged: {g['reason']}"
    return "MET" if g["met"] else "NOT MET"


def _p(test: dict[str, Any]) -> str:
    return f"{test['wins']}/{test['n']} rounds, p={test['p_value']:.3f}"


def format_goals(goals: dict[str, Any]) -> str:
    """Issue 16's item-4 goals, one line each."""
    n = goals["prefill_tokens"]
    lines = [f"issue 16 goals, machine kind {goals['machine_kind']} (c-phase4; sign tests "
             f"exact, one-sided, paired rounds, p <= {goals['alpha']}):"]
    factor = GOAL_VS_LLAMA.get(goals["machine_kind"], 1.0)
    want = f">= {factor:g}x faster than" if factor > 1 else "at least level with"
    for t, g in goals["vs_llama_f32"].items():
        line = f"  prefill @{n}, {t} thr, {want} llama-f32: {_met(g)}"
        if g["met"] is not None:
            side = (f"c-phase4 {g['factor']:g}x faster in {_p(g['nanocompile_factor_faster'])}"
                    if g["factor"] > 1 else f"llama-f32 faster in {_p(g['llama_faster'])}")
            line += (f" (medians {g['nanocompile_median']:.2f} vs {g['llama_median']:.2f} "
                     f"ms/token: llama/c-phase4 {g['llama_over_nanocompile']:.2f}x; {side})")
        lines.append(line)
    g = goals["second_thread"]
    line = f"  second thread buys >= {GOAL_SECOND_THREAD:g}x in prefill @{n}: {_met(g)}"
    if g["met"] is not None:
        line += (f" ({g['median_1']:.2f} -> {g['median_2']:.2f} ms/token: {g['speedup']:.2f}x "
                 f"of medians; >= {g['factor']:g}x in {_p(g['paired'])})")
    lines.append(line)
    g = goals["decode_roofline"]
    line = (f"  decode at {GOAL_DECODE_THREADS} thr within "
            f"{100 * (GOAL_DECODE_ROOFLINE - 1):.0f}% of the bandwidth roofline: {_met(g)}")
    if g["met"] is not None:
        line += (f" ({_roofline_detail(g, g['pct_roofline'] / 100)}, "
                 f"{g['over_floor']:.2f}x the floor)")
    lines.append(line)
    for t, g in goals["decode_no_slower"].items():
        line = f"  decode no slower than before, {t} thr (CROSS-RUN comparison): {_met(g)}"
        if g["met"] is not None:
            prev = g["previous"]
            where = ("this machine" if g["same_machine"]
                     else f"another machine of this kind, id {prev['machine_id']}")
            line += (f" ({g['median']:.1f} vs {prev['median']:.1f} ms/token: {g['ratio']:.2f}x, "
                     f"limit {g['limit']:g}x; previous run {prev['run_id']} at {prev['time']}, "
                     f"git {str(prev['git'])[:7]}, {where}; not paired, the load may differ)")
        lines.append(line)
    return "\n".join(lines)


# --------------------------------------------------------------------------
# issue 17's goals


def _missing(pairs: Sequence[tuple[str, Any]], what: str, threads: int) -> dict[str, Any]:
    names = [e for e, m in pairs if m is None]
    return _not_judged(f"no {what} of {' and '.join(names)} at {threads} "
                       f"thread{'s' * (threads != 1)}")


def _bf16_decode_faster(index: dict[tuple[str, int, str], dict[str, Any]], threads: int,
                        peer: str, factor: float, engine: str = BF16_ENGINE) -> dict[str, Any]:
    nc = index.get((engine, threads, DECODE))
    other = index.get((peer, threads, DECODE))
    if nc is None or other is None:
        return _missing(((engine, nc), (peer, other)), "decode", threads)
    test = paired_factor_test(other["values"], nc["values"], factor)
    return {"met": test.p_value <= ALPHA, "factor": factor, "peer": peer,
            "median": nc["median"], "peer_median": other["median"],
            "peer_over_bf16": other["median"] / nc["median"] if nc["median"] > 0 else 0.0,
            "sign_test": test.as_dict()}


def _bf16_roofline(index: dict[tuple[str, int, str], dict[str, Any]], threads: int,
                   decode_bytes: int | None, bandwidth: dict[str, Any] | None, *,
                   engine: str = BF16_ENGINE, limit: float = GOAL17_ROOFLINE) -> dict[str, Any]:
    m = index.get((engine, threads, DECODE))
    if m is None or decode_bytes is None:
        return _missing(((engine, None),), "decode", threads)
    if bandwidth is None or str(threads) not in bandwidth.get("gbs", {}):
        return _not_judged(f"no bandwidth at {threads} thread{'s' * (threads != 1)}: none "
                           "measured in the run and no clean probe record of this machine "
                           "(python -m bench probe)")
    gbs = float(bandwidth["gbs"][str(threads)])
    floor = 1e3 * decode_bytes / (gbs * 1e9)
    fraction = floor / m["median"] if m["median"] > 0 else 0.0
    return {"met": fraction >= limit, "limit": limit,
            "median": m["median"], "floor_ms": floor, "fraction_of_roofline": fraction,
            **_bandwidth_facts(bandwidth, threads, decode_bytes)}


def _bf16_prefill_level(index: dict[tuple[str, int, str], dict[str, Any]],
                        threads: int, engine: str = BF16_ENGINE) -> dict[str, Any]:
    metric = prefill_metric(GOAL_PREFILL_TOKENS)
    nc = index.get((engine, threads, metric))
    f32 = index.get((REFERENCE_ENGINE, threads, metric))
    if nc is None or f32 is None:
        return _missing(((engine, nc), (REFERENCE_ENGINE, f32)), metric, threads)
    f32_faster = stats.sign_test(f32["values"], nc["values"])
    ratio = nc["median"] / f32["median"] if f32["median"] > 0 else float("inf")
    return {"met": f32_faster.p_value > ALPHA and ratio <= 1.0, "median": nc["median"],
            "f32_median": f32["median"], "bf16_over_f32": ratio,
            "f32_faster": f32_faster.as_dict()}


def evaluate_goals_issue17(measurements: list[dict[str, Any]], *, threads: Sequence[int],
                           decode_bytes: int | None, bandwidth: dict[str, Any] | None,
                           engine: str = BF16_ENGINE) -> dict[str, Any]:
    """Issue 17's item-4 goals over one run's measurements (see the module doc),
    judged on ``engine`` (c-bf16, or c-bf16-tuned: the same program with this
    machine's tuned schedules).

    ``decode_bytes`` is the engine's IR bytes per decode step; ``bandwidth``
    ``{"gbs": {threads: GB/s}, "time": ...}`` from a clean probe record (None:
    the roofline goals are not judged). Every goal, per thread count, has
    ``met``: True, False, or None when it could not be judged (with a ``reason``).
    """
    index = {(m["engine"], m["threads"], m["metric"]): m for m in measurements}
    return {
        "engine": engine, "prefill_tokens": GOAL_PREFILL_TOKENS, "alpha": ALPHA,
        "decode_vs_llama_f32": {str(t): _bf16_decode_faster(index, t, LLAMA_F32,
                                                            GOAL17_VS_LLAMA_F32, engine)
                                for t in threads},
        "decode_vs_llama_bf16": {str(t): _bf16_decode_faster(index, t, LLAMA_BF16, 1.0,
                                                             engine)
                                 for t in threads},
        "decode_roofline": {str(t): _bf16_roofline(index, t, decode_bytes, bandwidth,
                                                   engine=engine)
                            for t in threads},
        "prefill_vs_f32": {str(t): _bf16_prefill_level(index, t, engine) for t in threads},
    }


GOAL17_TITLES = {
    "decode_vs_llama_f32": f"decode >= {GOAL17_VS_LLAMA_F32:g}x faster than {LLAMA_F32}",
    "decode_vs_llama_bf16": f"decode faster than {LLAMA_BF16}",
    "decode_roofline": f"decode at >= {100 * GOAL17_ROOFLINE:.0f}% of the bandwidth roofline",
    "prefill_vs_f32": f"prefill @{GOAL_PREFILL_TOKENS} no slower than {REFERENCE_ENGINE} "
                      "(f32 weights)",
}


def _goal17_detail(key: str, g: dict[str, Any], engine: str = BF16_ENGINE) -> str:
    if key in ("decode_vs_llama_f32", "decode_vs_llama_bf16"):
        test = g["sign_test"]
        beyond = f"{g['factor']:g}x faster" if g["factor"] != 1 else "faster"
        return (f"medians {g['median']:.2f} vs {g['peer_median']:.2f} ms/token: "
                f"{g['peer']}/{engine} {g['peer_over_bf16']:.2f}x; {beyond} in "
                f"{_p(test)}")
    if key == "decode_roofline":
        return _roofline_detail(g, g["fraction_of_roofline"])
    return (f"medians {g['median']:.2f} vs {g['f32_median']:.2f} ms/token: "
            f"{engine}/{REFERENCE_ENGINE} {g['bf16_over_f32']:.2f}x; {REFERENCE_ENGINE} "
            f"faster in {_p(g['f32_faster'])}")


def format_goals_issue17(goals: dict[str, Any]) -> str:
    """Issue 17's item-4 goals, one line per goal and thread count, then the misses."""
    lines = [f"issue 17 goals ({goals['engine']}; sign tests exact, one-sided, paired rounds, "
             f"p <= {goals['alpha']}):"]
    missed, judged, met = [], 0, 0
    for key, title in GOAL17_TITLES.items():
        for t, g in goals[key].items():
            line = f"  {title}, {t} thr: {_met(g)}"
            if g["met"] is not None:
                judged += 1
                met += bool(g["met"])
                line += f" ({_goal17_detail(key, g, goals['engine'])})"
                if not g["met"]:
                    missed.append(f"{title} at {t} thr")
            lines.append(line)
    lines.append(f"  issue 17: {met} of {judged} judged goals met"
                 + (f"; missed: {'; '.join(missed)}" if missed else ""))
    return "\n".join(lines)


# --------------------------------------------------------------------------
# issue 18's goals


def _int8_faster(index: dict[tuple[str, int, str], dict[str, Any]], threads: int,
                 engine: str, metric: str, factor: float) -> dict[str, Any]:
    """``engine`` ``factor`` x faster than llama-q8_0 on ``metric`` (the sign test)."""
    nc = index.get((engine, threads, metric))
    other = index.get((LLAMA_Q8, threads, metric))
    if nc is None or other is None:
        return _missing(((engine, nc), (LLAMA_Q8, other)), metric, threads)
    test = paired_factor_test(other["values"], nc["values"], factor)
    return {"met": test.p_value <= ALPHA, "factor": factor, "peer": LLAMA_Q8,
            "median": nc["median"], "peer_median": other["median"],
            "peer_over_int8": other["median"] / nc["median"] if nc["median"] > 0 else 0.0,
            "sign_test": test.as_dict()}


def leading_agreement(tokens: dict[str, list[int]], a: str, b: str) -> dict[str, Any] | None:
    """How many leading greedy tokens engines ``a`` and ``b`` share (None if either
    did not run)."""
    if a not in tokens or b not in tokens:
        return None
    first, second = tokens[a], tokens[b]
    same = next((i for i, (x, y) in enumerate(zip(first, second, strict=False)) if x != y),
                min(len(first), len(second)))
    return {"engines": [a, b], "leading_equal": same, "of": min(len(first), len(second))}


def evaluate_goals_issue18(measurements: list[dict[str, Any]], *, threads: Sequence[int],
                           decode_bytes: int | None, bandwidth: dict[str, Any] | None,
                           tokens: dict[str, list[int]] | None = None,
                           engine: str = INT8_ENGINE, dot_engine: str = INT8_DOT_ENGINE,
                           dot_decode_bytes: int | None = None) -> dict[str, Any]:
    """Issue 18's item-4 goals over one run's measurements (see the module doc).

    ``decode_bytes`` is c-int8's IR bytes per decode step; ``bandwidth`` as for
    :func:`evaluate_goals_issue17`; ``tokens`` each engine's greedy tokens on the
    decode prompt (for the agreement of c-int8 and llama-q8_0). Every goal, per
    thread count, has ``met``: True, False, or None when it could not be judged
    (with a ``reason``). ``engine`` and ``dot_engine``: kernel A's and kernel
    B's engines (c-int8 and c-int8-dot, or their ``-tuned`` twins);
    ``dot_decode_bytes`` kernel B's IR bytes per decode step (its roofline).
    """
    index = {(m["engine"], m["threads"], m["metric"]): m for m in measurements}
    return {
        "engine": engine, "dot_engine": dot_engine, "prefill_tokens": GOAL_PREFILL_TOKENS,
        "alpha": ALPHA,
        "decode_vs_llama_q8_0": {str(t): _int8_faster(index, t, engine, DECODE,
                                                      GOAL18_VS_LLAMA_Q8)
                                 for t in threads},
        "decode_roofline": {str(t): _bf16_roofline(index, t, decode_bytes, bandwidth,
                                                   engine=engine, limit=GOAL18_ROOFLINE)
                            for t in threads},
        "kernel_b_prefill_vs_llama_q8_0": {
            str(t): _int8_faster(index, t, dot_engine,
                                 prefill_metric(GOAL_PREFILL_TOKENS),
                                 GOAL18_KERNEL_B_PREFILL)
            for t in threads},
        "kernel_b_decode_vs_llama_q8_0": {str(t): _int8_faster(index, t, dot_engine, DECODE,
                                                               GOAL18_VS_LLAMA_Q8)
                                          for t in threads},
        "kernel_b_decode_roofline": {str(t): _bf16_roofline(index, t, dot_decode_bytes,
                                                            bandwidth, engine=dot_engine,
                                                            limit=GOAL18_ROOFLINE)
                                     for t in threads},
        "tokens_vs_llama_q8_0": leading_agreement(tokens or {}, engine, LLAMA_Q8),
    }


GOAL18_TITLES = {
    "decode_vs_llama_q8_0": f"decode >= {GOAL18_VS_LLAMA_Q8:g}x faster than {LLAMA_Q8}",
    "decode_roofline": f"decode at >= {100 * GOAL18_ROOFLINE:.0f}% of its bandwidth roofline",
    "kernel_b_prefill_vs_llama_q8_0": f"kernel-B prefill @{GOAL_PREFILL_TOKENS} >= "
                                      f"{GOAL18_KERNEL_B_PREFILL:g}x faster than {LLAMA_Q8}",
    "kernel_b_decode_vs_llama_q8_0": f"kernel-B decode >= {GOAL18_VS_LLAMA_Q8:g}x faster "
                                     f"than {LLAMA_Q8}",
    "kernel_b_decode_roofline": f"kernel-B decode at >= {100 * GOAL18_ROOFLINE:.0f}% of its "
                                f"bandwidth roofline",
}
# the goals judged on kernel B's engine (the rest on kernel A's)
GOAL18_KERNEL_B = ("kernel_b_prefill_vs_llama_q8_0", "kernel_b_decode_vs_llama_q8_0",
                   "kernel_b_decode_roofline")


def _goal18_detail(key: str, g: dict[str, Any], engines: tuple[str, str] = (
        INT8_ENGINE, INT8_DOT_ENGINE)) -> str:
    if key.endswith("_vs_llama_q8_0"):
        engine = engines[1] if key in GOAL18_KERNEL_B else engines[0]
        return (f"medians {g['median']:.2f} vs {g['peer_median']:.2f} ms/token: "
                f"{g['peer']}/{engine} {g['peer_over_int8']:.2f}x; {g['factor']:g}x "
                f"faster in {_p(g['sign_test'])}")
    return _roofline_detail(g, g["fraction_of_roofline"])


def format_goals_issue18(goals: dict[str, Any]) -> str:
    """Issue 18's item-4 goals, one line per goal and thread count, the token
    agreement with llama-q8_0, then the misses."""
    engines = (goals["engine"], goals.get("dot_engine", INT8_DOT_ENGINE))
    lines = [f"issue 18 goals ({engines[0]}, int8 kernel A, and {engines[1]}, kernel B; sign "
             f"tests exact, one-sided, paired rounds, p <= {goals['alpha']}):"]
    agree = goals.get("tokens_vs_llama_q8_0")
    if agree is None:
        lines.append(f"  greedy tokens vs {LLAMA_Q8}: not compared ({engines[0]} and "
                     f"{LLAMA_Q8} did not both run)")
    else:
        lines.append(f"  greedy tokens vs {LLAMA_Q8}: the first {agree['leading_equal']} of "
                     f"{agree['of']} agree (different int8 formats: per-row vs per-32 scales)")
    missed, judged, met = [], 0, 0
    for key, title in GOAL18_TITLES.items():
        for t, g in goals[key].items():
            line = f"  {title}, {t} thr: {_met(g)}"
            if g["met"] is not None:
                judged += 1
                met += bool(g["met"])
                line += f" ({_goal18_detail(key, g, engines)})"
                if not g["met"]:
                    missed.append(f"{title} at {t} thr")
            lines.append(line)
    lines.append(f"  issue 18: {met} of {judged} judged goals met"
                 + (f"; missed: {'; '.join(missed)}" if missed else ""))
    return "\n".join(lines)


# --------------------------------------------------------------------------
# printing


def _ms(x: float) -> str:
    return f"{x:9.1f}" if x >= 10 else f"{x:9.3f}"


def format_tables(measurements: list[dict[str, Any]], built: list[Built],
                  settings: Settings, agree: dict[str, dict[str, Any]]) -> str:
    """The times table, the work table and the sign-test verdicts."""
    index = {(m["engine"], m["threads"], m["metric"]): m for m in measurements}
    keys = sorted({(m["engine"], m["threads"]) for m in measurements},
                  key=lambda k: (ALL_ENGINE_NAMES.index(k[0]), k[1]))
    heads = "".join(f" | {metric.replace('_ms_per_token', ''):>26}" for metric in settings.metrics)
    lines = [f"ms/token: median  minimum  relative IQR; {settings.rounds} rounds",
             f"{'engine':{NAME_WIDTH}} {'thr':>3}{heads}"]
    for engine, t in keys:
        cells = "".join(
            f" | {_ms(m['median'])} {_ms(m['min'])} {100 * m['spread']['rel_iqr']:5.1f}%"
            for m in (index[(engine, t, metric)] for metric in settings.metrics))
        flag = " CONTROL" if any(index[(engine, t, metric)]["control"]["flagged"]
                                 for metric in settings.metrics) else ""
        lines.append(f"{engine:{NAME_WIDTH}} {t:>3}{cells}{flag}")
    lines += ["", _work_table(index, keys, built, settings, agree), "",
              f"sign tests vs {REFERENCE_ENGINE} at the same threads (exact, one-sided, "
              f"paired rounds; a verdict needs p <= {ALPHA}):"]
    for engine, t in keys:
        cells = [_verdict(engine, metric, index[(engine, t, metric)].get("sign_test"))
                 for metric in settings.metrics]
        if any(cells):
            lines.append(f"  {engine:{NAME_WIDTH}} {t} thr  " + " | ".join(cells))
    return "\n".join(lines)


def _verdict(engine: str, metric: str, test: dict[str, Any] | None) -> str:
    """``decode: c-phase3 faster 5/5 p=0.031`` or ``decode: no difference (numpy 3/5
    p=0.500)``: the side with the smaller p, its winning rounds and p."""
    if test is None:
        return ""
    name = metric.replace("_ms_per_token", "")
    ref, other = test["reference_faster"], test["other_faster"]
    side, winner = (test["reference"], ref) if ref["p_value"] <= other["p_value"] else (
        engine, other)
    counts = f"{winner['wins']}/{winner['n']} p={winner['p_value']:.3f}"
    if winner["p_value"] > ALPHA:
        return f"{name}: no difference ({side} {counts})"
    return f"{name}: {side} faster {counts}"


def _work_table(index: dict[tuple[str, int, str], dict[str, Any]], keys: list[tuple[str, int]],
                built: list[Built], settings: Settings, agree: dict[str, dict[str, Any]]) -> str:
    by_name = {b.name: b for b in built}
    long = prefill_metric(settings.prompt_tokens[-1])
    past = settings.prompt_tokens[0]
    lines = [f"work (IR, decode at past = {past}; * = the fused program's bytes, the engine "
             "has no IR; with bf16 weights the bf16-weight program's)",
             f"{'engine':{NAME_WIDTH}} {'thr':>3} {'MB/step':>9} {'launches':>8} "
             f"{'decode GB/s':>11} "
             f"{'GFLOP/s@' + str(settings.prompt_tokens[-1]):>13} {'tokens agree':>13}"]
    for engine, t in keys:
        b = by_name[engine]
        own = ENGINES[engine].work_is_own
        mb = f"{b.work.decode_bytes(past) / 1e6:8.1f}{' ' if own else '*'}"
        launches = f"{b.work.launches:8d}" if own else f"{'-':>8}"
        a = agree.get(engine)
        agree_text = f"{a['leading_equal']}/{a['of']} {a['reference']}" if a else "-"
        lines.append(f"{engine:{NAME_WIDTH}} {t:>3} {mb} {launches} "
                     f"{index[(engine, t, DECODE)].get('gb_per_s', 0):11.2f} "
                     f"{index[(engine, t, long)].get('gflop_per_s', 0):13.2f} {agree_text:>13}")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# the command


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engines", default=",".join(ENGINE_NAMES),
                        help="comma-separated engines (default: %(default)s)")
    parser.add_argument("--threads", default=",".join(map(str, sorted({1, os.cpu_count() or 1}))),
                        help="comma-separated thread counts (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"timed rounds after the warm-up (default {DEFAULT_ROUNDS}; "
                        f"smoke {SMOKE['rounds']})")
    parser.add_argument("--prompt-tokens", default=None,
                        help="comma-separated prefill prompt lengths; the smallest is also the "
                        "decode prompt (default 16,128; smoke 4,8)")
    parser.add_argument("--decode-tokens", type=int, default=None,
                        help=f"tokens generated per decode run (default {DEFAULT_DECODE}; "
                        f"smoke {SMOKE['decode_tokens']})")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny synthetic model, 2 rounds, a few tokens (seconds)")
    parser.add_argument("--model", default=None,
                        help="snapshot directory (default: the full-size synthetic model)")
    parser.add_argument("--results", default=str(results.RESULTS_PATH),
                        help="results file to append to (default: %(default)s)")
    parser.add_argument("--no-record", action="store_true", help="print only, append nothing")
    parser.add_argument("--no-bandwidth", action="store_true",
                        help="do not read the memory bandwidth in each round (the roofline "
                        "goals then use the newest clean probe record)")
    parser.add_argument("--compile-budget", type=float, default=DEFAULT_COMPILE_BUDGET,
                        help="seconds torch-compile may spend compiling for each thread "
                        "count (its build-time warm-up) before it is skipped (default: "
                        "%(default)s)")


@command("run", help="time decode and prefill of every engine (alternating rounds)",
         arguments=_arguments)
def run_command(args: argparse.Namespace) -> int:
    """Build the engines, measure, print the tables and append the records."""
    settings = settings_from(args)
    threads = Threads(strict=not settings.smoke)
    load_start = list(os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="nanocompile-bench-") as scratch:
        directory, label = resolve_model(settings, Path(scratch))
        from nanocompile.api import realigned
        from nanocompile.checkpoint.snapshot import Snapshot

        snapshot = Snapshot.open(directory)
        model = model_facts(snapshot, label)  # the snapshot's own files, whatever maps them
        if any(name.startswith(BF16_ENGINE) for name in settings.engines):
            # bf16 weights off 32-byte boundaries mapped through their realigned copy,
            # as nanocompile.load maps them (the same bytes for every engine)
            snapshot = realigned(snapshot)
        shared = Shared(snapshot, compile_budget=settings.compile_budget,
                        thread_counts=settings.threads)
        print(f"model: {label} ({directory}); {model['parameters']:,} parameters; "
              f"load {load_start[0]:.2f}", flush=True)
        built = build_engines(settings, shared)
        if not built:
            raise BenchError("no engine could be built")
        prompt = prompt_ids(shared.config, settings.prompt_tokens[-1])
        in_run: dict[int, list[float]] = {}
        slots = measure(built, settings, threads, prompt,
                        bandwidth=in_run if settings.bandwidth else None)
    if not slots:
        raise BenchError("every engine failed while running")
    built = [b for b in built if any(e == b.name for e, _ in slots)]
    history = [r for r in results.load_records(settings.results_path, kind="run")
               if r.get("payload", {}).get("model", {}).get("id") == model["id"]]
    measurements = summarize_slots(slots, built, shared, settings, history, model["id"])
    agree = agreement(slots)
    load_end = list(os.getloadavg())
    mapped = weights_mapped()
    facts = results.machine_facts()
    kind = facts["kind"]
    goals = evaluate_goals(
        measurements, kind=kind, threads=settings.threads,
        decode_bytes=next((b.work.decode_bytes(settings.prompt_tokens[0]) for b in built
                           if b.name == REFERENCE_ENGINE), None),
        bandwidth=roofline_bandwidth({t: v for t, v in in_run.items()
                                      if t == GOAL_DECODE_THREADS}, probe_bandwidth()),
        previous=previous_decode(history, kind=kind, model_id=model["id"],
                                 decode_prompt=settings.prompt_tokens[0],
                                 machine_id=facts["id"]),
        machine_id=facts["id"])
    def decode_bytes(name: str) -> int | None:
        return next((b.work.decode_bytes(settings.prompt_tokens[0]) for b in built
                     if b.name == name), None)

    ran = {m["engine"] for m in measurements}
    tokens = {e: s.tokens for (e, t), s in slots.items() if t == min(settings.threads)}
    bandwidth = roofline_bandwidth(in_run, probe_bandwidth(threads=settings.threads))
    goals17 = evaluate_goals_issue17(measurements, threads=settings.threads,
                                     decode_bytes=decode_bytes(BF16_ENGINE), bandwidth=bandwidth)
    goals18 = evaluate_goals_issue18(measurements, threads=settings.threads,
                                     decode_bytes=decode_bytes(INT8_ENGINE), bandwidth=bandwidth,
                                     tokens=tokens, dot_decode_bytes=decode_bytes(INT8_DOT_ENGINE))
    # the same goals judged on the -tuned twins, where they ran (this machine's schedules)
    goals17_tuned = evaluate_goals_issue17(
        measurements, threads=settings.threads, decode_bytes=decode_bytes(BF16_TUNED),
        bandwidth=bandwidth, engine=BF16_TUNED) if BF16_TUNED in ran else None
    goals18_tuned = evaluate_goals_issue18(
        measurements, threads=settings.threads, decode_bytes=decode_bytes(INT8_TUNED),
        bandwidth=bandwidth, tokens=tokens, engine=INT8_TUNED, dot_engine=INT8_DOT_TUNED,
        dot_decode_bytes=decode_bytes(INT8_DOT_TUNED),
    ) if {INT8_TUNED, INT8_DOT_TUNED} & ran else None
    print()
    print(format_tables(measurements, built, settings, agree))
    print(f"\nload average: {load_start[0]:.2f} at start, {load_end[0]:.2f} at end "
          f"({os.cpu_count()} CPUs); BLAS threads "
          f"{'set by threadpoolctl' if threads.controlled else 'NOT controlled'}")
    print(format_weights_mapped(mapped))
    if in_run:
        print("read bandwidth in the run (GB/s, per round): " + "; ".join(
            f"{t} thr " + " ".join(f"{v:.1f}" for v in values)
            for t, values in in_run.items()))
    print(format_goals(goals))
    print(format_goals_issue17(goals17))
    if goals17_tuned is not None:
        print(format_goals_issue17(goals17_tuned))
    print(format_goals_issue18(goals18))
    if goals18_tuned is not None:
        print(format_goals_issue18(goals18_tuned))
    if settings.record:
        context = {"run_id": uuid.uuid4().hex[:12], "model": model,
                   "settings": settings.as_dict(), "agreement": agree,
                   "loadavg_start": load_start, "loadavg_end": load_end,
                   "blas_threads_controlled": threads.controlled, "weights_mapped": mapped,
                   "bandwidth_in_run_gbs": {str(t): v for t, v in in_run.items()},
                   "goals_issue16": goals,
                   "goals_issue17": goals17, "goals_issue18": goals18,
                   "goals_issue17_tuned": goals17_tuned, "goals_issue18_tuned": goals18_tuned}
        n = write_records(measurements, built, settings, context, threads)
        print(f"appended {n} records to {settings.results_path}")
    return 0

"""``python -m bench growth``: how much a decode step slows down with the context,
measured step by step in pairs, nanocompile and llama.cpp the same way.

Issue 19's gate compares decode after a long prompt with decode after a short
one (``bench context``: a fresh run per prompt length, engines and lengths
rotated per round). On a shared machine the runs of one round still see
different neighbours; here every engine holds both generations at once in one
process, prefilled once each, and single decode steps then alternate between
them (short, long, long, short, ...), so every pair of steps is measured back
to back, and the engines take turns pair by pair (the order rotated every
pair). Each step is what generation times: one token in, the argmax of its
logits out (``Engine.forward`` for nanocompile; ``Llama.eval`` and the last
position's logits for llama.cpp, a context of its own per generation: its
binding holds one KV cache per context).

Engines: ``nanocompile`` in each weight format of ``--weights`` and the
llama.cpp peers ``llama-f32``, ``llama-bf16`` (f32 KV caches, like
nanocompile's) and ``llama-q8_0`` (llama.cpp's default f16 KV cache). The
prompts are prefilled once, at the largest thread count, and the thread counts
then decode in turn from where the last one stopped (a cache's contents do not
depend on the thread count), so "after 4,096" means after 4,096 to 4,096 plus
the steps already taken.

With tuned winners recorded, nanocompile runs a program per thread count,
each with the winners of its count and generations of its own
(``nanocompile_engines``); the hand schedules are one program for all.

Reported per engine and thread count: the medians and minima of each length's
steps, the ratio of the medians, the median of the paired ratios, and an exact
sign test of ``long <= gate x short`` over the pairs (the gate is issue 19's
1.15). Appended to bench/results.jsonl (kind "growth").
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import BenchError, command

GATE = 1.15  # issue 19: decode after the long prompt at most 1.15x decode after the short one
NANOCOMPILE = "nanocompile"
LLAMA_ENGINES = ("llama-f32", "llama-bf16", "llama-q8_0")
WEIGHTS = ("bf16", "f32", "int8", "int8-dot")

Step = Callable[[], None]
"""One decode step of a generation (its next token fed back)."""


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, default=None,
                        help="snapshot directory (default: the full-size synthetic one)")
    parser.add_argument("--engines", default=NANOCOMPILE,
                        help=f"comma-separated engines: {NANOCOMPILE} (once per --weights "
                             f"format), {', '.join(LLAMA_ENGINES)} (default: {NANOCOMPILE})")
    parser.add_argument("--threads", default="1",
                        help="comma-separated pool thread counts (default 1)")
    parser.add_argument("--short", type=int, default=128, help="the short prompt (default 128)")
    parser.add_argument("--long", type=int, default=4096, help="the long prompt (default 4096)")
    parser.add_argument("--steps", type=int, default=60,
                        help="decode steps per prompt, engine and thread count (default 60)")
    parser.add_argument("--weights", default=None,
                        help=f"nanocompile's weight formats, comma-separated, of "
                             f"{', '.join(WEIGHTS)} (default: the snapshot's)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file to append to (default bench/results.jsonl)")
    parser.add_argument("--no-append", action="store_true", help="do not append the result")


def _names(text: str, allowed: Sequence[str], option: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in allowed]
    if not names or unknown:
        raise BenchError(f"{option}: expected comma-separated names of {', '.join(allowed)}, "
                         f"got {text!r}")
    if len(set(names)) != len(names):
        raise BenchError(f"{option}: a name is given twice in {text!r}")
    return names


@dataclass
class Engine:
    """One engine of the run: how it starts a generation and sets its threads
    (``threads``: the one thread count it runs at, None: every count)."""

    name: str
    start: Callable[[Sequence[int], int], Step]  # (prompt, capacity) -> its decode step
    set_threads: Callable[[int], None]
    details: dict[str, Any]
    threads: int | None = None


def nanocompile_engine(model_dir: Path, weights: str | None, capacity: int,
                       threads: int | None = None) -> Engine:
    """nanocompile's compiled engine in the ``weights`` format (``None``: the
    snapshot's), through the API as generation uses it; ``threads``: loaded with
    ``NANOCOMPILE_THREADS`` at that count, so the program carries the tuner's
    winners recorded for it (as ``generate --threads N`` does), and run at it
    only (None: the pool's default count's winners, at every count)."""
    from nanocompile.api import load
    from nanocompile.backend.tuning_records import default_threads

    saved = os.environ.get("NANOCOMPILE_THREADS")
    if threads is not None:
        os.environ["NANOCOMPILE_THREADS"] = str(threads)
    try:
        model = load(model_dir, weights=weights, context=capacity)
        winners_for = default_threads()
    finally:
        if saved is None:
            os.environ.pop("NANOCOMPILE_THREADS", None)
        else:
            os.environ["NANOCOMPILE_THREADS"] = saved
    program = getattr(getattr(model.engine, "backend", None), "program", None)
    if program is None:
        raise BenchError("the model has no compiled program to time")
    engine = model.engine

    def start(ids: Sequence[int], size: int) -> Step:
        cache = engine.new_cache(size)
        token = [int(np.argmax(engine.forward(list(ids), cache)[-1]))]

        def step() -> None:
            token[0] = int(np.argmax(engine.forward([token[0]], cache, fresh=False)[-1]))
        return step

    return Engine(f"{NANOCOMPILE}-{model.weights}", start, program.set_threads,
                  {"weights": model.weights,
                   "tuning": os.environ.get("NANOCOMPILE_TUNING", "default"),
                   # the tuner's winners in the program: those recorded for
                   # winners_for_threads (nanocompile tune --threads N), if any
                   "tuned_kernels": model.tuned_winners(),
                   "winners_for_threads": winners_for}, threads)


def nanocompile_engines(model_dir: Path, weights: str | None, capacity: int,
                        threads: Sequence[int]) -> list[Engine]:
    """One engine per thread count, each with the winners recorded for its count
    (a tile that wins at 2 threads may lose at 1: ``bench run``'s ``-tuned``
    engines do the same; until session 22 one program, the default count's
    winners, ran at every count); a single engine for every count when no
    program carries a winner (the hand schedules are one program at any count),
    loaded once when no count has winners recorded on this machine."""
    if len(threads) > 1 and not any(_recorded_winners(t) for t in threads):
        return [nanocompile_engine(model_dir, weights, capacity)]
    per = [nanocompile_engine(model_dir, weights, capacity, t) for t in threads]
    if len(per) > 1 and not any(e.details["tuned_kernels"] for e in per):
        first = per[0]
        return [Engine(first.name, first.start, first.set_threads, first.details)]
    return per


def _recorded_winners(threads: int) -> bool:
    """This machine's tuning records hold a winner at ``threads`` (of any kernel)."""
    from nanocompile.backend.tuning_records import tuning_path, winners

    return bool(winners(tuning_path(), threads))


def llama_engine(snapshot_dir: Path, name: str) -> Engine:
    """A llama.cpp peer: a context of its own per generation (one KV cache each),
    its threads set through ``NANOCOMPILE_THREADS`` as in ``bench run``."""
    from bench import engines
    from bench import llama_engine as le

    try:
        le.require_llama_cpp()
        kind = le.ENGINE_KINDS[name]
        path = le.gguf_file(snapshot_dir, kind, log=lambda m: print(m, file=sys.stderr))
    except engines.EngineUnavailable as exc:
        raise BenchError(f"{name}: {exc}") from None
    f32_cache = kind in le.F32_CACHE_KINDS

    def start(ids: Sequence[int], size: int) -> Step:
        model = le.LlamaCppModel(path, f32_cache=f32_cache, n_ctx=size)  # the step holds it
        state = model.new_state(size)
        token = [model.next_token(list(ids), state)]

        def step() -> None:
            token[0] = model.next_token([token[0]], state)
        return step

    def set_threads(n: int) -> None:
        os.environ["NANOCOMPILE_THREADS"] = str(n)  # re-read by each llama.cpp step

    return Engine(name, start, set_threads,
                  {"gguf": str(path), "kv_cache": "f32" if f32_cache else "f16 (llama.cpp default)",
                   "llama_cpp_python": le.llama_cpp_version()})


def _details(engines: list[Engine]) -> dict[str, Any]:
    """An engine name's facts: its one engine's, or per thread count (``by_threads``)
    with the facts they share, when it has a program per count."""
    if len(engines) == 1:
        return engines[0].details
    shared = {k: v for k, v in engines[0].details.items()
              if all(e.details.get(k) == v for e in engines)}
    return {**shared, "by_threads": {str(e.threads): e.details for e in engines}}


def paired_steps(gens: dict[str, tuple[Step, Step]], steps: int
                 ) -> dict[str, tuple[list[float], list[float]]]:
    """``steps`` pairs of decode steps of each engine's (short, long) generations,
    ms each: per engine (short steps, long steps). Pair ``i`` of an engine is
    measured back to back, its order swapped every pair; the engines take turns,
    their order rotated every pair."""
    names = list(gens)
    times: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in names}
    for i in range(steps):
        for k in range(len(names)):
            name = names[(i + k) % len(names)]
            for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                step = gens[name][which]
                start = time.perf_counter()
                step()
                times[name][which].append(1e3 * (time.perf_counter() - start))
    return times


def summarize(short: list[float], long: list[float]) -> dict[str, Any]:
    """The record of one engine's paired steps at one thread count."""
    from bench import stats

    pairs = [b / a for a, b in zip(short, long, strict=True)]
    test = stats.sign_test(long, [GATE * a for a in short])
    return {"short_ms": stats.summarize(short), "long_ms": stats.summarize(long),
            "ratio_of_medians": stats.median(long) / stats.median(short),
            "ratio_of_minima": stats.minimum(long) / stats.minimum(short),
            "paired_ratio_median": stats.median(pairs),
            "gate": GATE, "within_gate": test.as_dict(),
            "short_steps": short, "long_steps": long}


def _line(name: str, t: int, short: int, long: int, r: dict[str, Any]) -> str:
    test = r["within_gate"]
    return (f"{name}, {t} thread(s): decode after {short} {r['short_ms']['median']:.2f} ms "
            f"(min {r['short_ms']['minimum']:.2f}), after {long} {r['long_ms']['median']:.2f} ms "
            f"(min {r['long_ms']['minimum']:.2f}); ratio of medians {r['ratio_of_medians']:.3f}, "
            f"paired {r['paired_ratio_median']:.3f}, minima {r['ratio_of_minima']:.3f}; within "
            f"{GATE}x in {test['wins']}/{test['n']} pairs (p = {test['p_value']:.3g})")


@command("growth", help="decode after a long prompt against after a short one, step pairs "
                        "alternated in one process, nanocompile and llama.cpp",
         arguments=_arguments)
def main(args: argparse.Namespace) -> int:
    from bench.probe import parse_threads

    threads = parse_threads(args.threads)
    names = _names(args.engines, (NANOCOMPILE, *LLAMA_ENGINES), "--engines")
    formats: list[str | None] = ([None] if args.weights is None
                                 else list(_names(args.weights, WEIGHTS, "--weights")))
    if args.weights is not None and NANOCOMPILE not in names:
        raise BenchError(f"--weights is nanocompile's; --engines {args.engines!r} has no "
                         f"{NANOCOMPILE}")
    if not 1 <= args.short < args.long:
        raise BenchError(f"--short must be at least 1 and below --long, got {args.short} and "
                         f"{args.long}")
    if not 2 <= args.steps <= 10_000:
        raise BenchError(f"--steps must be in 2..10000, got {args.steps}")
    capacity = args.long + args.steps * len(threads) + 1
    from bench.engines import full_synthetic_snapshot, prompt_ids
    from nanocompile.checkpoint import Snapshot

    snapshot_dir: Path = (args.model if args.model is not None
                          else full_synthetic_snapshot(lambda m: print(m, file=sys.stderr)))
    config = Snapshot.open(snapshot_dir).config
    engines: list[Engine] = []
    for name in names:
        if name == NANOCOMPILE:
            engines += [e for w in formats
                        for e in nanocompile_engines(snapshot_dir, w, capacity, threads)]
        else:
            engines.append(llama_engine(snapshot_dir, name))
    ids = prompt_ids(config, args.long)
    print(f"prefilling {args.short} and {args.long} tokens for {len(engines)} engine(s) at "
          f"{max(threads)} thread(s) ...", file=sys.stderr)
    saved = os.environ.get("NANOCOMPILE_THREADS")
    names_run = list(dict.fromkeys(e.name for e in engines))
    result: dict[str, Any] = {
        "engines": names_run, "short": args.short, "long": args.long,
        "steps": args.steps,
        # per engine its facts; one with a program per thread count: per count too
        "details": {n: _details([e for e in engines if e.name == n]) for n in names_run},
        "by_engine": {n: {} for n in names_run}}
    try:
        for e in engines:
            e.set_threads(max(threads))
        gens = {id(e): (e.start(ids[:args.short], capacity), e.start(ids, capacity))
                for e in engines}
        for t in threads:
            running = [e for e in engines if e.threads in (None, t)]
            for e in running:
                e.set_threads(t)
            print(f"{t} thread(s): {args.steps} pairs of decode steps per engine ...",
                  file=sys.stderr)
            times = paired_steps({e.name: gens[id(e)] for e in running}, args.steps)
            for e in running:
                r = summarize(*times[e.name])
                result["by_engine"][e.name][str(t)] = r
                print(_line(e.name, t, args.short, args.long, r))
    finally:
        if saved is None:
            os.environ.pop("NANOCOMPILE_THREADS", None)
        else:
            os.environ["NANOCOMPILE_THREADS"] = saved
    if not args.no_append:
        from bench import results

        record = results.make_record("growth", result, threads=threads)
        path = args.out if args.out is not None else results.RESULTS_PATH
        results.append_record(record, path)
        print(f"appended to {path}", file=sys.stderr)
    return 0

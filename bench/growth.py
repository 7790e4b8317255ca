"""``python -m bench growth``: how much a decode step slows down with the context,
measured step by step in pairs.

Issue 19's gate compares decode after a long prompt with decode after a short
one (``bench context``: a fresh run per prompt length, engines and lengths
rotated per round). On a shared machine the runs of one round still see
different neighbours; here both caches live in one process at once, prefilled
once each (the prompt in the API's chunks), and single decode steps then
alternate between them (short, long, long, short, ...), so every pair of steps
is measured back to back. Each step is what generation times: ``Engine.forward``
of one token and the argmax of its logits. Reported per thread count: the
medians and minima of each length's steps, the ratio of the medians, the median
of the paired ratios, and an exact sign test of ``long <= gate x short`` over
the pairs (the gate is issue 19's 1.15). Appended to bench/results.jsonl (kind
"growth"). nanocompile only: llama.cpp's Python binding holds one context per
model.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import BenchError, command

GATE = 1.15  # issue 19: decode after the long prompt at most 1.15x decode after the short one


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, default=None,
                        help="snapshot directory (default: the full-size synthetic one)")
    parser.add_argument("--threads", default="1",
                        help="comma-separated pool thread counts (default 1)")
    parser.add_argument("--short", type=int, default=128, help="the short prompt (default 128)")
    parser.add_argument("--long", type=int, default=4096, help="the long prompt (default 4096)")
    parser.add_argument("--steps", type=int, default=60,
                        help="decode steps per prompt and thread count (default 60)")
    parser.add_argument("--weights", choices=["bf16", "f32", "int8", "int8-dot"], default=None,
                        help="weight format (default: the snapshot's)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file to append to (default bench/results.jsonl)")
    parser.add_argument("--no-append", action="store_true", help="do not append the result")


def _threads(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise BenchError(f"--threads: expected comma-separated integers, got {text!r}") from None
    if not values or any(not 1 <= t <= 256 for t in values):
        raise BenchError(f"--threads: each count must be in 1..256, got {text!r}")
    return values


def paired_steps(engine: Any, short: int, long: int, steps: int, vocab: int
                 ) -> tuple[list[float], list[float]]:
    """``steps`` decode steps after a ``short`` and after a ``long`` prompt,
    alternating (ms each): (short steps, long steps), pair ``i`` measured back to
    back, the order swapped every pair."""
    ids = [int(i) for i in np.random.default_rng(0).integers(0, vocab, long)]
    state = {}
    for length in (short, long):
        cache = engine.new_cache(length + steps + 1)
        state[length] = [cache, int(np.argmax(engine.forward(ids[:length], cache)[-1]))]
    times: dict[int, list[float]] = {short: [], long: []}
    for i in range(steps):
        for length in ((short, long) if i % 2 == 0 else (long, short)):
            cache, token = state[length]
            start = time.perf_counter()
            token = int(np.argmax(engine.forward([token], cache, fresh=False)[-1]))
            times[length].append(1e3 * (time.perf_counter() - start))
            state[length][1] = token
    return times[short], times[long]


def summarize(short: list[float], long: list[float]) -> dict[str, Any]:
    """The record of one thread count's paired steps."""
    from bench import stats

    pairs = [b / a for a, b in zip(short, long, strict=True)]
    test = stats.sign_test(long, [GATE * a for a in short])
    return {"short_ms": stats.summarize(short), "long_ms": stats.summarize(long),
            "ratio_of_medians": stats.median(long) / stats.median(short),
            "ratio_of_minima": stats.minimum(long) / stats.minimum(short),
            "paired_ratio_median": stats.median(pairs),
            "gate": GATE, "within_gate": test.as_dict(),
            "short_steps": short, "long_steps": long}


@command("growth", help="decode after a long prompt against after a short one, step pairs "
                        "alternated in one process", arguments=_arguments)
def main(args: argparse.Namespace) -> int:
    threads = _threads(args.threads)
    if not 1 <= args.short < args.long:
        raise BenchError(f"--short must be at least 1 and below --long, got {args.short} and "
                         f"{args.long}")
    if not 2 <= args.steps <= 10_000:
        raise BenchError(f"--steps must be in 2..10000, got {args.steps}")
    from nanocompile.api import load

    model = load(args.model, weights=args.weights, context=args.long + args.steps + 1)
    program = getattr(getattr(model.engine, "backend", None), "program", None)
    if program is None:
        raise BenchError("the model has no compiled program to time")
    vocab = model.config.vocab_size
    result: dict[str, Any] = {"weights": model.weights, "short": args.short, "long": args.long,
                              "steps": args.steps,
                              "tuning": os.environ.get("NANOCOMPILE_TUNING", "default"),
                              "by_threads": {}}
    for t in threads:
        program.set_threads(t)
        print(f"{t} thread(s): prefilling {args.short} and {args.long} tokens, then "
              f"{args.steps} pairs of decode steps ...", file=sys.stderr)
        r = summarize(*paired_steps(model.engine, args.short, args.long, args.steps, vocab))
        result["by_threads"][str(t)] = r
        test = r["within_gate"]
        print(f"{t} thread(s), {model.weights}: decode after {args.short} "
              f"{r['short_ms']['median']:.2f} ms (min {r['short_ms']['minimum']:.2f}), after "
              f"{args.long} {r['long_ms']['median']:.2f} ms (min {r['long_ms']['minimum']:.2f}); "
              f"ratio of medians {r['ratio_of_medians']:.3f}, paired {r['paired_ratio_median']:.3f}"
              f", minima {r['ratio_of_minima']:.3f}; within {GATE}x in {test['wins']}/"
              f"{test['n']} pairs (p = {test['p_value']:.3g})")
    if not args.no_append:
        from bench import results

        record = results.make_record("growth", result, threads=threads)
        path = args.out if args.out is not None else results.RESULTS_PATH
        results.append_record(record, path)
        print(f"appended to {path}", file=sys.stderr)
    return 0

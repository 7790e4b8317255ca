"""``python -m bench profile``: where one step of the compiled model spends its time.

Runs the full-size synthetic model (or ``--model DIR``) compiled with the
default schedules, and profiles one decode step and one prefill through the
profiling C entry (timing every launch and the whole entry). Printed per
step: the wall time of the whole ``Engine.forward`` call (as generation calls
it), the time inside kernels, and the rest, split into the time outside the C
entry (Python, ctypes, argument checks, with ``--kv inputs`` the KV-cache
copy) and inside it outside the launches (the entry's requirement checks;
the profiler reads the clock once between two launches and counts the read
in the launch before it, ~25 ns a launch: the plain entry reads no clock),
then the kernel time by kernel, largest first. A decode step's launches are
copied out after the timed call (a longer prompt's steps, each before the
next step overwrites them). Medians over ``--rounds``; appended
to bench/results.jsonl (kind "profile").

``--weights bf16`` compiles the bf16-weight graph bound to the snapshot's
mapped bf16 tensors (``SnapshotWeights(snap, "bf16")``), ``--weights f32``
the graph of f32 weights widened at load; the default is the snapshot's
format (``inference.engine.default_weights``: bf16 for a bf16 snapshot).
``--weights int8`` / ``int8-dot`` compile the snapshot's graph after
``quantize-int8`` (spec §5's kernel A / B, the int8 embedding and LM head, as
``nanocompile.load(weights=...)`` does) bound to the int8 cache's matrices.
The program is scheduled with this machine's tuned winners for ``--threads``
when the tuning records hold any (``NANOCOMPILE_TUNING=off``: the hand
schedules), as ``nanocompile generate --threads`` runs it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from bench import BenchError, command


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, default=None,
                        help="snapshot directory (default: the full-size synthetic one)")
    parser.add_argument("--threads", type=int, default=1, help="pool threads (default 1)")
    parser.add_argument("--rounds", type=int, default=5, help="profiled steps (default 5)")
    parser.add_argument("--prompt", type=int, default=16, help="prefill tokens (default 16)")
    parser.add_argument("--no-schedule", action="store_true",
                        help="profile the phase-3 program (no schedules)")
    parser.add_argument("--weights", choices=["bf16", "f32", "int8", "int8-dot"], default=None,
                        help="weight format (default: the snapshot's, bf16 for a bf16 "
                             "snapshot; int8 / int8-dot: spec 5's kernel A / B, quantized "
                             "from the snapshot as nanocompile generate --weights does)")
    parser.add_argument("--int8-dot-head", action="store_true",
                        help="with --weights int8-dot: the int8 LM head on kernel B too "
                             "(nanocompile generate --int8-dot-head)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file to append to (default bench/results.jsonl)")
    parser.add_argument("--no-append", action="store_true", help="do not append the result")
    parser.add_argument("--kv", choices=["state", "inputs"], default="state",
                        help="the KV cache as the program's state, run by a StepRunner (one C "
                             "call a step: the default, as the API runs it) or as inputs "
                             "copied out and appended in Python each step (the form before "
                             "issue 19)")


ENTRY = "<the C entry>"  # a pseudo-launch: the whole C entry's time, launches and gaps


def _profiled_forward(engine: Any, program: Any, ids: list[int], cache: Any
                      ) -> tuple[float, list[tuple[str, int]]]:
    """One ``Engine.forward`` through the profiling entry: (wall s, launches)."""
    if engine.kv == "state":
        return _profiled_state_forward(engine, program, ids, cache)
    captured: list[list[tuple[str, int]]] = []
    backend = engine.backend
    original = backend.run

    def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ns = program.profile_slots()
        outputs, launches = program.profile(inputs, ns)
        captured.append([*launches, (ENTRY, int(ns[-1]))])
        return outputs

    backend.run = run
    try:
        t0 = time.perf_counter()
        engine.forward(ids, cache)
        wall = time.perf_counter() - t0
    finally:
        backend.run = original
    return wall, _summed(captured)


def _summed(steps: list[list[tuple[str, int]]]) -> list[tuple[str, int]]:
    """The launches of a prompt run in several steps (longer than a chunk), each
    launch's nanoseconds summed over the steps."""
    return [(name, sum(step[i][1] for step in steps)) for i, (name, _) in enumerate(steps[0])]


def _profiled_state_forward(engine: Any, program: Any, ids: list[int], cache: Any
                            ) -> tuple[float, list[tuple[str, int]]]:
    """One ``Engine.forward`` of the state program, as generation calls it
    (``fresh=False``), its step runner on the profiling entry (made by a first
    call on a throwaway copy of the cache's shape, so the timed call is a
    steady-state step)."""
    runner = cache.runners.get(id(engine.backend))
    if runner is None:  # make the cache's runner outside the timed call
        runner = engine.backend.runner({"key_cache": cache.keys, "value_cache": cache.values},
                                       min(engine.chunk or cache.capacity, cache.capacity))
        cache.runners[id(engine.backend)] = runner
    ns = program.profile_slots()
    copies: list[np.ndarray] = []
    step = runner.step
    calls = 0

    def profiled(*args: Any) -> Any:  # each step of a prompt longer than a chunk
        nonlocal calls
        if calls:  # the step before this one's launches, before they are overwritten
            copies.append(ns.copy())
        calls += 1
        return step(*args)

    runner.profile = ns
    runner.step = profiled
    try:
        t0 = time.perf_counter()
        engine.forward(ids, cache, fresh=False)
        wall = time.perf_counter() - t0
    finally:
        runner.profile = None
        del runner.step  # the class's method again
    if calls:  # the last step's, copied outside the timed call (a decode step's only one)
        copies.append(ns.copy())
    steps = [[*zip(program.spec.launches, (int(v) for v in c), strict=False), (ENTRY, int(c[-1]))]
             for c in copies]
    return wall, _summed(steps)


def _quantize_text(fmt: str, int8_dot_head: bool) -> str:
    """The ``quantize-int8`` text ``nanocompile.load(weights=fmt)`` runs (the int8
    embedding too; "" for bf16 and f32)."""
    from nanocompile.api import INT8_FORMATS
    from nanocompile.compiler import int8_pass

    if int8_dot_head and fmt != "int8-dot":
        raise BenchError(f"--int8-dot-head needs --weights int8-dot, got {fmt}")
    if fmt not in INT8_FORMATS:
        return ""
    return int8_pass(True, INT8_FORMATS[fmt], "b" if int8_dot_head else "a")


def profile_steps(model: Path | None, threads: int, rounds: int, prompt: int,
                  schedule: bool, weights: str | None = None, kv: str = "state",
                  int8_dot_head: bool = False) -> dict[str, Any]:
    """Profile ``rounds`` prefill and decode steps (``weights``: "bf16", "f32", "int8",
    "int8-dot" or None, the snapshot's format; ``int8_dot_head``: with "int8-dot",
    the LM head kernel B too; ``kv``: the graph's KV form, models.qwen2.KV_FORMS)."""
    from nanocompile.api import (
        INT8_FORMATS,
        PREFILL_CHUNK,
        ensure_default_snapshot,
        int8_weights,
        realigned,
    )
    from nanocompile.backend.runtime import CompiledBackend
    from nanocompile.checkpoint.snapshot import Snapshot
    from nanocompile.compiler import compile_program, quantize_graph
    from nanocompile.inference.engine import (
        Engine,
        SnapshotWeights,
        default_weights,
        wide_weights,
    )
    from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

    directory = model if model is not None else ensure_default_snapshot()
    from nanocompile.checkpoint.snapshot import SnapshotError

    try:
        snap = Snapshot.open(directory)
    except SnapshotError as e:
        raise BenchError(str(e)) from None
    fmt = default_weights(snap) if weights is None else weights
    quantize = _quantize_text(fmt, int8_dot_head)
    if fmt == "bf16" and default_weights(snap) != "bf16":
        raise BenchError(f"--weights bf16: {directory} stores no tensor in bf16 "
                         "(use --weights f32)")
    # the format the graph declares its weights in: int8's are quantized from it
    base = default_weights(snap) if fmt in INT8_FORMATS else fmt
    if fmt == "bf16":
        snap = realigned(snap)  # as nanocompile.load maps it
    wide = wide_weights(snap) if base == "bf16" else frozenset()
    graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=True, weights=base, wide=wide,
                                                       kv=kv))
    bound: Any = SnapshotWeights(snap, base)
    if quantize:
        bound = int8_weights(snap, quantize_graph(graph, quantize, verify=False), bound)
    print(f"bench profile: compiling ({fmt} weights) ...", file=sys.stderr)
    # the winners of the thread count profiled (until session 26 the default
    # count's: `--threads 1` ran the 2-thread winners on a 2-CPU machine)
    program = compile_program(graph, bound, schedule=schedule, quantize=quantize,
                              threads=threads)
    program.set_threads(threads)
    engine = Engine(snap.config, CompiledBackend(program), chunk=PREFILL_CHUNK, kv=kv)
    ids = [int(i) for i in np.random.default_rng(0).integers(100, 150_000, prompt)]
    result: dict[str, Any] = {"threads": program.threads(), "schedule": schedule,
                              "weights": fmt, "kv": kv, "quantize": quantize}
    per: dict[str, list[tuple[float, list[tuple[str, int]]]]] = {"prefill": [], "decode": []}
    for r in range(rounds + 1):  # round 0 warms up
        cache = engine.new_cache(prompt + 2)
        pre = _profiled_forward(engine, program, ids, cache)
        dec = _profiled_forward(engine, program, [ids[0]], cache)
        if r:
            per["prefill"].append(pre)
            per["decode"].append(dec)
    for step, samples in per.items():
        walls = [w for w, _ in samples]
        kernels = [sum(ns for name, ns in launches if name != ENTRY) / 1e9
                   for _, launches in samples]
        entries = [dict(launches)[ENTRY] / 1e9 for _, launches in samples]
        by_kernel: dict[str, list[float]] = defaultdict(list)
        for _, launches in samples:
            totals: dict[str, int] = defaultdict(int)
            for name, ns in launches:
                if name == ENTRY:
                    continue
                totals[name] += ns
            for name, ns in totals.items():
                by_kernel[name].append(ns / 1e6)
        outside = [(w - k) * 1e3 for w, k in zip(walls, kernels, strict=True)]
        python = [(w - e) * 1e3 for w, e in zip(walls, entries, strict=True)]
        gaps = [(e - k) * 1e3 for e, k in zip(entries, kernels, strict=True)]
        result[step] = {
            # outside the C entry: Python, ctypes, the checks and copies of a step
            "outside_entry_ms": statistics.median(python),
            "outside_entry_min_ms": min(python),
            # inside the entry between the launches (the requirements, return-code
            # checks and the profiler's own clock reads)
            "between_launches_ms": statistics.median(gaps),
            "wall_ms": statistics.median(walls) * 1e3,
            "kernels_ms": statistics.median(kernels) * 1e3,
            "outside_ms": statistics.median(outside),
            "outside_min_ms": min(outside),
            "outside_max_ms": max(outside),
            "launches": len(samples[0][1]) - 1,
            "by_kernel_ms": dict(sorted(((k, statistics.median(v)) for k, v in
                                         by_kernel.items()), key=lambda kv: -kv[1])),
        }
    return result


@command("profile", help="time inside kernels vs outside, per kernel, for one step",
         arguments=_arguments)
def main(args: argparse.Namespace) -> int:
    if args.rounds < 1 or args.threads < 1 or args.prompt < 1:
        raise BenchError("--rounds, --threads and --prompt must be >= 1")
    result = profile_steps(args.model, args.threads, args.rounds, args.prompt,
                           not args.no_schedule, args.weights, args.kv, args.int8_dot_head)
    print(f"threads {result['threads']}, schedules {'on' if result['schedule'] else 'off'}, "
          f"{result['weights']} weights, KV cache as {result['kv']}")
    for step in ("decode", "prefill"):
        r = result[step]
        label = "decode (1 token)" if step == "decode" else f"prefill ({args.prompt} tokens)"
        print(f"{label}: wall {r['wall_ms']:.2f} ms, kernels {r['kernels_ms']:.2f} ms "
              f"({100 * r['kernels_ms'] / r['wall_ms']:.1f} %), outside (median of the steps) "
              f"{r['outside_ms']:.3f} ms [min {r['outside_min_ms']:.3f}, max "
              f"{r['outside_max_ms']:.3f}], {r['launches']} launches")
        print(f"    outside the C entry (Python, ctypes) {r['outside_entry_ms']:.3f} ms "
              f"[min {r['outside_entry_min_ms']:.3f}], in the C entry outside the launches "
              f"(its checks) {r['between_launches_ms']:.3f} ms")
        for name, ms in list(r["by_kernel_ms"].items())[:8]:
            print(f"    {name:<20} {ms:8.2f} ms  {100 * ms / r['kernels_ms']:5.1f} %")
    if not args.no_append:
        from bench import results

        record = results.make_record("profile", {"profile": result, "rounds": args.rounds,
                                                 "prompt_tokens": args.prompt},
                                     threads=result["threads"])
        path = args.out if args.out is not None else results.RESULTS_PATH
        results.append_record(record, path)
        print(f"appended to {path}", file=sys.stderr)
    return 0

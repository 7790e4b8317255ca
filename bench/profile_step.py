"""``python -m bench profile``: where one step of the compiled model spends its time.

Runs the full-size synthetic model (or ``--model DIR``) compiled with the
default schedules, and profiles one decode step and one prefill through
``CompiledProgram.profile`` (the C entry timing every launch). Printed per
step: the wall time of the whole ``Engine.forward`` call, the time inside
kernels, and the rest (Python, ctypes, argument checks, the KV-cache copy),
then the kernel time by kernel, largest first. Medians over ``--rounds``.

``--weights bf16`` compiles the bf16-weight graph bound to the snapshot's
mapped bf16 tensors (``SnapshotWeights(snap, "bf16")``), ``--weights f32``
the graph of f32 weights widened at load; the default is the snapshot's
format (``inference.engine.default_weights``: bf16 for a bf16 snapshot).
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
    parser.add_argument("--weights", choices=["bf16", "f32"], default=None,
                        help="weight format (default: the snapshot's, bf16 for a bf16 snapshot)")


def _profiled_forward(engine: Any, program: Any, ids: list[int], cache: Any
                      ) -> tuple[float, list[tuple[str, int]]]:
    """One ``Engine.forward`` through the profiling entry: (wall s, launches)."""
    captured: list[list[tuple[str, int]]] = []
    backend = engine.backend
    original = backend.run

    def run(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs, launches = program.profile(inputs)
        captured.append(launches)
        return outputs

    backend.run = run
    try:
        t0 = time.perf_counter()
        engine.forward(ids, cache)
        wall = time.perf_counter() - t0
    finally:
        backend.run = original
    return wall, captured[0]


def profile_steps(model: Path | None, threads: int, rounds: int, prompt: int,
                  schedule: bool, weights: str | None = None) -> dict[str, Any]:
    """Profile ``rounds`` prefill and decode steps (``weights``: "bf16", "f32" or None,
    the snapshot's format)."""
    from nanocompile.api import ensure_default_snapshot
    from nanocompile.backend.runtime import CompiledBackend
    from nanocompile.checkpoint.snapshot import Snapshot
    from nanocompile.compiler import compile_program
    from nanocompile.inference.engine import (
        Engine,
        SnapshotWeights,
        default_weights,
        wide_weights,
    )
    from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

    directory = model if model is not None else ensure_default_snapshot()
    snap = Snapshot.open(directory)
    fmt = default_weights(snap) if weights is None else weights
    if fmt == "bf16" and default_weights(snap) != "bf16":
        raise BenchError(f"--weights bf16: {directory} stores no tensor in bf16 "
                         "(use --weights f32)")
    wide = wide_weights(snap) if fmt == "bf16" else frozenset()
    graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=True, weights=fmt, wide=wide))
    print(f"bench profile: compiling ({fmt} weights) ...", file=sys.stderr)
    program = compile_program(graph, SnapshotWeights(snap, fmt), schedule=schedule)
    program.set_threads(threads)
    engine = Engine(snap.config, CompiledBackend(program))
    ids = [int(i) for i in np.random.default_rng(0).integers(100, 150_000, prompt)]
    result: dict[str, Any] = {"threads": program.threads(), "schedule": schedule,
                              "weights": fmt}
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
        kernels = [sum(ns for _, ns in launches) / 1e9 for _, launches in samples]
        by_kernel: dict[str, list[float]] = defaultdict(list)
        for _, launches in samples:
            totals: dict[str, int] = defaultdict(int)
            for name, ns in launches:
                totals[name] += ns
            for name, ns in totals.items():
                by_kernel[name].append(ns / 1e6)
        result[step] = {
            "wall_ms": statistics.median(walls) * 1e3,
            "kernels_ms": statistics.median(kernels) * 1e3,
            "launches": len(samples[0][1]),
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
                           not args.no_schedule, args.weights)
    print(f"threads {result['threads']}, schedules {'on' if result['schedule'] else 'off'}, "
          f"{result['weights']} weights")
    for step in ("decode", "prefill"):
        r = result[step]
        outside = r["wall_ms"] - r["kernels_ms"]
        label = "decode (1 token)" if step == "decode" else f"prefill ({args.prompt} tokens)"
        print(f"{label}: wall {r['wall_ms']:.1f} ms, kernels {r['kernels_ms']:.1f} ms "
              f"({100 * r['kernels_ms'] / r['wall_ms']:.1f} %), outside {outside:.1f} ms, "
              f"{r['launches']} launches")
        for name, ms in list(r["by_kernel_ms"].items())[:8]:
            print(f"    {name:<20} {ms:8.2f} ms  {100 * ms / r['kernels_ms']:5.1f} %")
    return 0

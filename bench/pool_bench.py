"""The thread pool's costs: per-call overhead and a memory-bound sum, 1 vs 2 threads.

Run from the repository root (not a ``python -m bench`` command)::

    python -m bench.pool_bench [--rounds 15] [--sum-mb 256] [--no-record]

A C harness pastes ``POOL_C`` after the C target's prelude and is built by
``compile_library`` three times: as shipped (a waiting thread polls for up to
50 µs with ``sched_yield`` between reads, then sleeps), with
``NC_POOL_RELAX() = pause`` (a classic pause-instruction spin for 50 µs, the
design the shipped one replaced) and with ``NC_POOL_SPIN_NS 0`` (every wait
sleeps on the condition variable at once). Each library has its own pool. Every round measures every
engine back to back, timed inside C so ctypes is not in the figure: each call
between two ``clock_gettime`` reads (their ~20 ns are in every figure), and the
whole loop of calls. The per-call median (p50) shows the mechanism; the loop's
mean per call adds the tail, which on a shared machine is dominated by a
worker losing its CPU for milliseconds (the caller waits for its chunk).
Engines:

- ``direct``: the task function called once over [0, n), no pool at all;
- ``pool``: ``nc_parallel_for`` on the persistent pool (1 or 2 threads);
- ``pool-pause``: the same with a pause-instruction spin;
- ``pool-sleep``: the same with no spinning;
- ``spawn``: the same partition on threads created and joined in every call
  (what a runtime without a pool does).

Workloads: ``empty`` (a task that returns at once: pure dispatch cost),
``tiny`` (``y = x * a + b`` on 16384 floats, 64 KiB per array, about 2 µs
serial) and ``sum`` (a float sum in four 8-lane accumulators over ``--sum-mb``
MB of a NumPy array: memory bound, GB/s, one call per round). Reports, per
engine, the median and minimum over rounds with their spread, the pooled
p90/p99/p99.9 per call, and appends one record (kind ``pool``) to
``bench/results.jsonl``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import sys
from typing import Any

import numpy as np

from bench import results, stats
from nanocompile.backend.gcc import compile_library
from nanocompile.backend.pool import PoolControl
from nanocompile.targets.c import PRELUDE
from nanocompile.targets.c_runtime import POOL_C

TINY_N = 16384
EMPTY_N = 1024
ENGINES = ("direct", "pool", "pool-pause", "pool-sleep", "spawn")
WORKLOADS = {"empty": 0, "tiny": 1, "sum": 2}
PAUSE = "__builtin_ia32_pause()" if platform.machine() in ("x86_64", "i686") else "(void)0"
POOL_DESIGN = "sched_yield poll up to 50 us, then condvar sleep"  # what engine "pool" is

BENCH_C = r"""
#include <stdatomic.h>

typedef float nb_v8f __attribute__((vector_size(32)));

typedef struct {
  const float *x;
  float *y;
  double partial[NC_POOL_MAX_THREADS];
  atomic_int slot;
} nb_ctx;

static void nb_empty(void *ctx, int64_t begin, int64_t end) { (void)ctx; (void)begin; (void)end; }

static void nb_tiny(void *vctx, int64_t begin, int64_t end) {
  nb_ctx *c = (nb_ctx *)vctx;
  for (int64_t i = begin; i < end; ++i) c->y[i] = c->x[i] * 1.0001f + 0.5f;
}

/* Four 8-lane accumulators (an explicit reassociation: this is a bandwidth probe). */
static void nb_sum(void *vctx, int64_t begin, int64_t end) {
  nb_ctx *c = (nb_ctx *)vctx;
  nb_v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
  int64_t i = begin;
  for (; i + 32 <= end; i += 32) {
    nb_v8f v0, v1, v2, v3;
    memcpy(&v0, c->x + i, 32);
    memcpy(&v1, c->x + i + 8, 32);
    memcpy(&v2, c->x + i + 16, 32);
    memcpy(&v3, c->x + i + 24, 32);
    a0 += v0; a1 += v1; a2 += v2; a3 += v3;
  }
  double s = 0;
  for (int k = 0; k < 8; ++k) s += (double)a0[k] + (double)a1[k] + (double)a2[k] + (double)a3[k];
  for (; i < end; ++i) s += c->x[i];
  c->partial[atomic_fetch_add(&c->slot, 1)] = s;
}

static nc_task_fn nb_fn(int32_t work) {
  return work == 0 ? nb_empty : (work == 1 ? nb_tiny : nb_sum);
}

typedef struct {
  nc_task_fn fn;
  void *ctx;
  int64_t begin, end;
} nb_spawned;

static void *nb_spawn_main(void *arg) {
  nb_spawned *s = (nb_spawned *)arg;
  s->fn(s->ctx, s->begin, s->end);
  return NULL;
}

/* The pool's partition, on threads created and joined in this call. */
static int32_t nb_spawn_for(int64_t n, int64_t grain, int32_t threads, nc_task_fn fn,
                            void *ctx) {
  const int32_t k = nc_pool_chunks(n, grain, threads);
  pthread_t tid[NC_POOL_MAX_THREADS];
  nb_spawned job[NC_POOL_MAX_THREADS];
  for (int32_t i = 1; i < k; ++i) {
    job[i].fn = fn;
    job[i].ctx = ctx;
    nc_pool_chunk(n, k, i, &job[i].begin, &job[i].end);
    if (pthread_create(&tid[i], NULL, nb_spawn_main, &job[i]) != 0) return -1;
  }
  int64_t begin, end;
  nc_pool_chunk(n, k, 0, &begin, &end);
  fn(ctx, begin, end);
  for (int32_t i = 1; i < k; ++i) pthread_join(tid[i], NULL);
  return 0;
}

/* `calls` calls of one engine (0 direct, 1 pool, 2 spawn with `threads`) on one
   workload; lat[i] gets call i's nanoseconds (clock_gettime around it). Returns the
   nanoseconds of the whole loop, or -1; *result gets the last call's sum. */
int64_t nb_run(int32_t engine, int32_t work, int64_t calls, int64_t n, int32_t threads,
               const float *x, float *y, int64_t *lat, double *result) {
  static nb_ctx c;
  c.x = x;
  c.y = y;
  const nc_task_fn fn = nb_fn(work);
  const int64_t start = nc_pool_now_ns();
  for (int64_t r = 0; r < calls; ++r) {
    atomic_store(&c.slot, 0);
    int32_t rc = 0;
    const int64_t t0 = nc_pool_now_ns();
    if (engine == 0) fn(&c, 0, n);
    else if (engine == 1) rc = nc_parallel_for(n, 1, fn, &c);
    else rc = nb_spawn_for(n, 1, threads, fn, &c);
    lat[r] = nc_pool_now_ns() - t0;
    if (rc != 0) return -1;
  }
  const int64_t elapsed = nc_pool_now_ns() - start;
  double s = 0;
  for (int i = 0; i < atomic_load(&c.slot); ++i) s += c.partial[i];
  *result = s;
  return elapsed;
}
"""


class Harness:
    """One build of the bench harness (its own pool)."""

    def __init__(self, prefix: str = "") -> None:
        source = PRELUDE + prefix + POOL_C + BENCH_C
        self.lib = compile_library(source, name="pool_bench", sanitize=False).load()
        self.pool = PoolControl(self.lib)
        f32p = np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")
        i64p = np.ctypeslib.ndpointer(np.int64, flags="C_CONTIGUOUS")
        self.lib.nb_run.restype = ctypes.c_int64
        self.lib.nb_run.argtypes = [ctypes.c_int32, ctypes.c_int32, ctypes.c_int64,
                                    ctypes.c_int64, ctypes.c_int32, f32p, f32p, i64p,
                                    ctypes.POINTER(ctypes.c_double)]

    def run(self, engine: str, work: str, calls: int, x: np.ndarray, y: np.ndarray,
            threads: int) -> tuple[float, np.ndarray, float]:
        """Mean ns per call over the loop, each call's ns, and the last sum."""
        n = {"empty": EMPTY_N, "tiny": TINY_N, "sum": x.size}[work]
        code = {"direct": 0, "pool": 1, "pool-pause": 1, "pool-sleep": 1, "spawn": 2}[engine]
        lat = np.zeros(calls, np.int64)
        out = ctypes.c_double(0.0)
        ns = self.lib.nb_run(code, WORKLOADS[work], calls, n, threads, x, y, lat,
                             ctypes.byref(out))
        if ns < 0:
            raise RuntimeError(f"nb_run failed ({engine}, {work})")
        return ns / calls, lat, out.value


CALLS = {"empty": {"direct": 100000, "pool": 20000, "pool-pause": 5000, "pool-sleep": 5000,
                   "spawn": 1000},
         "tiny": {"direct": 20000, "pool": 10000, "pool-pause": 5000, "pool-sleep": 5000,
                  "spawn": 1000},
         "sum": dict.fromkeys(ENGINES, 1)}


def cases(threads: tuple[int, ...]) -> list[tuple[str, str, int]]:
    """(workload, engine, threads) in the order every round measures them."""
    out = []
    for t in threads:
        for work in WORKLOADS:
            for engine in ENGINES:
                if t == 1 and engine not in ("direct", "pool"):
                    continue  # at 1 thread every pool runs the same serial path
                if t > 1 and engine == "direct":
                    continue
                if work == "sum" and engine not in ("direct", "pool"):
                    continue  # call overhead is invisible at 256 MB
                out.append((work, engine, t))
    return out


def measure(rounds: int, sum_mb: int, threads: tuple[int, ...]) -> list[dict[str, Any]]:
    libs = {"pool": Harness(),
            "pool-pause": Harness(f"#define NC_POOL_RELAX() {PAUSE}\n"),
            "pool-sleep": Harness("#define NC_POOL_SPIN_NS 0\n")}
    x = np.ones(sum_mb * 2**20 // 4, np.float32)
    x[::7] = 0.25  # a known sum (float lanes hold it to 1e-6 up to 1 GB)
    expected_sum = float(np.sum(x, dtype=np.float64))
    small_x = np.linspace(0, 1, TINY_N, dtype=np.float32)
    small_y = np.zeros(TINY_N, np.float32)
    means: dict[tuple[str, str, int], list[float]] = {}
    p50s: dict[tuple[str, str, int], list[float]] = {}
    every: dict[tuple[str, str, int], list[np.ndarray]] = {}
    for r in range(rounds):
        for t in threads:
            for lib in libs.values():
                lib.pool.set_threads(t)
            for work, engine, tt in cases(threads):
                if tt != t:
                    continue
                lib = libs.get(engine, libs["pool"])
                arrays = (x, x) if work == "sum" else (small_x, small_y)
                calls = CALLS[work][engine]
                lib.run(engine, work, max(1, calls // 20), *arrays, t)  # warm up
                mean, lat, total = lib.run(engine, work, calls, *arrays, t)
                if work == "sum" and abs(total - expected_sum) > 1e-6 * expected_sum:
                    raise RuntimeError(f"sum {total} != {expected_sum}")
                key = (work, engine, t)
                means.setdefault(key, []).append(mean)
                p50s.setdefault(key, []).append(float(np.median(lat)))
                every.setdefault(key, []).append(lat)
        print(f"round {r + 1}/{rounds}", file=sys.stderr)
    for lib in libs.values():
        lib.pool.shutdown()
    measurements = []
    for key in cases(threads):
        work, engine, t = key
        base = {"engine": engine, "workload": work, "threads": t}
        if work == "sum":
            gbs = [sum_mb * 2**20 / (v * 1e-9) / 1e9 for v in means[key]]
            measurements.append({**base, "metric": "sum_gb_per_s", **stats.summarize(gbs)})
            continue
        pooled = np.concatenate(every[key])
        tail = {f"p{q}": float(np.percentile(pooled, q)) for q in (90, 99, 99.9)}
        measurements.append({**base, "metric": "ns_per_call_mean", "calls": CALLS[work][engine],
                             **stats.summarize(means[key])})
        measurements.append({**base, "metric": "ns_per_call_p50", "calls": CALLS[work][engine],
                             **stats.summarize(p50s[key]), "pooled": tail})
    return measurements


def table(measurements: list[dict[str, Any]]) -> str:
    """Markdown: one row per (workload, engine, threads)."""
    rows: dict[tuple[str, str, int], dict[str, dict[str, Any]]] = {}
    for m in measurements:
        rows.setdefault((m["workload"], m["engine"], m["threads"]), {})[m["metric"]] = m
    lines = ["| workload | engine | threads | p50 ns/call (median, min over rounds) | "
             "p99 ns | mean ns/call (median, min) | GB/s (median, max) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for (work, engine, t), ms in rows.items():
        if "sum_gb_per_s" in ms:
            g = ms["sum_gb_per_s"]
            lines.append(f"| {work} | {engine} | {t} | | | | {g['median']:.2f}, "
                         f"{g['maximum']:.2f} max |")
            continue
        p50, mean = ms["ns_per_call_p50"], ms["ns_per_call_mean"]
        lines.append(f"| {work} | {engine} | {t} | {p50['median']:.0f}, {p50['minimum']:.0f} | "
                     f"{p50['pooled']['p99']:.0f} | {mean['median']:.0f}, "
                     f"{mean['minimum']:.0f} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pool_bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sum-mb", type=int, default=256)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-record", action="store_true",
                        help="do not append to bench/results.jsonl")
    args = parser.parse_args(argv)
    if args.rounds < 1 or not 1 <= args.sum_mb <= 1024 or \
            any(not 1 <= t <= 256 for t in args.threads):
        parser.error("--rounds must be >= 1, --sum-mb in 1..1024, --threads in 1..256")
    measurements = measure(args.rounds, args.sum_mb, tuple(args.threads))
    print(table(measurements))
    if not args.no_record:
        payload = {"design": POOL_DESIGN, "rounds": args.rounds, "sum_mb": args.sum_mb,
                   "tiny_n": TINY_N, "empty_n": EMPTY_N, "measurements": measurements,
                   "env_threads": os.environ.get("NANOCOMPILE_THREADS")}
        record = results.make_record("pool", payload, threads=list(args.threads))
        results.append_record(record)
        print(json.dumps({"recorded": "bench/results.jsonl", "kind": "pool"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

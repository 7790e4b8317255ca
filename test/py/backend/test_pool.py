"""backend/pool.py: the persistent thread pool pasted into every generated library.

A small C harness pastes `POOL_C`, is built by `gcc.compile_library` (in a
cache under tmp) and loaded with ctypes. Every loop is checked against the
partition the pool promises, computed here independently: ``k = min(T,
max(1, n // grain))`` chunks, ``n // k`` iterations each plus one for the
first ``n % k``, chunk ``i`` on thread ``i``. Thread counts come from
``/proc/self/task`` and from the pool's own count of ``pthread_create`` calls.
The environment variable and the default count are checked in child
processes; the whole pool also runs under ThreadSanitizer as a standalone
program.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from nanocompile.backend import gcc
from nanocompile.backend.pool import MAX_THREADS, THREADS_ENV, PoolControl, env_threads
from nanocompile.targets.c import PRELUDE
from nanocompile.targets.c_runtime import POOL_C

THREAD_COUNTS = (1, 2, 3, 8)
SIZES = (0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 64, 65, 97, 101, 1009, 4093, 65537, 10**6)
GRAINS = (1, 8, 64, 1000)

HARNESS_C = r"""
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
  int32_t *visits;
  int64_t *chunk_begin, *chunk_end;
  int32_t *chunk_tid;
  atomic_int chunks;
  int32_t max_chunks;
  int64_t offset;    /* added to every index (inner loops of the nested test) */
  int32_t outer_tid; /* expected thread of inner chunks, -1: not nested */
  atomic_int wrong_thread;
} t_ctx;

static void t_record(void *vctx, int64_t begin, int64_t end) {
  t_ctx *c = (t_ctx *)vctx;
  const int32_t slot = atomic_fetch_add(&c->chunks, 1);
  if (slot < c->max_chunks) {
    c->chunk_begin[slot] = c->offset + begin;
    c->chunk_end[slot] = c->offset + end;
    c->chunk_tid[slot] = nc_pool_worker_id();
  }
  if (c->outer_tid >= 0 && nc_pool_worker_id() != c->outer_tid)
    atomic_fetch_add(&c->wrong_thread, 1);
  for (int64_t i = begin; i < end; ++i)
    __atomic_fetch_add(&c->visits[c->offset + i], 1, __ATOMIC_RELAXED);
}

/* Every chunk of one loop: [begin, end) and thread id; returns the chunk count
   or -1000 + nc_parallel_for's return code when that is not 0. */
int32_t t_visit(int64_t n, int64_t grain, int32_t *visits, int64_t *cb, int64_t *ce,
                int32_t *ct, int32_t max_chunks) {
  t_ctx c = {visits, cb, ce, ct, 0, max_chunks, 0, -1, 0};
  const int32_t rc = nc_parallel_for(n, grain, t_record, &c);
  return rc != 0 ? -1000 + rc : atomic_load(&c.chunks);
}

/* Nested: every outer chunk runs an inner loop over its own range (grain 1),
   whose chunks are recorded and must all run on the outer chunk's thread. */
typedef struct {
  t_ctx *inner;
  atomic_int rc;
} t_outer;

static void t_outer_fn(void *vctx, int64_t begin, int64_t end) {
  t_outer *o = (t_outer *)vctx;
  t_ctx c = {o->inner->visits, o->inner->chunk_begin, o->inner->chunk_end,
             o->inner->chunk_tid, 0, 0, begin, nc_pool_worker_id(), 0};
  /* each outer chunk records into its own slice of the chunk arrays */
  const int32_t slice = 256;
  const int32_t index = atomic_fetch_add(&o->inner->chunks, 1);
  c.chunk_begin += (int64_t)index * slice;
  c.chunk_end += (int64_t)index * slice;
  c.chunk_tid += (int64_t)index * slice;
  c.max_chunks = slice;
  const int32_t rc = nc_parallel_for(end - begin, 1, t_record, &c);
  if (rc != 0) atomic_store(&o->rc, rc);
  atomic_fetch_add(&o->inner->wrong_thread, atomic_load(&c.wrong_thread));
  c.chunk_tid[slice - 1] = atomic_load(&c.chunks); /* the slice's last slot: the count */
}

int32_t t_nested(int64_t n, int32_t *visits, int64_t *cb, int64_t *ce, int32_t *ct,
                 int32_t *wrong_thread) {
  t_ctx inner = {visits, cb, ce, ct, 0, 0, 0, -1, 0};
  t_outer o = {&inner, 0};
  const int32_t rc = nc_parallel_for(n, 1, t_outer_fn, &o);
  *wrong_thread = atomic_load(&inner.wrong_thread);
  return rc != 0 ? rc : atomic_load(&o.rc);
}

/* `calls` back-to-back loops over n; returns the total number of iterations run. */
static void t_count(void *vctx, int64_t begin, int64_t end) {
  __atomic_fetch_add((int64_t *)vctx, end - begin, __ATOMIC_RELAXED);
}

int64_t t_repeat(int64_t calls, int64_t n, int64_t grain) {
  int64_t total = 0;
  for (int64_t i = 0; i < calls; ++i)
    if (nc_parallel_for(n, grain, t_count, &total) != 0) return -1;
  return total;
}

static void t_set_inside(void *vctx, int64_t begin, int64_t end) {
  (void)begin; (void)end;
  int32_t *out = (int32_t *)vctx;
  __atomic_store_n(&out[nc_pool_worker_id()], nc_pool_set_threads(1) * 10 + 7,
                   __ATOMIC_RELAXED);
  nc_pool_shutdown(); /* a no-op inside a task */
}

/* set_threads and shutdown called from inside tasks: refused, no deadlock. */
int32_t t_control_inside(int64_t n, int32_t *out) {
  return nc_parallel_for(n, 1, t_set_inside, out);
}

int32_t t_bad_calls(void) {
  int64_t total = 0;
  int32_t bad = 0;
  bad |= nc_parallel_for(-1, 1, t_count, &total) != -1;
  bad |= (nc_parallel_for(10, 1, NULL, &total) != -1) << 1;
  bad |= (nc_parallel_for(0, 1, t_count, &total) != 0) << 2;
  bad |= (nc_parallel_for(5, 0, t_count, &total) != 0) << 3;
  bad |= (nc_parallel_for(5, -3, t_count, &total) != 0) << 4;
  bad |= (total != 10) << 5;
  return bad;
}

int64_t t_created(void) { return atomic_load(&nc_pool_g.created); }
uint32_t t_tag(void) { return nc_pool_tag(); }
int32_t t_running(void) { return atomic_load(&nc_pool_g.threads); }
"""

TSAN_MAIN = r"""
#include <stdio.h>
#include <stdlib.h>

static int32_t visits[100000];
static int64_t cb[4096], ce[4096];
static int32_t ct[4096];

static int check_visits(int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (visits[i] != 1) {
      fprintf(stderr, "index %lld visited %d times\n", (long long)i, visits[i]);
      return 1;
    }
  memset(visits, 0, sizeof visits);
  return 0;
}

static void *caller(void *arg) {
  (void)arg;
  static int32_t mine[2][5000];
  int32_t *v = mine[(intptr_t)arg];
  for (int r = 0; r < 50; ++r) {
    memset(v, 0, 5000 * sizeof *v);
    int32_t tid[16];
    int64_t b[16], e[16];
    if (t_visit(5000, 1, v, b, e, tid, 16) < 1) abort();
    for (int i = 0; i < 5000; ++i) if (v[i] != 1) abort();
  }
  return NULL;
}

int main(void) {
  const int32_t counts[] = {1, 2, 3, 8, 2};
  const int64_t sizes[] = {0, 1, 7, 8, 9, 97, 4093, 100000};
  for (int c = 0; c < 5; ++c) {
    if (nc_pool_set_threads(counts[c]) != counts[c]) return 2;
    for (int s = 0; s < 8; ++s)
      for (int64_t grain = 1; grain <= 64; grain *= 8) {
        if (t_visit(sizes[s], grain, visits, cb, ce, ct, 4096) < 0) return 3;
        if (check_visits(sizes[s])) return 4;
      }
    int32_t wrong = 0;
    if (t_nested(5000, visits, cb, ce, ct, &wrong) != 0 || wrong != 0) return 5;
    if (check_visits(5000)) return 6;
    if (t_repeat(2000, 64, 1) != 2000 * 64) return 7;
  }
  pthread_t a, b;
  pthread_create(&a, NULL, caller, (void *)0);
  pthread_create(&b, NULL, caller, (void *)1);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  nc_pool_shutdown();
  nc_pool_shutdown();
  if (t_repeat(100, 1000, 1) != 100 * 1000) return 8; /* restarts lazily */
  nc_pool_shutdown();
  printf("ok\n");
  return 0;
}
"""

RACY_C = r"""
#include <pthread.h>
#include <stdio.h>
static int shared;
static void *bump(void *arg) { (void)arg; shared++; return NULL; }
int main(void) {
  pthread_t t;
  pthread_create(&t, NULL, bump, NULL);
  shared++;
  pthread_join(t, NULL);
  printf("%d\n", shared);
  return 0;
}
"""


class Harness:
    """The harness library with typed entry points."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.pool = PoolControl(lib)
        i32p = np.ctypeslib.ndpointer(np.int32, flags="C_CONTIGUOUS")
        i64p = np.ctypeslib.ndpointer(np.int64, flags="C_CONTIGUOUS")
        i64, i32 = ctypes.c_int64, ctypes.c_int32
        for name, restype, argtypes in (
            ("t_visit", i32, [i64, i64, i32p, i64p, i64p, i32p, i32]),
            ("t_nested", i32, [i64, i32p, i64p, i64p, i32p, ctypes.POINTER(i32)]),
            ("t_repeat", i64, [i64, i64, i64]),
            ("t_control_inside", i32, [i64, i32p]),
            ("t_bad_calls", i32, []),
            ("t_created", i64, []),
            ("t_tag", ctypes.c_uint32, []),
            ("t_running", i32, []),
        ):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes

    def visit(self, n: int, grain: int) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
        """Visit counts per index and the chunks (begin, end, thread) sorted by begin."""
        visits = np.zeros(max(n, 1), np.int32)
        cap = MAX_THREADS + 1
        cb, ce = np.zeros(cap, np.int64), np.zeros(cap, np.int64)
        ct = np.full(cap, -1, np.int32)
        k = self.lib.t_visit(n, grain, visits, cb, ce, ct, cap)
        assert 0 <= k <= MAX_THREADS, k
        chunks = sorted((int(cb[i]), int(ce[i]), int(ct[i])) for i in range(k))
        return visits[:n], chunks


def expected_partition(n: int, grain: int, threads: int) -> list[tuple[int, int, int]]:
    """The promised chunks (begin, end, thread): the longer ones first, chunk i on thread i."""
    if n == 0:
        return []
    k = max(1, min(threads, n // max(grain, 1)))
    base, rem = divmod(n, k)
    chunks, begin = [], 0
    for i in range(k):
        end = begin + base + (1 if i < rem else 0)
        chunks.append((begin, end, i))
        begin = end
    return chunks


def physical_cores() -> int:
    """Distinct (package, core) pairs among the CPUs this process may run on."""
    pairs = set()
    for cpu in os.sched_getaffinity(0):
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            pairs.add(((topo / "physical_package_id").read_text().strip(),
                       (topo / "core_id").read_text().strip()))
        except OSError:
            return os.cpu_count() or 1
    return min(len(pairs), MAX_THREADS)


def thread_names() -> list[str]:
    """The names of this process's threads (one that ends while being read is left out)."""
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            names.append(Path(f"/proc/self/task/{tid}/comm").read_text().strip())
        except OSError:
            continue
    return names


def pool_threads(harness: Harness) -> int:
    """The harness pool's worker threads now running, counted by the operating system
    (by their names: other threads of this process, which other tests may start or
    end meanwhile, are not counted)."""
    prefix = f"ncpool{harness.lib.t_tag():05x}-"
    return sum(name.startswith(prefix) for name in thread_names())


@pytest.fixture(scope="module")
def library_path(shared_kernel_cache: Path) -> Path:
    built = gcc.compile_library(PRELUDE + POOL_C + HARNESS_C, name="pool_harness",
                                sanitize=False, cache_dir=shared_kernel_cache)
    return built.path


@pytest.fixture(scope="module")
def harness(library_path: Path) -> Iterator[Harness]:
    h = Harness(ctypes.CDLL(str(library_path)))
    yield h
    h.pool.shutdown()


# -- the C source ---------------------------------------------------------------

@pytest.mark.parametrize("with_prelude", [True, False], ids=["after-prelude", "alone"])
def test_pool_c_compiles_without_warnings(tmp_path: Path, with_prelude: bool) -> None:
    """-Wall -Wextra -Werror -Wpedantic under the project flags, nothing using it."""
    source = tmp_path / "pool.c"
    source.write_text((PRELUDE if with_prelude else "") + POOL_C)
    command = [gcc.GCC, *gcc.compile_flags(False), "-Wall", "-Wextra", "-Wpedantic",
               "-Werror", str(source), "-o", str(tmp_path / "pool.so")]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    nm = subprocess.run(["nm", "-D", "--defined-only", str(tmp_path / "pool.so")],
                        capture_output=True, text=True, check=True)
    exported = sorted(line.split()[-1] for line in nm.stdout.splitlines()
                      if line.split()[1:2] == ["T"])
    assert exported == ["nc_pool_init", "nc_pool_set_threads", "nc_pool_shutdown",
                        "nc_pool_threads"]


# -- partitions -------------------------------------------------------------------

@pytest.mark.parametrize("threads", THREAD_COUNTS)
def test_every_index_once_in_the_promised_chunks(harness: Harness, threads: int) -> None:
    assert harness.pool.set_threads(threads) == threads
    for n in SIZES:
        for grain in GRAINS:
            visits, chunks = harness.visit(n, grain)
            assert np.all(visits == 1), (n, grain, np.flatnonzero(visits != 1)[:10])
            assert chunks == expected_partition(n, grain, threads), (n, grain)


@pytest.mark.parametrize("threads", THREAD_COUNTS)
def test_grain_boundaries(harness: Harness, threads: int) -> None:
    """n <= grain (and n < 2 grain) is one chunk; each chunk has at least grain iterations."""
    harness.pool.set_threads(threads)
    for grain in (1, 2, 5, 128):
        for n in range(1, threads * grain + 2 * grain + 2):
            _, chunks = harness.visit(n, grain)
            assert len(chunks) == min(threads, max(1, n // grain))
            assert all(end - begin >= min(grain, n) for begin, end, _ in chunks)
            if n < 2 * grain:
                assert chunks == [(0, n, 0)]


def test_partition_is_deterministic(harness: Harness) -> None:
    """The same n and thread count give the same chunks on the same threads, every time."""
    for threads in THREAD_COUNTS:
        harness.pool.set_threads(threads)
        for n, grain in ((10**6, 1), (4093, 64), (17, 1)):
            first = harness.visit(n, grain)[1]
            for _ in range(20):
                assert harness.visit(n, grain)[1] == first
            harness.pool.set_threads(threads)  # a restarted pool too
            assert harness.visit(n, grain)[1] == first
            assert sorted({tid for _, _, tid in first}) == list(range(len(first)))


def test_invalid_arguments(harness: Harness) -> None:
    """n < 0 and a NULL fn return -1 without running anything; grain <= 0 counts as 1."""
    harness.pool.set_threads(2)
    assert harness.lib.t_bad_calls() == 0


# -- nesting, control from tasks, concurrent callers --------------------------------

@pytest.mark.parametrize("threads", THREAD_COUNTS)
def test_nested_loops_run_serially_in_the_same_chunks(harness: Harness, threads: int) -> None:
    harness.pool.set_threads(threads)
    n = 1000
    slice_ = 256
    visits = np.zeros(n, np.int32)
    cb = np.zeros(threads * slice_, np.int64)
    ce = np.zeros(threads * slice_, np.int64)
    ct = np.full(threads * slice_, -1, np.int32)
    wrong = ctypes.c_int32(-1)
    assert harness.lib.t_nested(n, visits, cb, ce, ct, ctypes.byref(wrong)) == 0
    assert np.all(visits == 1)
    assert wrong.value == 0  # every inner chunk ran on its outer chunk's thread
    outer = expected_partition(n, 1, threads)
    inner = []
    for s in range(len(outer)):
        count = int(ct[s * slice_ + slice_ - 1])
        inner += [(int(cb[s * slice_ + i]), int(ce[s * slice_ + i]))
                  for i in range(count)]
    expected = []
    for begin, end, _ in outer:  # the inner loop keeps the partition of T threads
        expected += [(begin + b, begin + e) for b, e, _ in expected_partition(end - begin, 1,
                                                                              threads)]
    assert sorted(inner) == expected


def test_control_functions_inside_a_task_are_refused(harness: Harness) -> None:
    harness.pool.set_threads(3)
    out = np.zeros(3, np.int32)
    assert harness.lib.t_control_inside(3, out) == 0
    assert list(out) == [-10 + 7] * 3  # set_threads returned -1 on every thread
    assert harness.pool.threads() == 3


def test_concurrent_callers_take_turns(harness: Harness) -> None:
    """ctypes drops the GIL: four Python threads run loops on one pool at once."""
    harness.pool.set_threads(3)
    failures: list[str] = []

    def run(seed: int) -> None:
        for r in range(200):
            n = 1 + (seed * 7919 + r * 104729) % 50000
            visits, chunks = harness.visit(n, 1)
            if not np.all(visits == 1) or chunks != expected_partition(n, 1, 3):
                failures.append(f"thread {seed} round {r} n {n}")

    workers = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert failures == []


# -- the workers' lifetime ---------------------------------------------------------

def test_set_threads_up_and_down(harness: Harness) -> None:
    harness.pool.shutdown()
    assert pool_threads(harness) == 0
    for threads in (1, 2, 8, 3, 1, 8, 2):
        assert harness.pool.set_threads(threads) == threads
        assert harness.pool.threads() == threads
        assert pool_threads(harness) == threads - 1
        _, chunks = harness.visit(10**5, 1)
        assert [tid for _, _, tid in chunks] == list(range(threads))
    harness.pool.shutdown()
    assert pool_threads(harness) == 0
    assert harness.lib.t_running() == 0


def test_shutdown_twice_then_restart_lazily(harness: Harness) -> None:
    harness.pool.set_threads(3)
    harness.pool.shutdown()
    assert pool_threads(harness) == 0
    harness.pool.shutdown()
    assert pool_threads(harness) == 0
    assert harness.pool.threads() == 3  # the count it will start with
    created = harness.lib.t_created()
    visits, chunks = harness.visit(1000, 1)  # the first parallel loop starts the workers
    assert np.all(visits == 1)
    assert len(chunks) == 3
    assert harness.lib.t_created() == created + 2
    assert pool_threads(harness) == 2


def test_tiny_loops_never_start_the_pool(harness: Harness) -> None:
    harness.pool.shutdown()
    created = harness.lib.t_created()
    for n in (1, 64, 127):
        visits, chunks = harness.visit(n, 64)
        assert np.all(visits == 1)
        assert len(chunks) == 1
    assert harness.lib.t_running() == 0
    assert harness.lib.t_created() == created


@pytest.mark.parametrize("threads", [2, 8])
def test_back_to_back_loops_reuse_the_workers(harness: Harness, threads: int) -> None:
    """10^4 loops from C and 10^4 from Python: no thread created, none left over."""
    harness.pool.set_threads(threads)
    before, created = pool_threads(harness), harness.lib.t_created()
    assert harness.lib.t_repeat(10**4, 4096, 1) == 10**4 * 4096
    for _ in range(10**4):
        assert harness.lib.t_repeat(1, 64, 1) == 64
    assert harness.lib.t_created() == created
    assert pool_threads(harness) == before


def test_fork_child_restarts_the_workers(harness: Harness) -> None:
    """A forked child has none of the parent's workers; its first loop starts its own."""
    harness.pool.set_threads(3)
    harness.visit(1000, 1)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        ok = False
        try:
            visits, chunks = harness.visit(10**5, 1)
            ok = bool(np.all(visits == 1)) and [t for _, _, t in chunks] == [0, 1, 2]
            ok = ok and len(os.listdir("/proc/self/task")) == 3
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    visits, _ = harness.visit(1000, 1)  # the parent's pool still works
    assert np.all(visits == 1)


UNLOAD_CHILD = """
import _ctypes, ctypes, os, sys
def tasks():
    return len(os.listdir("/proc/self/task"))
base = tasks()
lib = ctypes.CDLL(sys.argv[1])
lib.nc_pool_set_threads(int(sys.argv[2]))
lib.t_repeat.restype = ctypes.c_int64
lib.t_repeat.argtypes = [ctypes.c_int64] * 3
assert lib.t_repeat(100, 1000, 1) == 100 * 1000
running = tasks()
lib.nc_pool_shutdown()
lib.nc_pool_shutdown()
after_shutdown = tasks()
assert lib.t_repeat(10, 1000, 1) == 10 * 1000  # started again
handle = lib._handle
del lib
_ctypes.dlclose(handle)  # the destructor joins the workers before the code goes away
print(base, running, after_shutdown, tasks())
"""


@pytest.mark.parametrize("threads", [2, 8])
def test_unloading_the_library_joins_the_workers(library_path: Path, tmp_path: Path,
                                                 threads: int) -> None:
    """dlclose runs the destructor: no worker is left running on unmapped code."""
    copy = tmp_path / "private.so"  # a path of its own: dlopen maps a fresh instance
    copy.write_bytes(library_path.read_bytes())
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    env["OPENBLAS_NUM_THREADS"] = "1"
    result = subprocess.run([sys.executable, "-c", UNLOAD_CHILD, str(copy), str(threads)],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    base, running, after_shutdown, unloaded = map(int, result.stdout.split())
    assert running == base + threads - 1
    assert after_shutdown == base
    assert unloaded == base


def test_exit_with_running_workers(library_path: Path) -> None:
    """A process that never shuts the pool down exits cleanly (the destructor joins)."""
    code = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.nc_pool_init(8); "
            "lib.t_repeat.argtypes = [ctypes.c_int64] * 3; lib.t_repeat(1000, 100, 1); "
            "print('done')")
    result = subprocess.run([sys.executable, "-c", code, str(library_path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done\n"


# -- the thread count ----------------------------------------------------------------

CHILD = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
before = lib.nc_pool_threads()
lib.nc_pool_init(0)
import os
print(before, lib.nc_pool_threads(), len(os.listdir("/proc/self/task")))
"""


def run_child(library_path: Path, value: str | None) -> tuple[list[int], str]:
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    if value is not None:
        env[THREADS_ENV] = value
    env["OPENBLAS_NUM_THREADS"] = "1"
    result = subprocess.run([sys.executable, "-c", CHILD, str(library_path)], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [int(x) for x in result.stdout.split()], result.stderr


@pytest.mark.parametrize("value", ["1", "2", "3", "8", " 5 ", "256"])
def test_env_threads_is_honoured(library_path: Path, value: str) -> None:
    (before, running, tasks), stderr = run_child(library_path, value)
    want = int(value)
    assert before == running == want
    assert tasks == 1 + want - 1  # the main thread and T - 1 workers
    assert stderr == ""
    assert env_threads({THREADS_ENV: value}) == want


@pytest.mark.parametrize("value", ["0", "257", "-2", "abc", "4x", "1e3", "99999999999999999999"])
def test_invalid_env_threads_falls_back_to_physical_cores(library_path: Path,
                                                          value: str) -> None:
    (before, running, _), stderr = run_child(library_path, value)
    assert before == running == physical_cores()
    assert stderr.count("\n") == 1
    assert f"NANOCOMPILE_THREADS='{value}'" in stderr
    with pytest.raises(ValueError, match=THREADS_ENV):
        env_threads({THREADS_ENV: value})


@pytest.mark.parametrize("value", [None, ""])
def test_default_is_physical_cores(library_path: Path, value: str | None) -> None:
    (before, running, tasks), stderr = run_child(library_path, value)
    assert before == running == physical_cores()
    assert tasks == running
    assert stderr == ""
    assert env_threads({} if value is None else {THREADS_ENV: value}) is None


def test_pool_control_validates(harness: Harness) -> None:
    with pytest.raises(ValueError, match=r"0\.\.256"):
        harness.pool.set_threads(MAX_THREADS + 1)
    with pytest.raises(ValueError, match=r"0\.\.256"):
        harness.pool.set_threads(-1)
    assert harness.lib.nc_pool_set_threads(-1) == -1
    assert harness.lib.nc_pool_set_threads(MAX_THREADS + 1) == -1
    assert harness.pool.set_threads(0) == (env_threads() or physical_cores())


# -- ThreadSanitizer -------------------------------------------------------------------

def _tsan_build(tmp_path: Path, name: str, source: str) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    exe = tmp_path / name
    command = [gcc.GCC, "-std=c11", "-O1", "-g", "-fsanitize=thread", "-Wall", "-Wextra",
               "-Werror", str(src), "-o", str(exe), "-pthread"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        if "tsan" in result.stderr.lower():
            pytest.skip(f"gcc cannot link ThreadSanitizer here: {result.stderr.strip()[:200]}")
        raise AssertionError(result.stderr)
    return exe


def _tsan_run(exe: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", THREADS_ENV)}
    env["TSAN_OPTIONS"] = "halt_on_error=0 exitcode=66"
    return subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=600)


def test_pool_is_race_free_under_thread_sanitizer(tmp_path: Path) -> None:
    """The racy control must be reported (so TSan works here); the pool must not be."""
    control = _tsan_run(_tsan_build(tmp_path, "racy", RACY_C))
    if "ThreadSanitizer" not in control.stderr:
        pytest.skip(f"ThreadSanitizer does not run here (exit {control.returncode}): "
                    f"{control.stderr.strip()[:300]}")
    if "FATAL" in control.stderr:
        pytest.skip(f"ThreadSanitizer cannot start here: {control.stderr.strip()[:300]}")
    assert "WARNING: ThreadSanitizer: data race" in control.stderr
    exe = _tsan_build(tmp_path, "pool_tsan", POOL_C + HARNESS_C + TSAN_MAIN)
    result = _tsan_run(exe)
    assert "ThreadSanitizer" not in result.stderr, result.stderr[:4000]
    assert result.returncode == 0, result.stderr[:2000]
    assert result.stdout == "ok\n"

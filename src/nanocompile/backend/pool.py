"""The persistent thread pool that generated libraries run their parallel loops on.

The pool is C, in ``nanocompile/targets/c_runtime/pool.c`` (package data;
``nanocompile.targets.c_runtime.POOL_C`` is its text): a self-contained C11 +
pthreads runtime the C target pastes into every generated library with a
parallel loop, after its prelude (it includes what it uses; it needs
``_POSIX_C_SOURCE >= 199309L``, which the prelude defines, and defines it
itself when pasted first). Each library therefore owns one pool. This module
drives a loaded library's pool (``PoolControl``) and reads the environment
the way it does (``env_threads``). The API::

    typedef void (*nc_task_fn)(void *ctx, int64_t begin, int64_t end);
    static int32_t nc_parallel_for(int64_t n, int64_t grain, nc_task_fn fn, void *ctx);
    static int32_t nc_pool_worker_id(void);   /* 0 on callers, 1..T-1 on workers */

    int32_t nc_pool_init(int32_t threads);    /* start if stopped; <= 0: the default */
    int32_t nc_pool_threads(void);            /* running count, or the count it would start */
    int32_t nc_pool_set_threads(int32_t n);   /* 1..256 (0: default): stop, restart */
    void nc_pool_shutdown(void);              /* join the workers; safe to call twice */

`nc_parallel_for` splits ``[0, n)`` into ``k = min(T, max(1, n / grain))``
contiguous chunks of ``n / k`` or ``n / k + 1`` iterations (the longer ones
first), runs chunk ``i`` on thread ``i`` (thread 0 is the caller) and returns
when all are done: the chunks are a function of ``n``, ``grain`` and the thread
count ``T`` only. A call from inside a task (nested), or after the library's
destructor ran, runs the same chunks one after another on the calling thread.
Concurrent callers from different threads take turns (a mutex). It returns 0,
or -1 (running nothing) for ``n < 0`` or a NULL ``fn``; a task reports its own
errors through ``ctx``.

Workers are created once, lazily at the first parallel call (or by
``nc_pool_init``), and then wait for a generation counter ("ticket") to
change: they poll it for up to ``NC_POOL_SPIN_NS`` (50 µs) with ``sched_yield``
between reads (not a pause loop, which starves a thread sharing our CPU; no
polling at all when there are more threads than CPUs we may run on), then
sleep on a condition variable. The caller waits for the workers' chunks the
same way.
The thread count is ``NANOCOMPILE_THREADS`` when it is an integer in 1..256
(anything else is reported on stderr once and ignored), else the number of
physical cores (distinct ``physical_package_id``/``core_id`` pairs in sysfs
among the CPUs in ``Cpus_allowed_list``), else ``sysconf(_SC_NPROCESSORS_ONLN)``.
A destructor joins the workers when the library is unloaded or the process
exits; a ``pthread_atfork`` child handler forgets the workers a forked child
does not have.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

THREADS_ENV = "NANOCOMPILE_THREADS"
MAX_THREADS = 256


def env_threads(environ: dict[str, str] | None = None) -> int | None:
    """``NANOCOMPILE_THREADS`` as the pool reads it: an int in 1..256, None when unset.

    Raises ValueError (one line) for a value the pool would ignore, so a
    command line can refuse it instead of silently using the default.
    """
    value = (os.environ if environ is None else environ).get(THREADS_ENV, "")
    if value == "":
        return None
    text = value.strip(" ")
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_THREADS:
        raise ValueError(f"{THREADS_ENV} must be an integer in 1..{MAX_THREADS}, got {value!r}")
    return int(text)


@dataclass(frozen=True)
class PoolControl:
    """The exported control functions of a library that contains the pool."""

    lib: ctypes.CDLL

    def __post_init__(self) -> None:
        for name in ("nc_pool_init", "nc_pool_set_threads"):
            getattr(self.lib, name).argtypes = [ctypes.c_int32]
        for name in ("nc_pool_init", "nc_pool_threads", "nc_pool_set_threads"):
            getattr(self.lib, name).restype = ctypes.c_int32
        self.lib.nc_pool_threads.argtypes = []
        self.lib.nc_pool_shutdown.argtypes = []
        self.lib.nc_pool_shutdown.restype = None

    def init(self, threads: int = 0) -> int:
        """Start the workers if stopped (``threads <= 0``: the default count)."""
        return int(self.lib.nc_pool_init(threads))

    def threads(self) -> int:
        """The running thread count, or the count the pool would start with."""
        return int(self.lib.nc_pool_threads())

    def set_threads(self, threads: int) -> int:
        """Restart with `threads` (1..256; 0 = the default); the count now running."""
        if not 0 <= threads <= MAX_THREADS:
            raise ValueError(f"thread count must be in 0..{MAX_THREADS}, got {threads}")
        result = int(self.lib.nc_pool_set_threads(threads))
        if result < 0:
            raise RuntimeError("nc_pool_set_threads refused (called from inside a task?)")
        return result

    def shutdown(self) -> None:
        """Join the workers (the next parallel loop starts them again)."""
        self.lib.nc_pool_shutdown()

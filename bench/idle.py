"""Wait until this process's other threads are off the CPU.

OpenBLAS keeps its worker threads spinning for a while after each call
(``THREAD_TIMEOUT``, 2^28 cycles by default: ~70 ms at 3.6 GHz) before they
sleep. A benchmark that alternates an OpenBLAS call with a 2-thread
nanocompile call on a 2-core machine therefore times nanocompile with one
core taken: measured on the AMD EPYC Zen 4 (session 18), gate_up at 64 rows
and 2 threads took 9.1 ms called alone, 16.6 ms right after an OpenBLAS call,
and 9.5 ms after the same call and a 0.3 s sleep. ``wait_for_idle_threads``
polls ``/proc/self/task/*/stat`` until every thread but the caller is
sleeping, so each engine is timed on an idle machine without a fixed sleep.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

TASKS = Path("/proc/self/task")
POLL_SECONDS = 0.0005
DEFAULT_TIMEOUT = 1.0


@dataclass(frozen=True)
class Idle:
    """What one wait found: ``seconds`` waited, ``idle`` False when the timeout
    ran out with a thread still running; ``running``: the ids of the threads
    seen running by any poll of a wait that timed out."""

    seconds: float
    idle: bool
    running: tuple[int, ...] = ()


def running_threads(tasks: Path = TASKS) -> tuple[int, ...]:
    """Thread ids of this process, other than the caller's, in state R (running
    or runnable); () where ``/proc`` cannot be read (not Linux)."""
    me = threading.get_native_id()
    found = []
    try:
        entries = list(tasks.iterdir())
    except OSError:
        return ()
    for entry in entries:
        try:
            tid = int(entry.name)
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        # "tid (comm) S ...": the state follows the last ')' (comm may hold one)
        state = stat[stat.rfind(")") + 2:stat.rfind(")") + 3]
        if tid != me and state == "R":
            found.append(tid)
    return tuple(sorted(found))


def wait_for_idle_threads(timeout: float = DEFAULT_TIMEOUT, tasks: Path = TASKS) -> Idle:
    """Poll until no other thread of this process is running, at most ``timeout``
    seconds."""
    start = time.perf_counter()
    seen: set[int] = set()
    while True:
        running = running_threads(tasks)
        waited = time.perf_counter() - start
        if not running:
            return Idle(waited, True)
        seen.update(running)
        if waited >= timeout:
            return Idle(waited, False, tuple(sorted(seen)))
        time.sleep(POLL_SECONDS)

"""bench/idle.py: waiting until the process's other threads are off the CPU."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from bench import idle

pytestmark = pytest.mark.skipif(not idle.TASKS.is_dir(), reason="no /proc/self/task here")


def _spinner(stop: threading.Event) -> threading.Thread:
    """A thread that keeps a core busy until ``stop``: numpy multiplies a 4 MiB
    array again and again, the GIL released inside each (so it shows as running,
    not as waiting for the GIL)."""
    a = np.ones(1 << 20, np.float32)
    out = np.empty_like(a)

    def run() -> None:
        while not stop.is_set():
            np.multiply(a, a, out=out)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_an_idle_process_is_found_idle() -> None:
    found = idle.wait_for_idle_threads(timeout=60.0)
    assert found.idle
    assert found.running == ()


def test_a_thread_that_keeps_running_times_out_and_is_named() -> None:
    stop = threading.Event()
    thread = _spinner(stop)
    try:
        found = idle.wait_for_idle_threads(timeout=0.2)
        assert not found.idle
        assert thread.native_id in found.running
    finally:
        stop.set()
        thread.join()
    # stopped, it is seen sleeping (or gone)
    assert idle.wait_for_idle_threads(timeout=60.0).idle


def test_state_is_read_after_the_last_parenthesis(tmp_path: Path) -> None:
    """A thread's name may hold ") R": the state is the field after the last ')'."""
    me = threading.get_native_id()
    for tid, stat in [(1, "1 (odd) R name) S 1 2 3"), (2, "2 (worker) R 1 2 3"),
                      (me, f"{me} (python) R 1 2 3"), (3, "3 (sleeper) S 1 2 3")]:
        (tmp_path / str(tid)).mkdir()
        (tmp_path / str(tid) / "stat").write_text(stat)
    assert idle.running_threads(tmp_path) == (2,)
    assert idle.running_threads(tmp_path / "missing") == ()

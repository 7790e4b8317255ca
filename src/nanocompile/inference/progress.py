"""Progress reports for slow steps, printed only when a step is actually slow.

A progress callback has the signature of the synthetic generator's:
``progress(what, done, total)``, called with ``done == 0`` when a step
starts (optional), after each unit of work, and with ``done == total`` when
it ends. The library calls it; it never prints by itself.

``StderrProgress`` is the command line's reporter. A step that finishes
within ``delay`` seconds (default 1 s) prints nothing. A slower one prints
``what...`` once it has run that long, then, on a terminal, a live
``done/total`` counter on the same line, and finally the elapsed time::

    nanocompile: compiling the model (c backend)... done in 9.3 s
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO, TypeVar

T = TypeVar("T")

Progress = Callable[[str, int, int], None]
"""``progress(what, done, total)``: ``done`` units of ``total`` of step ``what`` are done."""


def report_step(progress: Progress | None, what: str, work: Callable[[], T]) -> T:
    """Run ``work()`` as one step of one unit, reported to ``progress`` if given."""
    if progress is not None:
        progress(what, 0, 1)
    result = work()
    if progress is not None:
        progress(what, 1, 1)
    return result


class StderrProgress:
    """Prints steps that take longer than ``delay`` seconds to ``stream``."""

    def __init__(self, stream: TextIO | None = None, delay: float = 1.0,
                 prefix: str = "nanocompile: ") -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.prefix = prefix
        self._lock = threading.Lock()
        self._step: str | None = None
        self._started = 0.0
        self._shown = False
        self._counter = ""
        self._timer: threading.Timer | None = None

    def __call__(self, what: str, done: int, total: int) -> None:
        with self._lock:
            if what != self._step:
                self._finish_locked()
                self._start_locked(what)
            self._update_locked(done, total)
            if done >= total:
                self._finish_locked()

    def abort(self) -> None:
        """End the current step without calling it done (an error interrupted it)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._step is not None and self._shown:
                self._write("\n")
            self._step, self._shown = None, False

    # -- internals (called with the lock held) ----------------------------

    def _start_locked(self, what: str) -> None:
        self._step, self._started, self._shown, self._counter = what, time.monotonic(), False, ""
        self._timer = threading.Timer(self.delay, self._show)
        self._timer.daemon = True
        self._timer.start()

    def _show(self) -> None:
        with self._lock:
            if self._step is None or self._shown:
                return
            self._shown = True
            counter = self._counter if self._tty() else ""
            self._write(f"{self.prefix}{self._step}... {counter}")

    def _update_locked(self, done: int, total: int) -> None:
        if total <= 1:
            return
        self._counter = f"{done}/{total}"
        if self._shown and self._tty():
            self._write(f"\r{self.prefix}{self._step}... {self._counter}")

    def _finish_locked(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._step is not None and self._shown:
            seconds = time.monotonic() - self._started
            lead = f"\r{self.prefix}{self._step}... " if self._tty() else ""
            self._write(f"{lead}done in {seconds:.1f} s\n")
        self._step, self._shown = None, False

    def _tty(self) -> bool:
        isatty = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

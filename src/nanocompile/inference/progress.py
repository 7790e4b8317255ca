"""Progress reports for slow steps, shown on a terminal only when a step is actually slow.

A progress callback has the signature of the synthetic generator's:
``progress(what, done, total)``, called with ``done == 0`` when a step
starts (optional), after each unit of work, and with ``done == total`` when
it ends. The library calls it; it never prints by itself.

``StderrProgress`` is the command line's reporter, drawn with ``rich``. A
step that finishes within ``delay`` seconds (default 1 s) shows nothing. A
slower one gets a live line once it has run that long: a spinner and the
elapsed time for a one-unit step (compiling), a bar with ``done/total`` for a
counted one and, for the steps counted in tokens (``TOKEN_STEPS``: the
prefill, perplexity's scoring), the tokens per second. When it ends, the live
line gives way to one summary line::

    nanocompile: compiling the model (last-position logits)... done in 9.3 s
    nanocompile: prefill... done in 8.1 s (1,692 tokens, 209 tok/s)

It is quiet (prints nothing at all) unless both stderr and stdout are
terminals: a script that pipes or captures either gets no progress lines.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

T = TypeVar("T")

Progress = Callable[[str, int, int], None]
"""``progress(what, done, total)``: ``done`` units of ``total`` of step ``what`` are done."""

PREFILL = "prefill"
"""The generation loop's prefill step, counted in prompt tokens."""
SCORING = "scoring the text"
"""Perplexity's step, counted in tokens."""
TOKEN_STEPS = frozenset({PREFILL, SCORING})
"""Steps counted in tokens: their reports show tokens per second."""


def report_step(progress: Progress | None, what: str, work: Callable[[], T]) -> T:
    """Run ``work()`` as one step of one unit, reported to ``progress`` if given."""
    if progress is not None:
        progress(what, 0, 1)
    result = work()
    if progress is not None:
        progress(what, 1, 1)
    return result


def is_terminal(stream: object) -> bool:
    """True when ``stream`` has an ``isatty()`` that says so."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed file
        return False


def _rich_columns(counted: bool) -> list[Any]:
    """The live line's columns (rich is imported here: ``--help`` stays fast). None
    of them wraps: a narrow terminal cuts the line instead."""
    from rich import progress as rp
    from rich.table import Column
    from rich.text import Text

    class Elapsed(rp.ProgressColumn):
        """Seconds since the step began (not since its line appeared)."""

        def render(self, task: rp.Task) -> Text:
            return Text(f"{time.monotonic() - task.fields['started']:.1f} s", no_wrap=True)

    class Count(rp.ProgressColumn):
        """``done/total``, with the unit and the rate of a step counted in tokens."""

        def render(self, task: rp.Task) -> Text:
            done, total = int(task.completed), int(task.total or 0)
            text = f"{done:,}/{total:,}"
            if task.fields["tokens"]:
                seconds = time.monotonic() - task.fields["started"]
                rate = f"{done / seconds:,.0f} tok/s" if done and seconds > 0 else "- tok/s"
                text = f"{text} tokens, {rate}"
            return Text(text, no_wrap=True)

    def fixed() -> Column:
        return Column(no_wrap=True)

    columns: list[Any] = [rp.TextColumn("{task.fields[prefix]}{task.description}",
                                        table_column=Column(no_wrap=True, overflow="ellipsis"))]
    columns += ([rp.BarColumn(bar_width=20, table_column=fixed()), Count(table_column=fixed())]
                if counted else [rp.SpinnerColumn(table_column=fixed())])
    return [*columns, Elapsed(table_column=fixed())]


class StderrProgress:
    """Shows steps that take longer than ``delay`` seconds on ``stream`` (a terminal).

    ``enabled=None`` decides by the streams: on only when ``stream`` and
    stdout are both terminals. Setting ``enabled`` later turns it off or on
    for the steps to come (the server does, once the model is loaded).
    """

    def __init__(self, stream: TextIO | None = None, delay: float = 1.0,
                 prefix: str = "nanocompile: ", enabled: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.delay = delay
        self.prefix = prefix
        self.enabled = (is_terminal(self.stream) and is_terminal(sys.stdout)
                        if enabled is None else enabled)
        self._lock = threading.Lock()
        self._step: str | None = None
        self._started = 0.0
        self._done, self._total = 0, 0
        self._timer: threading.Timer | None = None
        self._live: RichProgress | None = None
        self._task: TaskID | None = None

    def __call__(self, what: str, done: int, total: int) -> None:
        with self._lock:
            if not self.enabled and self._step is None:
                return
            if what != self._step:
                self._finish_locked(show_summary=True)
                self._start_locked(what)
            self._done, self._total = done, total
            if self._live is not None and self._task is not None:
                self._live.update(self._task, completed=done, total=max(total, 1))
            if done >= total:
                self._finish_locked(show_summary=True)

    def abort(self) -> None:
        """End the current step without calling it done (an error interrupted it)."""
        with self._lock:
            self._finish_locked(show_summary=False)

    # -- internals (called with the lock held) ----------------------------

    def _start_locked(self, what: str) -> None:
        self._step, self._started = what, time.monotonic()
        self._timer = threading.Timer(self.delay, self._show)
        self._timer.daemon = True
        self._timer.start()

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import Progress as RichProgress

        with self._lock:
            if self._step is None or self._live is not None:
                return
            console = Console(file=self.stream, force_terminal=True, highlight=False)
            self._live = RichProgress(
                *_rich_columns(counted=self._total > 1), console=console, transient=True,
                redirect_stdout=False, redirect_stderr=False, refresh_per_second=8)
            self._task = self._live.add_task(
                self._step, total=max(self._total, 1), completed=self._done,
                started=self._started, tokens=self._step in TOKEN_STEPS, prefix=self.prefix)
            self._live.start()

    def _finish_locked(self, *, show_summary: bool) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._live is not None:
            self._live.stop()  # transient: the live line is erased
            self._live, self._task = None, None
            if show_summary:
                self._write(self._summary())
        self._step = None

    def _summary(self) -> str:
        seconds = time.monotonic() - self._started
        line = f"{self.prefix}{self._step}... done in {seconds:.1f} s"
        if self._step in TOKEN_STEPS and self._total > 0:
            rate = f", {self._total / seconds:,.0f} tok/s" if seconds > 0 else ""
            line += f" ({self._total:,} tokens{rate})"
        return line + "\n"

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

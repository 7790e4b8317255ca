"""Progress on slow steps (issue 21): the terminal reporter, quiet off a terminal, and
the library's steps that report (the prefill, perplexity's scoring).

Times: the reporter's delay is made short (0.05 s) and the "slow" steps sleep
well past it; no assertion depends on how long anything took.
"""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import numpy as np
import pytest

from nanocompile.api import load
from nanocompile.inference.perplexity import perplexity
from nanocompile.inference.progress import PREFILL, SCORING, StderrProgress

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def shown(out: io.StringIO) -> str:
    return ANSI.sub("", out.getvalue())


def test_a_fast_step_prints_nothing() -> None:
    out = Terminal()
    progress = StderrProgress(out, delay=0.5, enabled=True)
    progress("fast", 0, 1)
    progress("fast", 1, 1)
    progress(PREFILL, 0, 100)
    progress(PREFILL, 100, 100)
    assert out.getvalue() == ""


def test_a_slow_token_step_shows_a_bar_then_one_line() -> None:
    out = Terminal()
    progress = StderrProgress(out, delay=0.05, enabled=True)
    progress(PREFILL, 0, 1692)
    time.sleep(0.3)
    progress(PREFILL, 512, 1692)
    time.sleep(0.3)
    live = shown(out)
    assert "nanocompile: prefill" in live
    assert re.search(r"512/1,692 tokens, [\d,]+ tok/s", live), live
    progress(PREFILL, 1692, 1692)
    lines = shown(out).splitlines()
    assert re.fullmatch(r"nanocompile: prefill\.\.\. done in \d+\.\d s "
                        r"\(1,692 tokens, [\d,]+ tok/s\)", lines[-1]), lines


def test_a_slow_single_step_shows_its_elapsed_time() -> None:
    out = Terminal()
    progress = StderrProgress(out, delay=0.05, enabled=True)
    progress("compiling the model", 0, 1)
    time.sleep(0.3)
    assert re.search(r"nanocompile: compiling the model .*\d+\.\d s", shown(out))
    progress("compiling the model", 1, 1)
    assert re.fullmatch(r"nanocompile: compiling the model\.\.\. done in \d+\.\d s",
                        shown(out).splitlines()[-1])


def test_abort_ends_the_line_without_a_summary() -> None:
    out = Terminal()
    progress = StderrProgress(out, delay=0.05, enabled=True)
    progress("broken", 0, 1)
    time.sleep(0.2)
    progress.abort()
    assert "done in" not in shown(out)
    progress("next", 0, 1)
    progress("next", 1, 1)  # a fresh step after an abort: fast, nothing
    assert "next" not in shown(out)


def test_quiet_unless_stderr_and_stdout_are_terminals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: quiet when stdout or stderr is not a terminal."""
    monkeypatch.setattr("sys.stdout", Terminal())
    piped = io.StringIO()
    progress = StderrProgress(piped, delay=0.0)
    assert not progress.enabled
    progress("slow", 0, 2)
    time.sleep(0.1)
    progress("slow", 2, 2)
    assert piped.getvalue() == ""
    assert StderrProgress(Terminal()).enabled
    monkeypatch.setattr("sys.stdout", io.StringIO())  # stdout piped, stderr a terminal
    assert not StderrProgress(Terminal()).enabled


def test_perplexity_reports_its_tokens() -> None:
    calls: list[tuple[str, int, int]] = []
    ids = np.arange(10)
    perplexity(ids, lambda x: np.zeros((x.size, 16), np.float32), chunk=4,
               progress=lambda *a: calls.append(a))  # type: ignore[arg-type]
    assert calls == [(SCORING, 0, 10), (SCORING, 4, 10), (SCORING, 8, 10), (SCORING, 10, 10)]


def test_generation_reports_its_prefill_to_the_loads_progress(tiny_snapshot: Path) -> None:
    calls: list[tuple[str, int, int]] = []
    model = load(tiny_snapshot, backend="interpreter",
                 progress=lambda *a: calls.append(a))  # type: ignore[arg-type]
    calls.clear()
    result = model.generate("The capital of France is", max_tokens=2)
    n = result.prompt_tokens
    assert calls == [(PREFILL, 0, n), (PREFILL, n, n)]


def test_load_progress_true_is_the_terminal_reporter(tiny_snapshot: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``load(progress=True)``: the command line's reporter, told the prefill too."""
    import nanocompile.api

    made: list[Recording] = []

    class Recording(StderrProgress):
        def __init__(self) -> None:
            super().__init__(io.StringIO())
            self.calls: list[tuple[str, int, int]] = []
            made.append(self)

        def __call__(self, what: str, done: int, total: int) -> None:
            self.calls.append((what, done, total))

    monkeypatch.setattr(nanocompile.api, "StderrProgress", Recording)
    model = load(tiny_snapshot, backend="interpreter", progress=True)
    assert len(made) == 1
    made[0].calls.clear()
    n = model.generate("Hello", max_tokens=1).prompt_tokens
    assert made[0].calls == [(PREFILL, 0, n), (PREFILL, n, n)]
    load(tiny_snapshot, backend="interpreter", progress=False)
    assert len(made) == 1

"""Runs the lit/FileCheck suite under pytest, so one summary line covers both.

The dialects' tests (printing, parsing, verifiers: fast) run in the non-slow
suite, but for the graph and sched round trips (~5 s each: a dozen nc-opt
processes; test_graph_dialect.py, test_sched_dialect.py and test_nc_opt.py
round-trip those dialects quickly); the passes', targets' and frontend's (each
compiles or schedules, some build with gcc: ~60 s on 2 cores) in the full suite
only, for the non-slow suite's 3-minute budget.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).resolve().parents[1] / "lit"
FAST = ("dialects",)
# the non-slow suite's 3-minute budget; the full suite runs them
SLOW_DIALECT_FILES = ("graph/ops.mlir", "sched/ops.mlir")


def _run_lit(*paths: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import lit.main; lit.main.main()", "-s", "-j2",
         *map(str, paths)],
        capture_output=True, text=True, timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    passed = re.search(r"Passed\s*:\s*(\d+)", out)
    assert passed, f"lit ran no test:\n{out}"
    assert int(passed.group(1)) > 0, f"lit ran no test:\n{out}"
    assert not re.search(r"(Failed|Unresolved|Timed Out)\s*:", out), out


def _dialect_files(slow: bool) -> list[Path]:
    """The dialects' test files (lit.cfg.py's excludes left out): the slow ones or the rest."""
    dialects = LIT_DIR / "dialects"
    files = sorted(p.relative_to(dialects) for p in dialects.rglob("*.mlir"))
    files = [f for f in files if not {"Inputs", "Output"} & set(f.parts)]
    assert {f.as_posix() for f in files} >= set(SLOW_DIALECT_FILES)
    return [dialects / f for f in files if (f.as_posix() in SLOW_DIALECT_FILES) == slow]


def test_lit_dialects_pass() -> None:
    _run_lit(*_dialect_files(slow=False))


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_lit_dialect_round_trips_pass() -> None:
    _run_lit(*_dialect_files(slow=True))


@pytest.mark.slow  # ~60 s of compiles and gcc builds: the non-slow suite's 3-minute budget
def test_lit_passes_targets_frontend_pass() -> None:
    rest = sorted(p for p in LIT_DIR.iterdir() if p.is_dir() and p.name not in FAST)
    assert rest, f"no lit directories besides {FAST} in {LIT_DIR}"
    _run_lit(*rest)

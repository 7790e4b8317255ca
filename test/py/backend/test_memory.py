"""Memory by need (issue 14, point 3): arena plans at most 25 % over what a step
needs, long prompts within a memory limit, and one clear line when memory
cannot be had.

Before: plans were made at the symbols rounded up to a power of two (a
20,000-token prompt planned for 32,768: a 32 GiB arena on the tiny model) and a
prompt ran as one step (temporaries quadratic in its length); a failed
allocation was a NumPy ``MemoryError`` traceback.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from nanocompile.backend.runtime import OutOfMemoryError, allocate, plan_value

LIMIT = 1_610_612_736  # 1.5 GiB of address space for the child processes


def test_plan_value_bounds() -> None:
    values = [plan_value(n) for n in range(0, 70000)]
    assert values[:9] == list(range(9))
    for n, v in enumerate(values):
        assert n <= v <= max(8, n * 1.25), n
    assert all(a <= b for a, b in itertools.pairwise(values))  # monotone
    assert len(set(values)) < 150  # few distinct plans, as with powers of two


def test_allocation_failure_is_one_line_with_the_size() -> None:
    with pytest.raises(OutOfMemoryError, match=r"^out of memory: the test buffer needs "
                                               r"\d+\.\d GiB$"):
        allocate("the test buffer", [1 << 40, 1 << 20], "float32")


def _prlimit(*command: str) -> subprocess.CompletedProcess[str]:
    if subprocess.run(["prlimit", "--version"], capture_output=True).returncode != 0:
        pytest.skip("prlimit (util-linux) is not installed")
    return subprocess.run(["prlimit", f"--as={LIMIT}", *command], capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow  # ~10 s: an 8,000-token prefill of the tiny model
def test_long_prompt_within_a_memory_limit(tiny_snapshot: Path) -> None:
    """8,000 tokens under a 1.5 GiB limit: before, the plan's arena alone asked 2.0 GiB."""
    prompt = " ".join(["word"] * 8000)
    proc = _prlimit(sys.executable, "-m", "nanocompile.cli", "generate", prompt,
                    "--model", str(tiny_snapshot), "--max-tokens", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "prefill 8000 tokens" in proc.stderr


@pytest.mark.slow  # ~10 s
def test_memory_that_cannot_be_had_is_one_line(tiny_snapshot: Path) -> None:
    """All-position logits of 8,000 tokens are 4.5 GiB by themselves: a clear error."""
    script = ("import sys; from nanocompile import api\n"
              f"m = api.load({str(tiny_snapshot)!r})\n"
              "try:\n    m.logits([9707] * 8000)\n"
              "except MemoryError as e:\n    print(type(e).__name__, e)\n")
    proc = _prlimit(sys.executable, "-c", script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("OutOfMemoryError out of memory: "), proc.stdout
    assert "GiB" in proc.stdout

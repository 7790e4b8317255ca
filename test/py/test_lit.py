"""Runs the lit/FileCheck suite under pytest, so one summary line covers both."""

import re
import subprocess
import sys
from pathlib import Path

LIT_DIR = Path(__file__).resolve().parents[1] / "lit"


def test_lit_suite_passes() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import lit.main; lit.main.main()", "-s", "-j2",
         str(LIT_DIR)],
        capture_output=True, text=True, timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    passed = re.search(r"Passed\s*:\s*(\d+)", out)
    assert passed, f"lit ran no test:\n{out}"
    assert int(passed.group(1)) > 0, f"lit ran no test:\n{out}"
    assert not re.search(r"(Failed|Unresolved|Timed Out)\s*:", out), out

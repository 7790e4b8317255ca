"""bench/growth.py (``python -m bench growth``): decode steps after a short and
after a long prompt, alternated in pairs; the record's numbers come from the
steps it holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import main
from bench.growth import GATE, summarize


def test_summary_of_known_steps() -> None:
    short, long = [10.0, 12.0, 11.0, 10.0], [11.0, 15.0, 12.0, 12.0]
    r = summarize(short, long)
    assert r["ratio_of_medians"] == pytest.approx(12.0 / 10.5)
    assert r["ratio_of_minima"] == pytest.approx(1.1)
    assert r["paired_ratio_median"] == pytest.approx((1.1 + 1.2) / 2)  # of 1.1 1.25 1.0909 1.2
    # within 1.15x: 11 < 11.5, 15 > 13.8, 12 < 12.65, 12 > 11.5 -> 2 of 4
    assert (r["within_gate"]["wins"], r["within_gate"]["n"]) == (2, 4)
    assert r["gate"] == GATE


def test_a_tiny_run_is_recorded(tiny_snapshot: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    assert main(["growth", "--model", str(tiny_snapshot), "--short", "3", "--long", "20",
                 "--steps", "4", "--threads", "1,2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["kind"] == "growth"
    payload = record["payload"]
    assert (payload["short"], payload["long"], payload["steps"]) == (3, 20, 4)
    for t in ("1", "2"):
        r = payload["by_threads"][t]
        assert len(r["short_steps"]) == len(r["long_steps"]) == 4
        assert r["short_ms"]["n"] == 4
        assert r["long_ms"]["minimum"] > 0
    assert "within 1.15x in" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--short", "20", "--long", "20"], "--short must be at least 1 and below --long"),
    (["--steps", "1"], "--steps must be in 2..10000"),
    (["--threads", "two"], "--threads: expected comma-separated integers"),
    (["--threads", "0"], "each count must be in 1..256"),
])
def test_bad_arguments_are_one_line(argv: list[str], message: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["growth", *argv, "--no-append"]) == 1
    assert message in capsys.readouterr().err

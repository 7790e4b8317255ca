"""``python -m bench streams`` (bench/streams.c): every variant runs and reports
a rate (each tile variant's results were checked by the program against the
one-row tile's, bit for bit, before timing: it exits 1 otherwise); bad
arguments are one-line errors. No assertion on speed (the machine is shared:
bench/, not the tests, times)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import BenchError, main
from bench.streams import measure_streams

PATTERNS = [("read", 0), ("adjacent", 1), ("adjacent", 2), ("adjacent", 4), ("adjacent", 16),
            ("strided", 2), ("strided", 4), ("strided", 8), ("strided", 16)]


@pytest.mark.parametrize("pages", ["huge", "small"])
def test_every_variant_runs_and_reports_a_rate(pages: str) -> None:
    found = measure_streams(2, 1, pages)
    assert [(v["pattern"], v["rows"]) for v in found] == PATTERNS
    for v in found:
        assert v["ms"] > 0, v
        assert v["gbs"] > 0, v


def test_the_command_records_and_bad_arguments_are_one_line(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    out = tmp_path / "results.jsonl"
    assert main(["streams", "--mib", "2", "--passes", "1", "--results", str(out)]) == 0
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["kind"] == "streams"
    assert len(record["payload"]["variants"]) == len(PATTERNS)
    assert record["payload"]["pages"] == "huge"
    printed = capsys.readouterr().out
    assert "strided x4" in printed
    assert "2 MiB in 2 MiB pages" in printed
    with pytest.raises(BenchError, match="at least 1"):
        measure_streams(0, 1)

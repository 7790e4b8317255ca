"""``python -m bench.matmul``: the matmul-shape benchmark's protocol, not its speed.

The smoke mode (tiny shapes, 2 rounds) runs end to end and appends one record
to a temporary file; a wrong nanocompile output is refused before any time is
taken; the roofline comes from a clean probe record of this machine, else the
quick probe. Nothing here asserts a wall time.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]

from bench import matmul, results, stats  # noqa: E402

BANDWIDTH = {"1": 10.0, "2": 20.0}
PEAK = {"1": 50.0, "2": 100.0}


def _probe_record(clean: int = 5) -> dict[str, Any]:
    """A probe record for this machine with made-up limits (``clean`` passes each)."""
    limits = {
        "bandwidth_gbs": BANDWIDTH,
        "peak_gops": {matmul.PEAK_KERNEL: PEAK, "fma_f32x8": {"1": 80.0, "2": 160.0}},
        "clean_passes": {"bandwidth": {"1": 5, "2": clean},
                         matmul.PEAK_KERNEL: {"1": 5, "2": 5}},
    }
    return results.make_record("probe", {"machine_limits": limits}, threads=[1, 2])


@pytest.fixture(scope="module")
def probe_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("probe") / "probe.jsonl"
    results.append_record(_probe_record(), path)
    return path


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory, probe_file: Path) -> tuple[Path, int]:
    """One smoke run at 1 and 2 threads: (results file, exit code)."""
    path = tmp_path_factory.mktemp("bench") / "results.jsonl"
    code = matmul.main(["--smoke", "--threads", "1,2", "--results", str(path),
                        "--probe-results", str(probe_file)])
    return path, code


def test_smoke_appends_one_matmul_record(smoke: tuple[Path, int]) -> None:
    path, code = smoke
    assert code == 0
    records = results.load_records(path)
    assert [r["kind"] for r in records] == ["matmul"]
    record = records[0]
    assert record["git"]["commit"]
    assert record["machine"]["id"]
    assert record["versions"]["numpy"]
    assert record["threads"]["requested"] == [1, 2]
    payload = record["payload"]
    assert payload["settings"]["smoke"] is True
    assert payload["settings"]["rounds"] == 2
    assert payload["limits"]["source"] == "probe record"
    assert payload["limits"]["bandwidth_gbs"] == BANDWIDTH
    assert payload["limits"]["peak_gflops"] == PEAK
    assert set(payload["blas"]) == {"1", "2"}


def test_smoke_covers_every_shape_row_count_and_thread_count(smoke: tuple[Path, int]) -> None:
    cases = results.load_records(smoke[0])[0]["payload"]["cases"]
    keys = sorted((c["shape"], c["rows"], c["threads"]) for c in cases)
    assert keys == sorted((s, r, t) for s in matmul.SHAPE_NAMES for r in matmul.ROWS
                          for t in (1, 2))
    for c in cases:
        assert c["check_rel_error"]["nanocompile"] <= matmul.RTOL
        assert c["check_rel_error"]["numpy"] <= matmul.RTOL
        assert c["verdict"] in {"win", "loss", "n.s."}


def test_smoke_statistics_and_rooflines_follow_from_the_rounds(smoke: tuple[Path, int]) -> None:
    payload = results.load_records(smoke[0])[0]["payload"]
    by_case = {(c["metric"], c["threads"]): c for c in payload["cases"]}
    seen = set()
    for m in payload["measurements"]:
        values = m["values"]
        assert len(values) == m["n"] == 2
        assert all(v > 0 for v in values)
        assert m["median"] == stats.median(values)
        assert m["min"] == min(values)
        case = by_case[(m["metric"], m["threads"])]
        seen.add(m["engine"])
        if m["engine"] == "nanocompile":
            assert case["pct_roofline"]["nanocompile"] == pytest.approx(
                100 * case["roofline_ms"] / m["median"])
    assert seen == {"nanocompile", "numpy", "nanocompile_kernel"}
    for c in payload["cases"]:
        shape = next(s for s in matmul.SMOKE_SHAPES if s.name == c["shape"])
        t = str(c["threads"])
        expected = (1e3 * shape.weight_bytes / (BANDWIDTH[t] * 1e9) if c["rows"] == 1
                    else 1e3 * shape.flops(c["rows"]) / (PEAK[t] * 1e9))
        assert c["roofline_ms"] == pytest.approx(expected)


def test_goals_are_judged_on_every_shape() -> None:
    def case(shape: str, rows: int, pct: float, verdict: str) -> dict[str, Any]:
        return {"shape": shape, "rows": rows, "threads": 1, "verdict": verdict,
                "ratio_nanocompile_over_numpy": 0.9 if verdict == "win" else 1.1,
                "pct_roofline": {"nanocompile": pct, "nanocompile_kernel": pct}}

    goals = matmul.evaluate_goals([case("a", 1, 90, "win"), case("b", 1, 84.9, "win"),
                                   case("a", 64, 81, "loss"), case("b", 64, 80, "n.s.")])["1"]
    assert goals["bandwidth_rows1"]["met"] is False
    assert goals["bandwidth_rows1"]["met_by"] == ["a"]
    assert goals["peak_rows64"]["met"] is True
    assert goals["ahead_of_openblas"]["wins"] == 2
    assert goals["ahead_of_openblas"]["met"] is False  # 2 of 4 is not most


def test_a_wrong_nanocompile_result_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              probe_file: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    real = matmul.run_nanocompile

    def corrupt(program: Any, x: np.ndarray) -> np.ndarray:
        y = real(program, x)
        y[-1, -1] += np.float32(0.01) * np.max(np.abs(y))  # one element off by 1% of the scale
        return y

    monkeypatch.setattr(matmul, "run_nanocompile", corrupt)
    path = tmp_path / "results.jsonl"
    code = matmul.main(["--smoke", "--threads", "1", "--shapes", "down_proj",
                        "--results", str(path), "--probe-results", str(probe_file)])
    err = capsys.readouterr().err
    assert code == 1
    assert "refused" in err
    assert "nanocompile down_proj" in err
    assert "Traceback" not in err
    assert not path.exists()


def test_check_output_tolerates_reordered_sums_only() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 4864), dtype=np.float32)
    w = rng.standard_normal((64, 4864), dtype=np.float32) * np.float32(0.02)
    reference = x.astype(np.float64) @ w.T.astype(np.float64)
    forward = x @ w.T
    pairwise = (x[:, None, ::-1] * w[None, :, ::-1]).sum(-1, dtype=np.float32)  # another order
    assert matmul.check_output("fwd", forward, reference) < 1e-5
    assert matmul.check_output("pairwise", pairwise, reference) < 1e-5
    bad = forward.copy()
    bad[2, 7] = 0.0
    with pytest.raises(matmul.ResultMismatch, match="refused"):
        matmul.check_output("zeroed", bad, reference)
    bad[2, 7] = np.nan
    with pytest.raises(matmul.ResultMismatch, match="non-finite"):
        matmul.check_output("nan", bad, reference)
    with pytest.raises(matmul.ResultMismatch, match="shape"):
        matmul.check_output("short", forward[:3], reference)


def test_probe_record_must_be_clean_else_the_quick_probe(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    path = tmp_path / "probe.jsonl"
    results.append_record(_probe_record(), path)
    results.append_record(_probe_record(clean=0), path)  # newer, but one figure all disturbed
    limits = matmul.machine_limits([1, 2], path)
    assert limits["source"] == "probe record"
    assert limits["bandwidth_gbs"] == BANDWIDTH

    calls = []

    def quick(threads: list[int], *, quick: bool = False) -> dict[str, Any]:
        calls.append((threads, quick))
        return {"bandwidth_gbs": {"3": 7.0}, "peak_gops": {matmul.PEAK_KERNEL: {"3": 9.0}},
                "measured_at": 0.0}

    from bench import probe

    monkeypatch.setattr(probe, "measure_machine", quick)
    limits = matmul.machine_limits([3], path)  # no record covers 3 threads
    assert calls == [([3], True)]
    assert limits["quick"] is True
    assert limits["source"].startswith("quick probe")
    assert limits["bandwidth_gbs"] == {"3": 7.0}
    assert limits["peak_gflops"] == {"3": 9.0}


@pytest.mark.parametrize(("argv", "message"), [
    (["--threads", "0"], "--threads"),
    (["--threads", "a,b"], "--threads"),
    (["--shapes", "qkv"], "unknown qkv"),
    (["--rounds", "0"], "--rounds"),
])
def test_bad_flags_are_one_line_errors(argv: list[str], message: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    code = matmul.main(["--smoke", "--results", str(tmp_path / "r.jsonl"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert message in err
    assert len(err.splitlines()) == 1
    assert err.startswith("bench matmul:")


def test_module_runs_with_help_and_rejects_unknown_flags() -> None:
    run = [sys.executable, "-m", "bench.matmul"]
    ok = subprocess.run([*run, "--help"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0
    assert "--shapes" in ok.stdout
    assert "--smoke" in ok.stdout
    bad = subprocess.run([*run, "--bogus"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "unrecognized arguments" in bad.stderr
    assert "Traceback" not in bad.stderr

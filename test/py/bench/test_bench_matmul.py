"""``python -m bench.matmul``: the matmul-shape benchmark's protocol, not its speed.

The smoke mode (tiny shapes, 2 rounds) runs end to end and appends one record
to a temporary file; a wrong nanocompile output is refused before any time is
taken; the roofline comes from a clean probe record of this machine, else the
quick probe. Nothing here asserts a wall time.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]

from bench import matmul, probe, results, stats  # noqa: E402

BANDWIDTH = {"1": 10.0, "2": 20.0}
MUL_ADD = {"1": 50.0, "2": 100.0}
FMA = {"fma_f32x8": {"1": 80.0, "2": 160.0}, "fma_f32x16": {"1": 150.0, "2": 300.0}}
# The widest FMA this CPU has, read from /proc/cpuinfo here (not through bench's helpers).
HAS_AVX512F = "avx512f" in next(
    (line for line in Path("/proc/cpuinfo").read_text().splitlines()
     if line.startswith("flags")), "").split()
PEAK_KERNEL = "fma_f32x16" if HAS_AVX512F else "fma_f32x8"
PEAK = FMA[PEAK_KERNEL]


def _probe_record(clean: int = 5, fma_clean: int = 5, vnni_clean: int = 5) -> dict[str, Any]:
    """A probe record for this machine with made-up limits (``clean`` passes each)."""
    limits = {
        "bandwidth_gbs": BANDWIDTH,
        "peak_gops": {"mul_add_f32x8": MUL_ADD, **FMA, "vnni_i8x32": {"1": 1.0, "2": 2.0}},
        "clean_passes": {"bandwidth": {"1": 5, "2": clean}, "mul_add_f32x8": {"1": 5, "2": 5},
                         "fma_f32x8": {"1": 5, "2": fma_clean},
                         "fma_f32x16": {"1": 5, "2": fma_clean},
                         "vnni_i8x32": {"1": 5, "2": vnni_clean}},
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


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
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
    assert payload["limits"]["peak_kernel"] == PEAK_KERNEL
    assert payload["limits"]["peak_gflops"] == PEAK
    assert payload["limits"]["mul_add_gflops"] == MUL_ADD
    assert set(payload["blas"]) == {"1", "2"}
    kind = payload["machine_kind"]
    assert kind["kind"] == ("avx512" if HAS_AVX512F else "avx2-only")
    assert kind["peak_kernel"] == PEAK_KERNEL
    assert kind["cpu_model"] == record["machine"]["cpu_model"]
    assert kind["nanocompile_arch"] in {"scalar", "avx2", "avx512"}
    assert set(payload["goals"]) == set(payload["goals_issue6"]) == {"1", "2"}


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_smoke_covers_every_shape_row_count_and_thread_count(smoke: tuple[Path, int]) -> None:
    cases = results.load_records(smoke[0])[0]["payload"]["cases"]
    keys = sorted((c["shape"], c["rows"], c["threads"]) for c in cases)
    assert keys == sorted((s, r, t) for s in matmul.SHAPE_NAMES for r in matmul.ROWS
                          for t in (1, 2))
    for c in cases:
        assert c["check_rel_error"]["nanocompile"] <= matmul.RTOL
        assert c["check_rel_error"]["numpy"] <= matmul.RTOL
        assert c["verdict"] in {"win", "loss", "n.s."}


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
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
        expected6 = (expected if c["rows"] == 1
                     else 1e3 * shape.flops(c["rows"]) / (MUL_ADD[t] * 1e9))
        assert c["issue6"]["roofline_ms"] == pytest.approx(expected6)


def _case(shape: str, rows: int, kernel_pct: float, verdict: str = "n.s.",
          wall_pct: float | None = None, threads: int = 1) -> dict[str, Any]:
    """A synthetic case summary with the fields the goals read."""
    pct = {"nanocompile": kernel_pct if wall_pct is None else wall_pct,
           "nanocompile_kernel": kernel_pct}
    return {"shape": shape, "rows": rows, "threads": threads, "verdict": verdict,
            "bound": "bandwidth" if rows == 1 else "peak fma_f32x16",
            "ratio_nanocompile_over_numpy": 0.9 if verdict == "win" else 1.1,
            "pct_roofline": pct, "issue6": {"pct_roofline": pct}}


def test_issue6_goals_are_judged_on_every_shape() -> None:
    goals = matmul.evaluate_issue6_goals([_case("a", 1, 90), _case("b", 1, 84.9),
                                          _case("a", 64, 81), _case("b", 64, 80)])["1"]
    assert goals["bandwidth_rows1"]["met"] is False
    assert goals["bandwidth_rows1"]["met_by"] == ["a"]
    assert goals["peak_rows64"]["met"] is True
    assert "issue 6 (earlier goal)" in matmul.format_issue6_goals({"1": goals})


def _all_shapes(peak: float, bandwidth: float, **overrides: float) -> list[dict[str, Any]]:
    """Every model shape at both row counts with one kernel % each (overrides by
    ``<shape>_<rows>``)."""
    return [_case(n, rows, overrides.get(f"{n}_{rows}", peak if rows == 64 else bandwidth))
            for n in matmul.SHAPE_NAMES for rows in matmul.ROWS]


def test_the_five_large_shapes_are_the_five_largest_by_flops() -> None:
    by_flops = sorted(matmul.SHAPES, key=lambda s: s.flops(64), reverse=True)
    assert set(matmul.LARGE_SHAPES) == {s.name for s in by_flops[:5]}
    assert {s.name for s in by_flops[5:]} == {"k_proj", "v_proj"}


def test_fma_peak_goal_is_met_at_85_percent_on_the_large_shapes_only() -> None:
    # k_proj and v_proj are not judged: 10 % on them changes nothing
    goals = matmul.evaluate_goals(_all_shapes(85.0, 90.0, k_proj_64=10, v_proj_64=10))
    g = goals["1"]["fma_peak_rows64"]
    assert g["met"] is True
    assert g["shapes"] == list(matmul.LARGE_SHAPES)
    assert g["met_by"] == list(matmul.LARGE_SHAPES)
    assert g["missed"] == []
    assert g["floor"] == "peak fma_f32x16"


def test_fma_peak_goal_missed_by_one_shape_names_it() -> None:
    goals = matmul.evaluate_goals(_all_shapes(90.0, 90.0, lm_head_64=84.9))
    g = goals["1"]["fma_peak_rows64"]
    assert g["met"] is False
    assert g["missed"] == ["lm_head"]
    line = matmul.format_goals(goals).splitlines()[0]
    assert "NOT MET" in line
    assert "4/5 on kernel time" in line
    assert "missed lm_head 85%" in line


def test_peak_goal_is_judged_on_kernel_time_not_the_call() -> None:
    cases = [_case(n, 64, 90.0, wall_pct=50.0) for n in matmul.LARGE_SHAPES]
    g = matmul.evaluate_goals(cases)["1"]["fma_peak_rows64"]
    assert g["met"] is True
    assert g["wall_met_by"] == []
    cases = [_case(n, 64, 50.0, wall_pct=90.0) for n in matmul.LARGE_SHAPES]
    assert matmul.evaluate_goals(cases)["1"]["fma_peak_rows64"]["met"] is False


def test_bandwidth_goal_on_gate_up_down_and_lm_head() -> None:
    met = matmul.evaluate_goals(_all_shapes(90.0, 85.0, q_proj_1=20, k_proj_1=20))
    g = met["1"]["bandwidth_rows1"]
    assert g["met"] is True
    assert g["shapes"] == ["gate_up", "down_proj", "lm_head"]
    missed = matmul.evaluate_goals(_all_shapes(90.0, 90.0, down_proj_1=80))
    g = missed["1"]["bandwidth_rows1"]
    assert g["met"] is False
    assert g["missed"] == ["down_proj"]
    assert g["met_by"] == ["gate_up", "lm_head"]


def test_a_partial_run_cannot_meet_a_goal() -> None:
    cases = [_case("gate_up", 64, 99.0), _case("gate_up", 1, 99.0)]
    goals = matmul.evaluate_goals(cases)["1"]
    assert goals["fma_peak_rows64"]["met"] is None
    assert goals["fma_peak_rows64"]["not_measured"] == ["q_proj", "o_proj", "down_proj",
                                                        "lm_head"]
    assert "INCOMPLETE" in matmul.format_goals({"1": goals})
    only_small = matmul.evaluate_goals([_case("k_proj", 64, 99.0)])["1"]
    assert "fma_peak_rows64" not in only_small  # none of its shapes ran: not reported


def test_ahead_of_openblas_needs_wins_on_more_than_half_the_cases() -> None:
    names = matmul.SHAPE_NAMES
    cases = [_case(n, r, 90.0, "win" if i < 8 else "loss")
             for i, (n, r) in enumerate((n, r) for n in names for r in matmul.ROWS)]
    a = matmul.evaluate_goals(cases)["1"]["ahead_of_openblas"]
    assert (a["cases"], a["wins"], a["losses"], a["met"]) == (14, 8, 6, True)
    cases = [{**c, "verdict": "n.s." if c["verdict"] == "win" and i % 2 else c["verdict"]}
             for i, c in enumerate(cases)]  # 4 of the 8 wins no longer significant
    a = matmul.evaluate_goals(cases)["1"]["ahead_of_openblas"]
    assert (a["wins"], a["not_significant"], a["met"]) == (4, 4, False)


def test_goals_are_per_thread_count() -> None:
    cases = ([_case(n, 64, 90.0, threads=1) for n in matmul.LARGE_SHAPES]
             + [_case(n, 64, 60.0, threads=2) for n in matmul.LARGE_SHAPES])
    goals = matmul.evaluate_goals(cases)
    assert goals["1"]["fma_peak_rows64"]["met"] is True
    assert goals["2"]["fma_peak_rows64"]["met"] is False


def test_latest_full_run_per_machine_kind() -> None:
    def record(kind: str, time: str, smoke: bool = False, judged: bool = True
               ) -> dict[str, Any]:
        goals = matmul.evaluate_goals(_all_shapes(90.0, 90.0))
        payload: dict[str, Any] = {"settings": {"smoke": smoke}, "goals": goals}
        if judged:
            payload["machine_kind"] = {"kind": kind, "cpu_model": f"cpu {kind}",
                                       "nanocompile_arch": "avx2", "peak_kernel": "fma_f32x8"}
        return {"kind": "matmul", "time": time, "git": {"commit": "abcdef0123"},
                "payload": payload}

    records = [record("avx2-only", "t1"), record("avx512", "t2"), record("avx2-only", "t3"),
               record("avx2-only", "t4", smoke=True), record("avx512", "t5", judged=False)]
    latest = matmul.latest_by_machine_kind(records)
    assert {k: r["time"] for k, r in latest.items()} == {"avx2-only": "t3", "avx512": "t2"}
    text = matmul.format_by_machine_kind(latest)
    assert "avx2-only (cpu avx2-only, arch avx2, t3, git abcdef0) threads 1: peak@64 MET 5/5"\
        in text
    assert "no full matmul run" in matmul.format_by_machine_kind({})


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
    for label, kwargs in (("first", {}),
                          ("bandwidth disturbed", {"clean": 0}),  # newer, but all disturbed
                          ("fma disturbed", {"fma_clean": 0})):
        results.append_record(_probe_record(**kwargs) | {"time": label}, path)
    limits = matmul.machine_limits([1, 2], path)
    assert limits["source"] == "probe record"
    assert limits["probe_time"] == "first"
    assert limits["bandwidth_gbs"] == BANDWIDTH
    assert limits["peak_gflops"] == PEAK
    # a disturbed int8 kernel is not a figure used here
    results.append_record(_probe_record(vnni_clean=0) | {"time": "newest"}, path)
    assert matmul.machine_limits([1, 2], path)["probe_time"] == "newest"

    calls = []

    def quick(threads: list[int], *, quick: bool = False) -> dict[str, Any]:
        calls.append((threads, quick))
        return {"bandwidth_gbs": {"3": 7.0},
                "peak_gops": {PEAK_KERNEL: {"3": 9.0}, "mul_add_f32x8": {"3": 4.0}},
                "measured_at": 0.0}

    monkeypatch.setattr(probe, "measure_machine", quick)
    limits = matmul.machine_limits([3], path)  # no record covers 3 threads
    assert calls == [([3], True)]
    assert limits["quick"] is True
    assert limits["source"].startswith("quick probe")
    assert limits["bandwidth_gbs"] == {"3": 7.0}
    assert limits["peak_kernel"] == PEAK_KERNEL
    assert limits["peak_gflops"] == {"3": 9.0}
    assert limits["mul_add_gflops"] == {"3": 4.0}


@pytest.mark.parametrize(("argv", "message"), [
    (["--threads", "0"], "--threads"),
    (["--threads", "a,b"], "--threads"),
    (["--shapes", "qkv"], "unknown qkv"),
    (["--rounds", "0"], "--rounds"),
    (["--rows", "0"], "--rows"),
    (["--rows", "1,1"], "--rows"),
    (["--rows", "one"], "--rows"),
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


def test_bf16_weights_decode_only_run(tmp_path: Path, probe_file: Path) -> None:
    """``--weights bf16 --rows 1``: the weights stored as bf16 (2 bytes per
    element in the roofline, the f32 values rounded to bf16), one row only,
    recorded apart from the f32 runs (metric suffix, settings) and never the
    latest full run of its machine kind."""
    path = tmp_path / "bf16.jsonl"
    code = matmul.main(["--smoke", "--threads", "1", "--weights", "bf16", "--rows", "1",
                        "--results", str(path), "--probe-results", str(probe_file)])
    assert code == 0
    (record,) = results.load_records(path)
    payload = record["payload"]
    assert payload["settings"]["weights"] == "bf16"
    assert payload["settings"]["rows"] == [1]
    cases = payload["cases"]
    assert sorted(c["shape"] for c in cases) == sorted(matmul.SHAPE_NAMES)
    for c in cases:
        assert c["rows"] == 1
        assert c["metric"].endswith("_bf16_ms")
        elements = c["n"] * c["k"] * (2 if c["pair"] else 1) + (c["n"] if c["bias"] else 0)
        assert c["weight_bytes"] == 2 * elements
        assert c["roofline_ms"] == pytest.approx(1e3 * 2 * elements / (BANDWIDTH["1"] * 1e9))
    assert "fma_peak_rows64" not in payload["goals"]["1"]  # 64 rows not measured
    assert payload["goals"]["1"]["bandwidth_rows1"]["shapes"] == list(matmul.BANDWIDTH_SHAPES)
    assert matmul.latest_by_machine_kind([record]) == {}


def test_bf16_weights_are_the_f32_weights_rounded() -> None:
    from nanocompile.checkpoint.safetensors import bf16_to_f32

    shape = matmul.SMOKE_SHAPES[0]
    f32 = matmul.make_weights(shape)
    bf16 = matmul.make_weights(dataclasses.replace(shape, weights="bf16"))
    assert set(bf16) == set(f32)
    for name, bits in bf16.items():
        assert bits.dtype == np.uint16
        wide = bf16_to_f32(bits)
        # round to nearest: within half a bf16 step (8 significant bits) of the f32 value
        assert np.all(np.abs(wide - f32[name]) <= np.abs(f32[name]) * 2.0 ** -8)
        assert np.array_equal(matmul.widened(dataclasses.replace(shape, weights="bf16"),
                                             {name: bits})[name], wide)
    assert matmul.widened(shape, f32) is f32


@pytest.mark.parametrize("weights", ["f32", "bf16"])
def test_weights_and_inputs_start_on_a_cache_line(weights: str) -> None:
    """As the model's own weights and activations do: numpy puts arrays this large
    16 bytes into a page, where every AVX-512 load of f32 weights splits across
    two cache lines (the kernels ran 1.3-1.5x slower in `bench matmul` than in
    the model until session 18)."""
    shape = dataclasses.replace(next(s for s in matmul.SHAPES if s.name == "o_proj"),
                                weights=weights)
    arrays = [*matmul.make_weights(shape).values(), matmul.make_input(shape, 64)]
    assert [a.ctypes.data % 64 for a in arrays] == [0] * len(arrays)
    again = matmul.make_weights(shape)  # the same values, wherever they are placed
    assert all(np.array_equal(a, b) for a, b in zip(arrays, again.values()))

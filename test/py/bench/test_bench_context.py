"""``python -m bench context``: arguments, the protocol, issue 19's gates, the records,
and a smoke run on the tiny snapshot.

The gates are checked on made-up numbers whose medians and ratios are worked
out by hand in the comments; the protocol (every slot at every length every
round, a failing engine dropped only from the lengths it failed at) on fake
engines that take no time; the smoke run builds nanocompile (through
``nanocompile.load``) and the NumPy engine on the tiny snapshot and checks the
records, the plot and that both generated the same greedy tokens (an engine
that computes nothing cannot look fast). Nothing asserts a speed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import bench
from bench import context, results
from bench.context import (
    DECODE,
    LLAMA_F32,
    NUMPY,
    PREFILL,
    Built,
    Settings,
    evaluate_gates,
    format_gates,
    make_records,
    measure,
    metric_name,
    settings_from,
    summarize,
)
from bench.engines import EngineUnavailable

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None
OURS = "nanocompile-bf16"


def parse(*argv: str) -> Settings:
    return settings_from(bench.build_parser().parse_args(["context", *argv]))


# --------------------------------------------------------------------------
# arguments


def test_defaults_are_issue_19s_measurement() -> None:
    s = parse()
    assert s.engines == ("nanocompile", "llama-f32", "numpy")
    assert s.weights == (None,)  # the snapshot's format: bf16 for the synthetic model
    assert s.threads == (1, 2)
    assert s.contexts == (128, 1024, 4096)
    assert (s.rounds, s.decode_steps) == (3, 16)
    assert s.record
    assert s.plot_path == context.DEFAULT_OUT
    assert s.results_path == results.RESULTS_PATH
    # the longest prompt, its first token and 16 decode steps: 4096 + 1 + 16
    assert s.capacity == 4113
    assert s.metrics[:2] == ["prefill_ms_per_token@128", "decode_ms_per_token@128"]
    assert len(s.metrics) == 6


def test_lists_are_sorted_and_deduplicated() -> None:
    s = parse("--contexts", "4096,128,1024,128", "--threads", "2,1,2",
              "--engines", "numpy,nanocompile,numpy", "--weights", "f32,bf16,f32",
              "--rounds", "1", "--decode-steps", "4", "--no-append", "--no-plot")
    assert s.contexts == (128, 1024, 4096)
    assert s.threads == (1, 2)
    assert s.engines == ("numpy", "nanocompile")
    assert s.weights == ("f32", "bf16")
    assert (s.rounds, s.decode_steps, s.record, s.plot_path) == (1, 4, False, None)
    assert parse("--no-record").record is False


@pytest.mark.parametrize(("argv", "message"), [
    (["--engines", "torch"], "--engines: unknown torch; choose from nanocompile,llama-f32,numpy"),
    (["--engines", ","], "--engines: unknown (none given)"),
    (["--contexts", "128,x"], "--contexts wants comma-separated integers, got '128,x'"),
    (["--contexts", "0"], "--contexts wants integers in 1..32768, got '0'"),
    (["--threads", "0"], "--threads wants integers in 1..256"),
    (["--rounds", "0"], "--rounds must be in 1..1000, got 0"),
    (["--decode-steps", "0"], "--decode-steps must be in 1..4096, got 0"),
    (["--weights", "f16"], "--weights: unknown f16; choose from "),
    (["--engines", "numpy", "--weights", "f32"], "--engines leaves it out"),
    (["--model", "/nonexistent/snapshot"], "--model /nonexistent/snapshot: not a directory"),
])
def test_bad_arguments_are_one_line(argv: list[str], message: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["context", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bench context: error: ")
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_a_context_beyond_the_model_is_refused_before_building(
        tiny_snapshot: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the tiny config keeps Qwen2.5's 32,768 positions: 32,768 + 1 + 16 do not fit
    assert bench.main(["context", "--model", str(tiny_snapshot), "--contexts", "32768",
                       "--no-record", "--no-plot"]) == 1
    err = capsys.readouterr().err
    assert "(32785 positions) exceed the model's context of 32768" in err
    assert "building" not in err


# --------------------------------------------------------------------------
# the gates, on made-up numbers


def _m(engine: str, threads: int, phase: str, context_tokens: int, values: list[float],
       median: float) -> dict[str, Any]:
    """A measurement as ``summarize`` makes it, the median given by hand."""
    return {"engine": engine, "threads": threads, "metric": metric_name(phase, context_tokens),
            "phase": phase, "context_tokens": context_tokens, "values": values,
            "median": median, "min": min(values)}


def _made_up() -> list[dict[str, Any]]:
    return [
        # 1 thread, prefill @1024: ours median 11, llama 9.5 -> 11 / 9.5 = 1.158 <= 1.2
        _m(OURS, 1, PREFILL, 1024, [10.0, 12.0, 11.0], 11.0),
        _m(LLAMA_F32, 1, PREFILL, 1024, [10.0, 9.0, 9.5], 9.5),
        # prefill @4096: 30 / 24 = 1.25 > 1.2
        _m(OURS, 1, PREFILL, 4096, [30.0, 31.0, 29.0], 30.0),
        _m(LLAMA_F32, 1, PREFILL, 4096, [24.0, 25.0, 23.0], 24.0),
        # decode: ours 59 / 51 = 1.157 > 1.15; llama 42 / 40 = 1.05
        _m(OURS, 1, DECODE, 128, [50.0, 52.0, 51.0], 51.0),
        _m(OURS, 1, DECODE, 4096, [58.0, 59.0, 60.0], 59.0),
        _m(LLAMA_F32, 1, DECODE, 128, [40.0, 40.0, 40.0], 40.0),
        _m(LLAMA_F32, 1, DECODE, 4096, [42.0, 42.0, 42.0], 42.0),
        # 2 threads: no llama.cpp; ours decode 58 / 51 = 1.137 <= 1.15
        _m(OURS, 2, PREFILL, 1024, [6.0, 6.0, 6.0], 6.0),
        _m(OURS, 2, DECODE, 128, [50.0, 51.0, 52.0], 51.0),
        _m(OURS, 2, DECODE, 4096, [58.0, 58.5, 57.0], 58.0),
        # the NumPy engine is in no gate
        _m(NUMPY, 1, PREFILL, 1024, [1.0, 1.0, 1.0], 1.0),
    ]


def test_gates_on_made_up_numbers() -> None:
    gates = evaluate_gates(_made_up(), threads=(1, 2))
    assert set(gates["engines"]) == {OURS}
    ours = gates["engines"][OURS]
    p1024 = ours["prefill_vs_llama_f32"]["1"]["1024"]
    assert p1024["met"] is True
    assert p1024["ratio"] == pytest.approx(11 / 9.5)
    assert p1024["min_ratio"] == pytest.approx(10 / 9)
    # rounds: 10 < 1.2*10 = 12 win, 12 > 1.2*9 = 10.8 loss, 11 < 1.2*9.5 = 11.4 win
    assert (p1024["sign_test_within_factor"]["wins"],
            p1024["sign_test_within_factor"]["n"]) == (2, 3)
    p4096 = ours["prefill_vs_llama_f32"]["1"]["4096"]
    assert p4096["met"] is False
    assert p4096["ratio"] == pytest.approx(1.25)
    d1 = ours["decode_growth"]["1"]
    assert d1["met"] is False
    assert d1["ratio"] == pytest.approx(59 / 51)
    d2 = ours["decode_growth"]["2"]
    assert d2["met"] is True
    assert d2["ratio"] == pytest.approx(58 / 51)
    for c in ("1024", "4096"):  # no llama.cpp at 2 threads: not judged, with the reason
        g = ours["prefill_vs_llama_f32"]["2"][c]
        assert g["met"] is None
        assert LLAMA_F32 in g["reason"]
    assert "nanocompile-bf16" in ours["prefill_vs_llama_f32"]["2"]["4096"]["reason"]
    llama = gates["llama_decode_growth"]
    assert llama["1"]["ratio"] == pytest.approx(42 / 40)
    assert llama["1"]["met"] is True
    assert llama["2"]["met"] is None


def test_gate_lines_say_met_and_missed_with_the_numbers() -> None:
    text = format_gates(evaluate_gates(_made_up(), threads=(1, 2)))
    lines = text.splitlines()
    assert lines[0].startswith("issue 19 gates")

    def line(start: str) -> str:
        found = [x for x in lines if x.strip().startswith(start)]
        assert len(found) == 1, (start, text)
        return found[0]

    assert line("nanocompile-bf16 prefill @1024 within 1.2x of llama-f32, 1 thr: MET "
                "(11.00 vs 9.50 ms/token: 1.16x; minima 1.11x; within 1.2x in 2/3 rounds)")
    assert line("nanocompile-bf16 prefill @4096 within 1.2x of llama-f32, 1 thr: MISSED "
                "(30.00 vs 24.00 ms/token: 1.25x")
    assert line("nanocompile-bf16 decode @4096 <= 1.15x decode @128, 1 thr: MISSED "
                "(59.00 vs 51.00 ms/token: 1.157x)")
    assert line("nanocompile-bf16 decode @4096 <= 1.15x decode @128, 2 thr: MET "
                "(58.00 vs 51.00 ms/token: 1.137x)")
    assert "not judged: no prefill_ms_per_token@1024 of llama-f32 at 2 thr" in line(
        "nanocompile-bf16 prefill @1024 within 1.2x of llama-f32, 2 thr")
    assert line("reference: llama-f32 decode @4096 / decode @128, 1 thr: "
                "42.00 vs 40.00 ms/token: 1.050x")
    assert lines[-1] == ("  issue 19: 2 of 4 judged gates met; missed: nanocompile-bf16 "
                         "prefill @4096 within 1.2x of llama-f32, 1 thr; nanocompile-bf16 "
                         "decode @4096 <= 1.15x decode @128, 1 thr")


def test_without_our_engine_nothing_is_judged() -> None:
    gates = evaluate_gates([m for m in _made_up() if m["engine"] != OURS], threads=(1,))
    assert gates["engines"] == {}
    assert "no nanocompile engine measured" in format_gates(gates)
    assert format_gates(gates).splitlines()[-1] == "  issue 19: 0 of 0 judged gates met"


# --------------------------------------------------------------------------
# the protocol, on fake engines


class FakeModel:
    """Greedy tokens that count up; raises from ``fail_at`` prompt tokens on."""

    def __init__(self, calls: list[tuple[str, int]], name: str,
                 fail_at: int | None = None) -> None:
        self.calls, self.name, self.fail_at = calls, name, fail_at

    def new_state(self, capacity: int) -> list[int]:
        return [capacity]

    def next_token(self, ids: Sequence[int], state: list[int]) -> int:
        if len(ids) > 1:
            self.calls.append((self.name, len(ids)))
            if self.fail_at is not None and len(ids) >= self.fail_at:
                raise MemoryError("made up")
        state.append(len(ids))
        return len(state)


class NoThreads:
    """``bench.run.Threads``' interface without touching any pool."""

    controlled = False

    @contextlib.contextmanager
    def limit(self, n: int) -> Iterator[None]:
        yield


def _settings(**changes: Any) -> Settings:
    base = Settings(engines=("nanocompile", "numpy"), weights=(None,), threads=(1, 2),
                    contexts=(8, 16), rounds=3, decode_steps=2, model=None,
                    results_path=Path("unused"), record=False, plot_path=None)
    return dataclasses.replace(base, **changes)


def test_every_slot_runs_every_length_every_round_and_a_failure_drops_only_longer(
        capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[str, int]] = []
    built = [Built("a", FakeModel(calls, "a"), "fake", 0.0),
             Built("b", FakeModel(calls, "b", fail_at=16), "fake", 0.0)]
    settings = _settings()
    slots = measure(built, settings, NoThreads(), list(range(100, 116)))
    # warm-up: one 8-token prefill each; then 3 rounds x 2 lengths x 2 threads;
    # b fails at 16 in round 1 and never runs 16 again
    assert calls.count(("a", 8)) == 1 + 3 * 2
    assert calls.count(("a", 16)) == 3 * 2
    assert calls.count(("b", 8)) == 1 + 3 * 2
    assert calls.count(("b", 16)) == 1
    err = capsys.readouterr().err
    assert "b failed at 16 tokens: MemoryError: made up; it runs only shorter prompts" in err
    assert err.count("failed at") == 1
    assert sorted(slots) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    a = slots[("a", 1)]
    assert set(a.values) == set(settings.metrics)
    assert all(len(v) == 3 for v in a.values.values())
    assert a.tokens[8] == [2, 3, 4]  # the prefill's token, then 2 decode steps
    assert set(slots[("b", 1)].values) == {metric_name(PREFILL, 8), metric_name(DECODE, 8)}
    # only complete metrics are summarized: b has no @16
    ms = summarize(slots, settings, [], "model", "machine")
    assert {(m["engine"], m["metric"]) for m in ms if m["threads"] == 1} == (
        {("a", metric) for metric in settings.metrics}
        | {("b", metric_name(PREFILL, 8)), ("b", metric_name(DECODE, 8))})


def test_summary_holds_medians_minima_spread_and_the_control() -> None:
    slot = context.Slot("a", 1, values={metric_name(PREFILL, 8): [3.0, 1.0, 2.0],
                                        metric_name(DECODE, 8): [5.0, 9.0, 7.0]})
    history = [{"machine": {"id": "machine"}, "payload": {"measurements": [
        {"engine": "a", "metric": metric_name(DECODE, 8), "threads": 1, "median": 4.0}]}}]
    ms = {m["metric"]: m for m in summarize({("a", 1): slot}, _settings(contexts=(8,)),
                                            history, "model", "machine")}
    prefill, decode = ms[metric_name(PREFILL, 8)], ms[metric_name(DECODE, 8)]
    assert (prefill["median"], prefill["min"], prefill["n"]) == (2.0, 1.0, 3)
    assert prefill["spread"]["maximum"] == 3.0
    assert prefill["values"] == [3.0, 1.0, 2.0]
    assert (prefill["phase"], prefill["context_tokens"], prefill["decode_steps"]) == (
        "prefill", 8, 2)
    assert prefill["control"]["history"] == 0
    # decode median 7 against the best recorded 4: 1.75x > 1.5: flagged
    assert decode["control"]["flagged"] is True
    assert decode["control"]["ratio"] == 1.75


def test_records_one_per_engine_and_threads(tmp_path: Path) -> None:
    ms = [m | {"spread": {}, "n": 3} for m in _made_up()]
    built = [Built(OURS, object(), "ours", 1.5), Built(LLAMA_F32, object(), "llama", 2.5),
             Built(NUMPY, object(), "numpy", 0.5)]
    run = {"run_id": "abc", "model": {"id": "m"}, "settings": _settings().as_dict(),
           "goals_issue19": evaluate_gates(ms, threads=(1, 2))}
    records = make_records(ms, built, run, NoThreads())
    assert [(r["payload"]["engine"]["name"], r["threads"]["requested"]) for r in records] == [
        (LLAMA_F32, 1), (OURS, 1), (OURS, 2), (NUMPY, 1)]
    path = tmp_path / "results.jsonl"
    for r in records:
        results.append_record(r, path)
    back = results.load_records(path, kind="context")
    assert len(back) == 4
    ours2 = next(r for r in back if r["payload"]["engine"]["name"] == OURS
                 and r["threads"]["requested"] == 2)
    assert {m["metric"] for m in ours2["payload"]["measurements"]} == {
        "prefill_ms_per_token@1024", "decode_ms_per_token@128", "decode_ms_per_token@4096"}
    assert all(m["threads"] == 2 for m in ours2["payload"]["measurements"])
    assert ours2["payload"]["engine"] == {"name": OURS, "description": "ours",
                                          "build_seconds": 1.5}
    assert ours2["payload"]["settings"]["capacity"] == 16 + 2 + 1
    assert ours2["payload"]["goals_issue19"]["engines"][OURS]["decode_growth"]["2"]["met"]
    for key in ("schema", "time", "machine", "versions", "git", "loadavg"):
        assert key in ours2
    assert {"cpu_model", "id", "kind", "usable_cpus"} <= set(ours2["machine"])


# --------------------------------------------------------------------------
# the smoke run


def test_smoke_run_on_the_tiny_snapshot(tiny_snapshot: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """nanocompile and the NumPy engine at 8 and 16 tokens, 1 round; llama.cpp
    reported as not installed (its import made to fail), not a traceback."""
    from bench import llama_engine

    def absent() -> None:
        raise EngineUnavailable(llama_engine.NOT_INSTALLED)

    monkeypatch.setattr(llama_engine, "require_llama_cpp", absent)
    out, png = tmp_path / "results.jsonl", tmp_path / "context.png"
    assert bench.main(["context", "--model", str(tiny_snapshot), "--contexts", "8,16",
                       "--rounds", "1", "--decode-steps", "2", "--threads", "1",
                       "--results", str(out), "--out", str(png)]) == 0
    captured = capsys.readouterr()
    assert "skipping llama-f32: llama-cpp-python not installed" in captured.err
    assert "round 1/1 @16: nanocompile-bf16 1 thr: prefill" in captured.err  # progress
    assert "issue 19 gates" in captured.out
    assert "appended 2 records" in captured.out
    assert png.stat().st_size > 10_000
    assert png.read_bytes()[:4] == b"\x89PNG"
    records = results.load_records(out, kind="context")
    assert sorted(r["payload"]["engine"]["name"] for r in records) == [OURS, NUMPY]
    for r in records:
        ms = r["payload"]["measurements"]
        assert sorted(m["metric"] for m in ms) == sorted(
            metric_name(p, c) for p in (PREFILL, DECODE) for c in (8, 16))
        for m in ms:
            assert m["n"] == 1
            assert m["median"] == m["min"] == m["values"][0] > 0
        assert r["threads"]["requested"] == 1
        assert r["payload"]["settings"]["contexts"] == [8, 16]
    ours = next(r for r in records if r["payload"]["engine"]["name"] == OURS)
    assert ours["payload"]["engine"]["weights"] == "bf16"
    # the same greedy tokens as the NumPy engine: the prefill's and both decode steps'
    for m in ours["payload"]["measurements"]:
        assert m["tokens_vs_numpy"] == {"leading_equal": 3, "of": 3}
    json.dumps(records, allow_nan=False)


def test_an_engine_that_fails_to_build_is_skipped(tiny_snapshot: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def broken(directory: Path) -> None:
        raise RuntimeError("made up")

    monkeypatch.setattr(context, "_build_numpy", broken)
    assert bench.main(["context", "--model", str(tiny_snapshot), "--engines", "numpy",
                       "--contexts", "8", "--rounds", "1", "--no-record", "--no-plot"]) == 1
    err = capsys.readouterr().err
    assert "skipping numpy: building it failed: RuntimeError: made up" in err
    assert err.splitlines()[-1] == "bench context: error: no engine could be built"


@pytest.mark.skipif(not HAS_LLAMA, reason="llama-cpp-python (llama_cpp) is not installed")
def test_llama_f32_gets_a_context_for_the_longest_prompt(
        tiny_snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    assert bench.main(["context", "--model", str(tiny_snapshot), "--engines",
                       "llama-f32,numpy", "--contexts", "8,600", "--rounds", "1",
                       "--decode-steps", "2", "--threads", "1", "--results", str(out),
                       "--no-plot"]) == 0
    records = results.load_records(out, kind="context")
    llama = next(r for r in records if r["payload"]["engine"]["name"] == LLAMA_F32)
    # 600 + 1 + 2 positions: beyond llama_engine's default n_ctx of 512, no reload
    assert llama["payload"]["engine"]["n_ctx"] >= 603
    assert llama["payload"]["engine"]["kv_cache"] == "f32"
    assert "reference: llama-f32 decode" in capsys.readouterr().out
    for m in llama["payload"]["measurements"]:
        assert m["tokens_vs_numpy"]["of"] == 3

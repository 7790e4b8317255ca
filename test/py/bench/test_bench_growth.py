"""bench/growth.py (``python -m bench growth``): decode steps after a short and
after a long prompt, alternated in pairs, nanocompile and llama.cpp the same way;
the record's numbers come from the steps it holds."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bench import growth, main
from bench.growth import GATE, paired_steps, summarize
from bench.llama_engine import NOT_INSTALLED

HAS_LLAMA = importlib.util.find_spec("llama_cpp") is not None


def test_summary_of_known_steps() -> None:
    short, long = [10.0, 12.0, 11.0, 10.0], [11.0, 15.0, 12.0, 12.0]
    r = summarize(short, long)
    assert r["ratio_of_medians"] == pytest.approx(12.0 / 10.5)
    assert r["ratio_of_minima"] == pytest.approx(1.1)
    assert r["paired_ratio_median"] == pytest.approx((1.1 + 1.2) / 2)  # of 1.1 1.25 1.0909 1.2
    # within 1.15x: 11 < 11.5, 15 > 13.8, 12 < 12.65, 12 > 11.5 -> 2 of 4
    assert (r["within_gate"]["wins"], r["within_gate"]["n"]) == (2, 4)
    assert r["gate"] == GATE


def test_pairs_alternate_and_engines_take_turns() -> None:
    calls: list[str] = []

    def step(label: str):  # type: ignore[no-untyped-def]
        return lambda: calls.append(label)

    gens = {e: (step(f"{e}-short"), step(f"{e}-long")) for e in ("a", "b", "c")}
    times = paired_steps(gens, 4)  # type: ignore[arg-type]
    assert calls == [
        "a-short", "a-long", "b-short", "b-long", "c-short", "c-long",  # pair 0: a b c
        "b-long", "b-short", "c-long", "c-short", "a-long", "a-short",  # pair 1: b c a, swapped
        "c-short", "c-long", "a-short", "a-long", "b-short", "b-long",  # pair 2: c a b
        "a-long", "a-short", "b-long", "b-short", "c-long", "c-short",  # pair 3: a b c again
    ]
    assert {e: (len(s), len(lg)) for e, (s, lg) in times.items()} == {
        "a": (4, 4), "b": (4, 4), "c": (4, 4)}
    assert all(t >= 0 for s, lg in times.values() for t in s + lg)


def test_a_tiny_run_is_recorded(tiny_snapshot: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.jsonl"
    assert main(["growth", "--model", str(tiny_snapshot), "--short", "3", "--long", "20",
                 "--steps", "4", "--threads", "1,2", "--weights", "bf16,f32",
                 "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["kind"] == "growth"
    payload = record["payload"]
    assert (payload["short"], payload["long"], payload["steps"]) == (3, 20, 4)
    assert payload["engines"] == ["nanocompile-bf16", "nanocompile-f32"]
    for engine in payload["engines"]:
        assert payload["details"][engine]["weights"] == engine.split("-")[1]
        for t in ("1", "2"):
            r = payload["by_engine"][engine][t]
            assert len(r["short_steps"]) == len(r["long_steps"]) == 4
            assert r["short_ms"]["n"] == 4
            assert r["long_ms"]["minimum"] > 0
            assert r["ratio_of_medians"] == pytest.approx(
                r["long_ms"]["median"] / r["short_ms"]["median"])
    printed = capsys.readouterr().out
    assert printed.count("within 1.15x in") == 4
    assert "nanocompile-f32, 2 thread(s): decode after 3 " in printed


@pytest.mark.skipif(not HAS_LLAMA, reason=NOT_INSTALLED)
def test_llama_cpp_is_measured_the_same_way(tiny_snapshot: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path / "home"))  # its GGUF outside the repo
    monkeypatch.setenv("NANOCOMPILE_THREADS", "3")
    out = tmp_path / "results.jsonl"
    assert main(["growth", "--model", str(tiny_snapshot), "--engines", "llama-f32,nanocompile",
                 "--short", "3", "--long", "20", "--steps", "3", "--threads", "1",
                 "--out", str(out)]) == 0
    payload = json.loads(out.read_text())["payload"]
    assert payload["engines"] == ["llama-f32", "nanocompile-bf16"]
    assert payload["details"]["llama-f32"]["kv_cache"] == "f32"
    r = payload["by_engine"]["llama-f32"]["1"]
    assert len(r["short_steps"]) == len(r["long_steps"]) == 3
    assert "llama-f32, 1 thread(s): decode after 3 " in capsys.readouterr().out
    assert os.environ["NANOCOMPILE_THREADS"] == "3"  # the run's thread setting is undone


@pytest.mark.parametrize(("argv", "message"), [
    (["--short", "20", "--long", "20"], "--short must be at least 1 and below --long"),
    (["--steps", "1"], "--steps must be in 2..10000"),
    (["--threads", "two"], "--threads wants comma-separated integers"),
    (["--threads", "0"], "--threads wants counts in 1..256"),
    (["--engines", "llama-f16"], "--engines: expected comma-separated names of nanocompile, "),
    (["--engines", "nanocompile,nanocompile"], "--engines: a name is given twice"),
    (["--weights", "f16"], "--weights: expected comma-separated names of bf16, f32"),
    (["--engines", "llama-f32", "--weights", "f32"], "--weights is nanocompile's"),
])
def test_bad_arguments_are_one_line(argv: list[str], message: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["growth", *argv, "--no-append"]) == 1
    assert message in capsys.readouterr().err


def test_each_thread_count_runs_its_own_winners(tiny_snapshot: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # programs with tuned winners: one per thread count, each run at its own count only
    ran: list[tuple[int | None, int]] = []  # (the program's count, the count set when it ran)

    def fake(model_dir: Path, weights: str | None, capacity: int,
             threads: int | None = None) -> growth.Engine:
        current = [0]

        def start(ids: Sequence[int], size: int) -> Callable[[], None]:
            return lambda: ran.append((threads, current[0]))

        def set_threads(n: int) -> None:
            current[0] = n
        return growth.Engine("nanocompile-bf16", start, set_threads,
                             {"weights": "bf16", "tuned_kernels": 3,
                              "winners_for_threads": threads}, threads)

    monkeypatch.setattr(growth, "nanocompile_engine", fake)
    monkeypatch.setattr(growth, "_recorded_winners", lambda t: True)
    out = tmp_path / "results.jsonl"
    assert main(["growth", "--model", str(tiny_snapshot), "--short", "3", "--long", "20",
                 "--steps", "4", "--threads", "1,2", "--out", str(out)]) == 0
    assert set(ran) == {(1, 1), (2, 2)}  # never a program at the other count
    payload = json.loads(out.read_text())["payload"]
    assert payload["engines"] == ["nanocompile-bf16"]
    details = payload["details"]["nanocompile-bf16"]
    assert details["weights"] == "bf16"
    assert {t: d["winners_for_threads"] for t, d in details["by_threads"].items()} == {
        "1": 1, "2": 2}
    assert set(payload["by_engine"]["nanocompile-bf16"]) == {"1", "2"}


def test_hand_schedules_are_one_program_for_every_count(tiny_snapshot: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    made: list[int | None] = []

    def fake(model_dir: Path, weights: str | None, capacity: int,
             threads: int | None = None) -> growth.Engine:
        made.append(threads)
        return growth.Engine("nanocompile-bf16", lambda ids, size: lambda: None,
                             lambda n: None, {"tuned_kernels": 0}, threads)

    monkeypatch.setattr(growth, "nanocompile_engine", fake)
    monkeypatch.setattr(growth, "_recorded_winners", lambda t: True)  # of other kernels
    engines = growth.nanocompile_engines(tiny_snapshot, "bf16", 64, [1, 2])
    assert made == [1, 2]
    assert len(engines) == 1
    assert engines[0].threads is None  # runs at both counts
    # no winner recorded at any count: loaded once, not once per count
    made.clear()
    monkeypatch.setattr(growth, "_recorded_winners", lambda t: False)
    (once,) = growth.nanocompile_engines(tiny_snapshot, "bf16", 64, [1, 2])
    assert made == [None]
    assert once.threads is None

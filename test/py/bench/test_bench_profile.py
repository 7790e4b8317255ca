"""bench/profile_step.py (``python -m bench profile``): a prompt longer than
the engine's chunk runs in several steps, and every step's launches count."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.profile_step import ENTRY, _summed, profile_steps


def test_steps_are_summed_launch_by_launch() -> None:
    steps = [[("a", 1), ("b", 2), (ENTRY, 5)], [("a", 10), ("b", 20), (ENTRY, 40)]]
    assert _summed(steps) == [("a", 11), ("b", 22), (ENTRY, 45)]


@pytest.mark.slow  # ~6 s each: a 296-token prefill profiled; the 3-minute budget
@pytest.mark.parametrize("kv", ["state", "inputs"])
def test_a_prompt_of_two_chunks_is_profiled_whole(tiny_snapshot: Path, kv: str) -> None:
    from nanocompile.api import PREFILL_CHUNK

    result = profile_steps(tiny_snapshot, threads=1, rounds=1, prompt=PREFILL_CHUNK + 40,
                           schedule=True, weights="bf16", kv=kv)
    assert result["kv"] == kv
    for step in ("prefill", "decode"):
        r = result[step]
        assert r["launches"] > 0
        assert 0 < r["kernels_ms"] <= r["wall_ms"]
        assert r["between_launches_ms"] >= 0
        assert r["outside_entry_ms"] >= 0


@pytest.mark.parametrize(("weights", "kernel"), [("int8", "a"), ("int8-dot", "b")])
def test_int8_formats_profile_the_quantized_program(tiny_snapshot: Path, weights: str,
                                                    kernel: str) -> None:
    """``--weights int8`` / ``int8-dot`` profile the program ``nanocompile.load``
    runs for that format: the graph after ``quantize-int8`` (kernel A / B, the
    int8 embedding and LM head), whose kernels are not the bf16 program's."""
    from nanocompile.compiler import int8_pass

    result = profile_steps(tiny_snapshot, threads=1, rounds=1, prompt=5, schedule=True,
                           weights=weights)
    plain = profile_steps(tiny_snapshot, threads=1, rounds=1, prompt=5, schedule=True,
                          weights="bf16")
    assert result["weights"] == weights
    assert result["quantize"] == int8_pass(True, kernel)
    assert plain["quantize"] == ""
    names = set(result["decode"]["by_kernel_ms"])
    assert names != set(plain["decode"]["by_kernel_ms"])
    if kernel == "b":  # kernel B's projections: matmul_i8 kernels
        assert any("matmul_i8" in name for name in names), names
    for step in ("prefill", "decode"):
        assert 0 < result[step]["kernels_ms"] <= result[step]["wall_ms"]


def test_int8_dot_head_profiles_the_lm_head_on_kernel_b(tiny_snapshot: Path) -> None:
    """``--int8-dot-head``: the program ``load(weights="int8-dot", int8_dot_head=True)``
    runs (its quantize-int8 text names head=b), and only with int8-dot."""
    from bench import BenchError
    from nanocompile.compiler import int8_pass

    result = profile_steps(tiny_snapshot, threads=1, rounds=1, prompt=5, schedule=True,
                           weights="int8-dot", int8_dot_head=True)
    assert result["quantize"] == int8_pass(True, "b", "b")
    with pytest.raises(BenchError, match="--int8-dot-head needs --weights int8-dot, got int8"):
        profile_steps(tiny_snapshot, threads=1, rounds=1, prompt=5, schedule=True,
                      weights="int8", int8_dot_head=True)


@pytest.mark.parametrize("threads", [1, 3])
def test_the_profile_runs_the_winners_of_its_thread_count(
        tiny_snapshot: Path, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--threads N`` profiles the program ``nanocompile generate --threads N``
    runs: scheduled by the winners recorded for N threads (until session 26 the
    default count's, so ``--threads 1`` on a 2-CPU machine profiled the 2-thread
    winners at 1 thread)."""
    import nanocompile.compiler as compiler

    asked: list[int | None] = []

    def winners(count: int | None = None) -> str:
        asked.append(count)
        return ""

    monkeypatch.setenv("NANOCOMPILE_THREADS", "2")
    monkeypatch.setattr(compiler, "recorded_winners", winners)
    result = profile_steps(tiny_snapshot, threads=threads, rounds=1, prompt=3, schedule=True,
                           weights="bf16")
    assert result["threads"] == threads
    assert asked == [threads]

"""``python -m bench quality``: the arithmetic of the KL divergence and top-1
agreement, on cases worked by hand, and the record it appends (issue 18 item 3).

Nothing here measures the int8 model's quality: that is a report, not a gate.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench import quality, results


def test_kl_of_a_hand_worked_pair() -> None:
    # P = (1/2, 1/2); Q = softmax(log 3, 0) = (3/4, 1/4):
    # KL = 1/2 ln((1/2)/(3/4)) + 1/2 ln((1/2)/(1/4)) = 1/2 ln(4/3)
    ref = np.array([[0.0, 0.0]], np.float32)
    other = np.array([[math.log(3.0), 0.0]], np.float32)
    kl = quality.kl_divergence(ref, other)
    assert kl.dtype == np.float64
    assert kl[0] == pytest.approx(0.5 * math.log(4.0 / 3.0), rel=1e-7)
    # the other way round: 3/4 ln(3/2) + 1/4 ln(1/2) (KL is not symmetric)
    back = quality.kl_divergence(other, ref)
    assert back[0] == pytest.approx(0.75 * math.log(1.5) + 0.25 * math.log(0.5), rel=1e-6)


def test_kl_is_zero_for_equal_rows_and_shift_invariant() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 5, (3, 1000)).astype(np.float32)
    assert np.all(quality.kl_divergence(logits, logits) == 0.0)
    shifted = logits + np.float32(1000.0)  # exp would overflow without the max shift
    kl = quality.kl_divergence(logits, shifted)
    assert np.all(np.isfinite(kl))
    assert np.abs(kl).max() < 1e-9  # only the f32 rounding of the shift


def test_log_softmax_in_f64() -> None:
    out = quality.log_softmax(np.array([[1.0, 2.0, 3.0]], np.float32))
    want = np.array([1.0, 2.0, 3.0]) - math.log(math.exp(1) + math.exp(2) + math.exp(3))
    np.testing.assert_allclose(out[0], want, rtol=1e-15)


def test_top1_agreement_and_summary() -> None:
    ref = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0], [1.0, 0.0, 0.0]])
    other = np.array([[0.0, 2.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.5, 0.0]])
    agree = quality.top1_agreement(ref, other)
    assert agree.tolist() == [True, False, True, True]
    kl = np.array([0.0, 0.4, 0.1, 0.2])
    s = quality.summarize(kl, agree)
    assert s["positions"] == 4
    assert s["kl_mean"] == pytest.approx(0.175)
    assert s["kl_median"] == pytest.approx(0.15)
    assert s["kl_max"] == pytest.approx(0.4)
    assert s["kl_argmax_position"] == 1
    assert s["kl_p95"] == pytest.approx(0.37)  # linear between 0.2 and 0.4 at 0.95 * 3
    assert (s["top1_agreement"], s["top1_agreeing"]) == (0.75, 3)
    assert s["first_top1_disagreement"] == 1
    assert quality.summarize(kl, np.ones(4, bool))["first_top1_disagreement"] is None
    with pytest.raises(ValueError, match="expected two"):
        quality.kl_divergence(ref, other[:2])


def test_compare_runs_each_variant_against_the_reference() -> None:
    """``compare`` with stand-in models: the reference's logits, the int8 variants'
    (one KL and agreement each), kernels A and B."""
    ref = np.array([[0.0, 0.0], [1.0, 0.0]], np.float32)
    shifted = np.array([[math.log(3.0), 0.0], [0.0, 1.0]], np.float32)
    seen: list[dict[str, Any]] = []

    def logits_of(options: dict[str, Any]) -> np.ndarray:
        seen.append(options)
        return ref if not options else shifted

    out = quality.compare(logits_of)
    assert seen == [{}, {"weights": "int8"}, {"weights": "int8", "int8_embedding": False},
                    {"weights": "int8-dot"}, {"weights": "int8-dot", "int8_dot_head": True},
                    {"weights": "int8-dot", "int8_embedding": False}]
    v = out["variants"]["int8"]
    # row 0 as above; row 1: P = (e, 1) / (e + 1), Q its reverse: KL = (e - 1) / (e + 1)
    assert v["kl_mean"] == pytest.approx(
        (0.5 * math.log(4.0 / 3.0) + (math.e - 1) / (math.e + 1)) / 2, rel=1e-6)
    assert v["kl_argmax_position"] == 1
    assert v["top1_agreement"] == 0.5  # row 0: both argmax 0 (the first of a tie); row 1 not
    m = quality.measurements(out, threads=1)
    names = ["int8", "int8-f32-embedding", "int8-dot", "int8-dot-head", "int8-dot-f32-embedding"]
    assert [(e["engine"], e["metric"]) for e in m] == [
        (f"c-{n}", metric) for n in names for metric in ("kl_divergence", "top1_agreement")]


def test_the_text_has_a_few_hundred_tokens(tiny_snapshot: Path) -> None:
    ids = quality.text_ids(tiny_snapshot, quality.DEFAULT_TOKENS)
    assert len(ids) == quality.DEFAULT_TOKENS
    from bench import BenchError

    with pytest.raises(BenchError, match="the text has only"):
        quality.text_ids(tiny_snapshot, 4096)


@pytest.mark.slow  # six loads and compiles of the tiny model (~30 s): the 3-minute budget
def test_smoke_appends_a_quality_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    import bench

    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path / "home"))
    path = tmp_path / "results.jsonl"
    assert bench.main(["quality", "--smoke", "--results", str(path)]) == 0
    out = capsys.readouterr().out
    assert "32 positions of bench.quality.TEXT" in out
    [record] = results.load_records(path, kind="quality")
    payload = record["payload"]
    assert payload["text"]["tokens"] == 32
    for name in ("int8", "int8-f32-embedding", "int8-dot", "int8-dot-head",
                 "int8-dot-f32-embedding"):
        v = payload["variants"][name]
        assert v["positions"] == 32
        assert 0.0 <= v["kl_median"] <= v["kl_p95"] <= v["kl_max"]
        assert v["kl_max"] > 0  # quantized: not the same distribution
        assert 0.0 <= v["top1_agreement"] <= 1.0
    assert {m["metric"] for m in payload["measurements"]} == {"kl_divergence",
                                                              "top1_agreement"}

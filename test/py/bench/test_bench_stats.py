"""bench.stats and bench.results: centre, spread, the exact sign test, the control check.

The sign test is checked against hand-derived binomial tails and against a
brute-force enumeration of every equally likely sign pattern (and SciPy's
binomtest when SciPy happens to be installed).
"""

from __future__ import annotations

import itertools
import json
import statistics
from fractions import Fraction

import pytest

from bench import results, stats


def _enumerated_tail(wins: int, n: int) -> Fraction:
    """P(#heads >= wins) by listing all 2**n coin sequences: independent of math.comb."""
    hits = sum(1 for flips in itertools.product((0, 1), repeat=n) if sum(flips) >= wins)
    return Fraction(hits, 2**n)


# ---- centre and spread -------------------------------------------------------


def test_median_odd_even_and_minimum():
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert stats.median([7.5]) == 7.5
    assert stats.minimum([3.0, 1.5, 2.0]) == 1.5


def test_empty_and_nan_rejected():
    with pytest.raises(ValueError, match="at least one"):
        stats.median([])
    with pytest.raises(ValueError, match="NaN"):
        stats.spread([1.0, float("nan")])


def test_quantile_matches_statistics_inclusive():
    data = [9.0, 1.0, 4.0, 7.0, 3.0, 12.0, 5.0]
    q1, _, q3 = statistics.quantiles(data, n=4, method="inclusive")
    assert stats.quantile(data, 0.25) == pytest.approx(q1)
    assert stats.quantile(data, 0.75) == pytest.approx(q3)
    assert stats.quantile(data, 0.0) == 1.0
    assert stats.quantile(data, 1.0) == 12.0


def test_spread_hand_computed():
    # sorted 10, 11, 12, 14, 20: positions q*(n-1) = 1 and 3 -> q1 = 11, q3 = 14
    s = stats.spread([12.0, 10.0, 20.0, 11.0, 14.0])
    assert (s.n, s.median, s.minimum, s.maximum) == (5, 12.0, 10.0, 20.0)
    assert (s.q1, s.q3, s.iqr, s.range) == (11.0, 14.0, 3.0, 10.0)
    assert s.rel_iqr == pytest.approx(3.0 / 12.0)
    assert s.rel_range == pytest.approx(10.0 / 12.0)
    assert stats.summarize([12.0, 10.0, 20.0, 11.0, 14.0])["iqr"] == 3.0


def test_spread_single_value_and_zero_median():
    s = stats.spread([5.0])
    assert (s.iqr, s.range, s.rel_iqr, s.rel_range) == (0.0, 0.0, 0.0, 0.0)
    z = stats.spread([-1.0, 0.0, 1.0])
    assert z.rel_range == float("inf")


# ---- exact sign test ----------------------------------------------------------


def test_sign_test_all_six_wins_is_one_in_64():
    a = [70.0, 71.0, 69.0, 70.5, 72.0, 70.0]
    b = [75.0, 74.0, 76.0, 75.5, 73.0, 77.0]
    t = stats.sign_test(a, b)
    assert (t.wins, t.losses, t.ties, t.n) == (6, 0, 0, 6)
    assert t.p_exact == Fraction(1, 64)
    assert t.p_value == pytest.approx(0.015625)


def test_sign_test_hand_values():
    # 5 wins of 6: (C(6,5) + C(6,6)) / 64 = 7/64
    t = stats.sign_test([1, 1, 1, 1, 1, 3], [2, 2, 2, 2, 2, 2])
    assert (t.wins, t.losses) == (5, 1)
    assert t.p_exact == Fraction(7, 64)
    # ties dropped: 5 wins, 2 ties -> n = 5, p = 1/32
    t = stats.sign_test([1, 1, 1, 1, 1, 2, 2], [2, 2, 2, 2, 2, 2, 2])
    assert (t.wins, t.losses, t.ties, t.n) == (5, 0, 2, 5)
    assert t.p_exact == Fraction(1, 32)
    # no wins at all: P(X >= 0) = 1
    assert stats.sign_test([3, 3, 3], [1, 1, 1]).p_exact == 1
    # all ties: nothing to test
    t = stats.sign_test([1, 1], [1, 1])
    assert (t.n, t.p_exact) == (0, 1)
    # 9 of 12 wins: (220 + 66 + 12 + 1) / 4096 = 299/4096
    t = stats.sign_test([1] * 9 + [3] * 3, [2] * 12)
    assert t.p_exact == Fraction(299, 4096)


def test_sign_test_direction_for_rates():
    faster = [30.0, 31.0, 29.5, 30.2]  # tok/s: higher is better
    slower = [20.0, 21.0, 19.0, 22.0]
    assert stats.sign_test(faster, slower, lower_is_better=False).wins == 4
    assert stats.sign_test(faster, slower, lower_is_better=True).wins == 0


@pytest.mark.parametrize("n", range(0, 11))
def test_binomial_tail_matches_enumeration(n):
    for wins in range(n + 1):
        assert stats.binomial_upper_tail(wins, n) == _enumerated_tail(wins, n)


def test_binomial_tail_matches_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    for n in (1, 6, 12, 25):
        for wins in range(n + 1):
            expected = scipy_stats.binomtest(wins, n, 0.5, alternative="greater").pvalue
            assert float(stats.binomial_upper_tail(wins, n)) == pytest.approx(expected, rel=1e-12)


def test_sign_test_unpaired_lengths_rejected():
    with pytest.raises(ValueError, match="equal lengths"):
        stats.sign_test([1.0, 2.0], [1.0])


def test_sign_test_as_dict_is_json():
    d = stats.sign_test([1, 1, 1], [2, 2, 2]).as_dict()
    assert json.loads(json.dumps(d)) == {
        "wins": 3,
        "losses": 0,
        "ties": 0,
        "n": 3,
        "p_value": 0.125,
        "p_exact": "1/8",
    }


# ---- control check ------------------------------------------------------------


def test_control_flags_far_off_best():
    c = stats.control_check(110.0, [75.0, 70.0, 80.0])
    assert c.flagged
    assert c.best == 70.0
    assert c.ratio == pytest.approx(110.0 / 70.0)
    assert c.history == 3
    assert not stats.control_check(100.0, [75.0, 70.0]).flagged  # 1.43x < 1.5x
    assert stats.control_check(100.0, [70.0], threshold=1.2).flagged
    assert not stats.control_check(100.0, []).flagged


def test_control_for_rates():
    # tok/s: best 30, now 18 -> 30/18 = 1.67x worse
    c = stats.control_check(18.0, [25.0, 30.0], lower_is_better=False)
    assert c.flagged
    assert c.best == 30.0
    assert not stats.control_check(25.0, [30.0], lower_is_better=False).flagged


def test_control_threshold_must_be_at_least_one():
    with pytest.raises(ValueError, match="threshold"):
        stats.control_check(1.0, [1.0], threshold=0.9)


# ---- results.jsonl round trip feeding the control check -------------------------


def _measurement(engine, threads, median):
    return {"engine": engine, "metric": "decode_ms_per_token", "threads": threads, "median": median}


def test_results_append_load_and_history(tmp_path):
    path = tmp_path / "results.jsonl"
    assert results.load_records(path) == []
    first = results.make_record(
        "decode",
        {"measurements": [_measurement("numpy", 1, 70.0), _measurement("numpy", 2, 50.0)]},
        threads=[1, 2],
    )
    results.append_record(first, path)
    second = results.make_record("decode", {"measurements": [_measurement("numpy", 1, 90.0)]})
    results.append_record(second, path)
    other_machine = json.loads(json.dumps(second))
    other_machine["machine"]["id"] = "elsewhere"
    other_machine["payload"]["measurements"][0]["median"] = 10.0
    results.append_record(other_machine, path)
    results.append_record(results.make_record("probe", {"note": "no measurements"}), path)

    lines = path.read_text().splitlines()
    assert len(lines) == 4  # appended, one line each
    records = results.load_records(path)
    assert [r["kind"] for r in records] == ["decode", "decode", "decode", "probe"]
    assert len(results.load_records(path, kind="probe")) == 1

    machine_id = results.machine_facts()["id"]
    history = results.history_medians(
        records, engine="numpy", metric="decode_ms_per_token", threads=1, machine_id=machine_id
    )
    assert history == [70.0, 90.0]  # the other machine's 10.0 and the 2-thread 50.0 are not peers
    assert stats.control_check(110.0, history).flagged
    assert not stats.control_check(95.0, history).flagged


def test_record_has_provenance(tmp_path):
    record = results.make_record("probe", {"x": 1}, threads=[1, 2])
    for key in ("machine", "versions", "git", "threads", "time", "payload", "loadavg"):
        assert key in record
    machine = record["machine"]
    assert machine["logical_cpus"] >= 1
    assert set(results.FLAGS_OF_INTEREST) <= set(machine["flags"])
    assert record["versions"]["python"].count(".") == 2
    assert record["versions"]["numpy"] is not None
    assert record["threads"]["requested"] == [1, 2]
    assert "OMP_NUM_THREADS" in record["threads"]["env"]


def test_append_never_truncates_and_repairs_a_torn_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"kind": "old"}\n{"kind": "torn"')  # a writer died mid-line
    results.append_record({"kind": "new"}, path)
    lines = path.read_text().splitlines()
    assert lines[0] == '{"kind": "old"}'
    assert lines[1] == '{"kind": "torn"'
    assert json.loads(lines[2]) == {"kind": "new"}
    with pytest.raises(ValueError, match=":2: not JSON"):
        results.load_records(path)

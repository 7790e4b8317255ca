"""bench/probe.c + bench/probe.py: the machine probe builds, runs and reads plausibly.

The probe runs in quick mode (64 MiB buffer, 10 ms passes; about a second).
Plausibility is physical: no core retires more than 2 vector FMA (or 4 vector
mul/add) per cycle, so a rate above that per measured clock cycle means the
compiler deleted work; a rate of zero means nothing ran. The roofline
arithmetic is checked against hand-computed figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

from bench import probe  # noqa: E402

# Per-core, per-cycle ceilings over current x86 cores (2 FMA pipes; Zen's 2 mul + 2 add)
# and the lowest believable fraction of them on a busy shared machine.
CEILING_PER_CYCLE = {
    "mul_add_f32x8": 4 * 8,
    "fma_f32x8": 2 * 16,
    "fma_f32x16": 2 * 32,
    "vnni_i8x32": 2 * 64,
    "vnni_i8x64": 2 * 128,
}
TOLERANCE = 1.5  # clock and kernel are measured at different moments
FLOOR_FRACTION = 0.05


@pytest.fixture(scope="module")
def quick_machine() -> dict:
    return probe.measure_machine([1, 2], fresh=True, quick=True)


def test_probe_builds_once(quick_machine):
    first = probe.build_probe()
    assert first.exists()
    assert first.parent == probe.CACHE_DIR
    assert probe.build_probe() == first  # cached by source + compiler hash


def test_quick_probe_json_is_complete(quick_machine):
    raw = quick_machine["probe"]
    assert raw["quick"] is True
    assert raw["buffer_bytes"] == 64 << 20
    assert [b["threads"] for b in raw["bandwidth"]] == [1, 2]
    assert all(b["verified"] for b in raw["bandwidth"])  # every byte was summed
    for b in raw["bandwidth"]:
        assert b["gbs"] == max(b["gbs_plain"], b["gbs_prefetch"])
        assert b["passes_run"] >= 2 * raw["passes"]  # each loop at least --passes times
        assert 0 <= b["clean_passes"] <= b["passes_run"]
    names = {k["name"] for k in raw["kernels"]}
    assert {"mul_add_f32x8", "fma_f32x8"} <= names
    flags = Path("/proc/cpuinfo").read_text()
    if " avx512f " in flags:
        assert "fma_f32x16" in names
    if " avx_vnni " in flags:
        assert "vnni_i8x32" in names
    assert quick_machine["threads"] == [1, 2]
    assert json.loads(json.dumps(quick_machine)) == quick_machine


def test_bandwidth_only_probe_reads_and_skips_the_rest():
    raw = probe.run_probe([2], quick=True, bandwidth_only=True)
    assert raw["bandwidth_only"] is True
    assert raw["kernels"] == []  # no compute kernel timed
    assert raw["ghz_cpu"] == 0  # nor the clock
    (row,) = raw["bandwidth"]
    assert row["threads"] == 2
    assert row["verified"]
    assert row["gbs"] > 0
    gbs = probe.read_bandwidth(1, quick=True)
    assert 0.5 < gbs < 2000  # a read ran: GB/s of memory or cache, not 0 and not absurd


def test_quick_probe_is_not_bandwidth_only(quick_machine):
    assert quick_machine["probe"]["bandwidth_only"] is False


def test_clock_and_bandwidth_plausible(quick_machine):
    assert 0.5 < quick_machine["ghz"] < 7.0
    for threads, gbs in quick_machine["bandwidth_gbs"].items():
        assert 0.5 < gbs < 2000, (threads, gbs)


@pytest.mark.parametrize("name", sorted(CEILING_PER_CYCLE))
def test_peak_rates_within_physics(quick_machine, name):
    raw = quick_machine["probe"]
    entries = [k for k in raw["kernels"] if k["name"] == name]
    if not entries:
        pytest.skip(f"{name} not compiled on this machine")
    ceiling = CEILING_PER_CYCLE[name]
    for k in entries:
        # per thread, per second of that thread's CPU time, per clock cycle: immune to
        # other processes taking the core
        per_cycle = k["thread_gops_per_cpu_s"] / raw["ghz_cpu"]
        assert per_cycle < TOLERANCE * ceiling, (name, k["threads"], per_cycle)
        assert per_cycle > FLOOR_FRACTION * ceiling, (name, k["threads"], per_cycle)
        # the wall-clock rate of n threads cannot beat n threads at the per-thread rate
        assert k["gops"] <= 1.01 * k["threads"] * k["thread_gops_per_cpu_s"]
        assert k["gops"] > 0


def test_probe_rejects_bad_arguments():
    binary = probe.build_probe()
    proc = subprocess.run([binary, "--threads", "0"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "usage" in proc.stderr


def test_unverified_bandwidth_is_refused():
    raw = {
        "ghz_cpu": 3.0,
        "bandwidth": [{"threads": 1, "gbs": 500.0, "verified": False}],
        "kernels": [],
    }
    with pytest.raises(probe.ProbeError, match="did not verify"):
        probe.normalise(raw)


# ---- roofline arithmetic ---------------------------------------------------------


def _machine(bw: dict[str, float], peaks: dict[str, dict[str, float]]) -> dict:
    return {"ghz": 3.0, "threads": [1, 2], "bandwidth_gbs": bw, "peak_gops": peaks}


def test_roofline_hand_numbers():
    machine = _machine({"1": 10.0, "2": 20.0}, {"fma_f32x8": {"1": 100.0, "2": 200.0}})
    r = probe.roofline(2e9, 1e9, machine)
    assert r["decode_ms_per_token"] == pytest.approx({"1": 200.0, "2": 100.0})
    assert r["prefill_ms_per_token"]["fma_f32x8"] == pytest.approx({"1": 10.0, "2": 5.0})


def test_decode_bytes_per_precision():
    assert probe.decode_bytes_per_step("f32") == 1_976_743_344  # spec §3
    # parameters: embedding 136,134,656 + projections 357,826,560 + small 71,552
    assert probe.EMBED_PARAMS + probe.PROJECTION_PARAMS + probe.SMALL_PARAMS == 494_032_768
    assert probe.decode_bytes_per_step("bf16") == 2 * 494_032_768 + 612_272
    int8 = 357_826_560 + 4 * 304_128 + 4 * 136_134_656 + 4 * 71_552 + 612_272
    assert probe.decode_bytes_per_step("int8") == int8
    assert round(int8 / 1e9, 2) == 0.90  # spec §5: 0.90 GB with an f32 embedding
    int8_all = 357_826_560 + 4 * 304_128 + 136_134_656 + 4 * 151_936 + 4 * 71_552 + 612_272
    assert probe.decode_bytes_per_step("int8_all") == int8_all
    assert round(int8_all / 1e9, 2) == 0.50  # spec §5: 0.50 GB with an int8 embedding
    with pytest.raises(ValueError, match="unknown precision"):
        probe.decode_bytes_per_step("int4")


def test_prefill_flops_hand_numbers():
    # one token: projections + 24 layers x 14 heads x (64 + 64) MACs of attention + LM head
    one = 2 * 357_826_560 + 24 * 14 * 2 * 2 * 64 + 2 * 136_134_656
    assert probe.prefill_flops_per_token(1) == one
    # two tokens, all logits: tokens attend to 1 and 2 keys
    two = (2 * 357_826_560 * 2 + 24 * 14 * 2 * 2 * 64 * 3 + 2 * 136_134_656 * 2) / 2
    assert probe.prefill_flops_per_token(2, last_only=False) == two


def test_cli_quick_probe_runs_without_recording():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "probe", "--quick", "--threads", "1"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "read bandwidth GB/s" in proc.stdout
    assert "not recorded" in proc.stdout


def test_cli_user_error_is_one_line():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "probe", "--threads", "x"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0
    assert "Traceback" not in proc.stderr

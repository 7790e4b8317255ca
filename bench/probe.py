"""This machine's limits (bench/probe.c) and the rooflines derived from them.

The C probe is compiled with gcc into ``bench/.cache/`` under a name keyed by a
hash of its source, the compiler version and the flags, run, and its JSON
normalised into a *machine* dict::

    {
      "ghz": 3.3,                                          # core clock while running
      "threads": [1, 2],
      "bandwidth_gbs": {"1": 16.7, "2": 32.2},           # best pass, GB/s (1e9)
      "bandwidth_by_loop_gbs": {"plain": {...}, "prefetch": {...}},
      "peak_gops": {                                       # best pass, Gop/s
        "mul_add_f32x8": {"1": 76.0, "2": 150.0},          # flop/s / 1e9
        "fma_f32x8": {...}, "fma_f32x16": {...},
        "vnni_i8x32": {...}, "vnni_i8x64": {...},          # int8 op/s / 1e9
      },
      "probe": {...the raw probe JSON...},
      "measured_at": 1767000000.0, "cached": false,
    }

Thread counts are string keys so the dict round-trips through JSON unchanged.
Full measurements are cached per machine for a day; ``fresh=True`` re-measures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench import BenchError, command, results

BENCH_DIR = Path(__file__).resolve().parent
PROBE_SOURCE = BENCH_DIR / "probe.c"
CACHE_DIR = BENCH_DIR / ".cache"
CFLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-tree-vectorize", "-pthread")
CACHE_SECONDS = 24 * 3600
DEFAULT_BUFFER_BYTES = 2 << 30

# Qwen2.5-0.5B facts (spec §1, §3, §5) for the decode and prefill rooflines.
N_LAYERS = 24
HIDDEN = 896
INTERMEDIATE = 4864
VOCAB_ROWS = 151_936
N_HEADS = 14
HEAD_DIM = 64
PARAMETERS = 494_032_768
EMBED_PARAMS = VOCAB_ROWS * HIDDEN  # 136,134,656: gathered (1 row) and read whole by the LM head
# q, k, v, o, gate, up, down as (rows, columns) per layer
PROJECTIONS = (
    (HIDDEN, HIDDEN),
    (128, HIDDEN),
    (128, HIDDEN),
    (HIDDEN, HIDDEN),
    (INTERMEDIATE, HIDDEN),
    (INTERMEDIATE, HIDDEN),
    (HIDDEN, INTERMEDIATE),
)
PROJECTION_PARAMS = N_LAYERS * sum(r * c for r, c in PROJECTIONS)  # 357,826,560
PROJECTION_ROWS = N_LAYERS * sum(r for r, _ in PROJECTIONS)  # 304,128 (one int8 scale each)
SMALL_PARAMS = PARAMETERS - EMBED_PARAMS - PROJECTION_PARAMS  # biases and norms: 71,552
# Spec §3: reference unfused decode graph bytes at past = 0, seq = 1 without its seq terms.
F32_DECODE_BYTES = 1_976_743_344
NON_WEIGHT_BYTES = F32_DECODE_BYTES - 4 * PARAMETERS  # 612,272: activations, gather row, ...


class ProbeError(BenchError):
    """The probe could not be built or run, or printed something unusable."""


def decode_bytes_per_step(precision: str) -> int:
    """Bytes one decode step reads at past = 0 for a weight precision.

    ``f32`` is the spec's §3 constant (every weight read once, f32). The others
    keep the same non-weight traffic and change the weight bytes: ``bf16`` is
    2 bytes a parameter; ``int8`` is spec §5's scheme (the 7 projections int8
    with one f32 scale per output row, embedding/LM head and the small tensors
    f32, ≈ 0.90 GB); ``int8_all`` also stores the embedding int8 with per-row
    scales (≈ 0.50 GB).
    """
    small = 4 * SMALL_PARAMS
    int8_proj = PROJECTION_PARAMS + 4 * PROJECTION_ROWS
    weights = {
        "f32": 4 * PARAMETERS,
        "bf16": 2 * PARAMETERS,
        "int8": int8_proj + 4 * EMBED_PARAMS + small,
        "int8_all": int8_proj + EMBED_PARAMS + 4 * VOCAB_ROWS + small,
    }
    if precision not in weights:
        raise ValueError(f"unknown precision {precision!r}; expected one of {sorted(weights)}")
    return weights[precision] + NON_WEIGHT_BYTES


def prefill_flops_per_token(seq: int, *, last_only: bool = True) -> float:
    """Matmul FLOPs per prompt token for an uncached prefill of ``seq`` tokens.

    Counts 2 FLOPs per multiply-add: the 7 projections for every token, the
    attention scores and context (causal, so token i attends to i + 1 keys, in
    all 14 heads), and the LM head for the last row only when ``last_only``.
    Elementwise work (norms, RoPE, softmax, SwiGLU) is left out: it is < 0.1 %.
    """
    if seq < 1:
        raise ValueError("seq must be >= 1")
    projections = 2 * PROJECTION_PARAMS * seq
    attended = seq * (seq + 1) // 2  # sum over tokens of keys visible
    attention = N_LAYERS * N_HEADS * 2 * (2 * HEAD_DIM * attended)  # scores + context
    lm_rows = 1 if last_only else seq
    lm_head = 2 * EMBED_PARAMS * lm_rows
    return (projections + attention + lm_head) / seq


def _gcc_version(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ProbeError(f"cannot run {cc}: {exc}") from exc
    return out.stdout.splitlines()[0].strip()


def build_probe(cc: str = "gcc") -> Path:
    """Compile bench/probe.c (once per source, compiler and flags) and return its path."""
    return build_tool(PROBE_SOURCE, CFLAGS, cc)


def build_tool(source: Path, cflags: tuple[str, ...], cc: str = "gcc") -> Path:
    """Compile the C program ``source`` into ``bench/.cache/`` (once per source,
    compiler and flags) and return the binary's path."""
    version = _gcc_version(cc)
    key_text = source.read_bytes() + version.encode() + " ".join(cflags).encode()
    key = hashlib.sha256(key_text).hexdigest()[:16]
    binary = CACHE_DIR / f"{source.stem}-{key}"
    if binary.exists():
        return binary
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = binary.with_name(f"{binary.name}.{os.getpid()}.tmp")
    cmd = [cc, *cflags, "-o", str(tmp), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ProbeError(f"gcc failed on {source.name}: {proc.stderr.strip()}")
    tmp.replace(binary)  # atomic: a concurrent build sees the old name or the whole file
    return binary


def run_probe(
    threads: list[int],
    *,
    quick: bool = False,
    buffer_bytes: int | None = None,
    passes: int | None = None,
    seconds: float | None = None,
    bandwidth_only: bool = False,
) -> dict[str, Any]:
    """Build and run the probe once; return its raw JSON as a dict (``bandwidth_only``:
    no clock and no compute kernels, the read bandwidth alone)."""
    if not threads or any(t < 1 for t in threads):
        raise ValueError(f"thread counts must be positive, got {threads}")
    cmd = [str(build_probe()), "--threads", ",".join(str(t) for t in threads)]
    if quick:
        cmd.append("--quick")
    if bandwidth_only:
        cmd.append("--bandwidth-only")
    for flag, value in (("--bytes", buffer_bytes), ("--passes", passes), ("--seconds", seconds)):
        if value is not None:
            cmd += [flag, str(value)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ProbeError(f"probe failed ({proc.returncode}): {proc.stderr.strip()}")
    try:
        raw = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise ProbeError(f"probe printed invalid JSON: {exc}") from exc
    raw["command"] = cmd[1:]
    raw["binary"] = Path(cmd[0]).name
    return raw


def normalise(raw: dict[str, Any]) -> dict[str, Any]:
    """Turn the probe's raw JSON into the machine dict described in the module doc."""
    bandwidth = {str(b["threads"]): b["gbs"] for b in raw["bandwidth"]}
    unverified = [b["threads"] for b in raw["bandwidth"] if not b["verified"]]
    if unverified:
        raise ProbeError(f"bandwidth sum did not verify at threads {unverified}")
    peaks: dict[str, dict[str, float]] = {}
    loops = {
        loop: {str(b["threads"]): b[f"gbs_{loop}"] for b in raw["bandwidth"]}
        for loop in ("plain", "prefetch")
    }
    clean = {"bandwidth": {str(b["threads"]): b["clean_passes"] for b in raw["bandwidth"]}}
    for k in raw["kernels"]:
        peaks.setdefault(k["name"], {})[str(k["threads"])] = k["gops"]
        clean.setdefault(k["name"], {})[str(k["threads"])] = k["clean_passes"]
    return {
        "ghz": raw["ghz_cpu"],  # per second of the probe thread's own CPU time
        "threads": sorted(int(t) for t in bandwidth),
        "bandwidth_gbs": bandwidth,
        "bandwidth_by_loop_gbs": loops,
        "peak_gops": peaks,
        "clean_passes": clean,
        "probe": raw,
    }


IN_RUN_BYTES = 1 << 30  # a bandwidth read in a benchmark's round: larger than any cache
IN_RUN_PASSES = 3


def read_bandwidth(threads: int, *, quick: bool = False) -> float:
    """This moment's read bandwidth at ``threads`` threads, GB/s: the probe's best of
    ``IN_RUN_PASSES`` passes over ``IN_RUN_BYTES`` (``quick``: its small cache-sized
    buffer, for smoke runs). ``bench run`` measures it in every round beside the
    engines, because on a shared VM the bandwidth a second thread gets moves between
    minutes (the Zen 4 here: 2-thread probes of 35.6, 58.2 and 36.7 GB/s in a row)."""
    raw = run_probe([threads], quick=quick, bandwidth_only=True,
                    buffer_bytes=None if quick else IN_RUN_BYTES,
                    passes=None if quick else IN_RUN_PASSES)
    (row,) = raw["bandwidth"]
    if not row["verified"]:
        raise ProbeError(f"bandwidth sum did not verify at {threads} threads")
    return float(row["gbs"])


def default_buffer_bytes() -> int:
    """2 GiB, or 8 × the last-level cache if that is larger (so DRAM is what is read)."""
    llc = 0
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        llc = max(llc, int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size))
    return max(DEFAULT_BUFFER_BYTES, 8 * llc)


def _cache_path(threads: list[int], quick: bool, buffer_bytes: int, passes: int | None) -> Path:
    binary = build_probe().name
    facts = (binary, platform.node(), results.machine_facts()["id"], threads, quick, buffer_bytes)
    ident = "|".join(str(x) for x in (*facts, passes))
    return CACHE_DIR / f"machine-{hashlib.sha256(ident.encode()).hexdigest()[:16]}.json"


def measure_machine(
    threads: list[int],
    *,
    fresh: bool = False,
    quick: bool = False,
    buffer_bytes: int | None = None,
    passes: int | None = None,
) -> dict[str, Any]:
    """Measure (or reuse a measurement from the last day of) this machine's limits.

    ``threads`` lists the thread counts to measure, e.g. ``[1, 2]``. ``quick``
    uses a small buffer and short passes (tests; its bandwidth is cache, not
    DRAM). ``fresh`` ignores the cache. ``passes`` overrides the probe's
    best-of count (10 full, 2 quick); more passes find more quiet moments on a
    shared machine.
    """
    if buffer_bytes is None:
        buffer_bytes = (64 << 20) if quick else default_buffer_bytes()
    path = _cache_path(threads, quick, buffer_bytes, passes)
    if not fresh and path.exists():
        cached = json.loads(path.read_text())
        if time.time() - cached["measured_at"] < CACHE_SECONDS:
            cached["cached"] = True
            return cached
    load_before = os.getloadavg()
    raw = run_probe(threads, quick=quick, buffer_bytes=buffer_bytes, passes=passes)
    machine = normalise(raw)
    machine["loadavg_before_after"] = [load_before[0], os.getloadavg()[0]]
    machine["measured_at"] = time.time()
    machine["cached"] = False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(machine, indent=1, sort_keys=True))
    tmp.replace(path)
    return machine


def fma_peak_kernel(flags: Mapping[str, bool]) -> str:
    """The probe kernel that measures the widest FMA the CPU has: ``fma_f32x16``
    (``_mm512_fmadd_ps``) when it reports ``avx512f``, else ``fma_f32x8``.

    ``flags`` maps flag names to presence, as ``results.machine_facts()["flags"]``.
    """
    return "fma_f32x16" if flags.get("avx512f") else "fma_f32x8"


def clean_limits(records: list[dict[str, Any]], machine_id: str, threads: list[int],
                 kernels: tuple[str, ...]) -> dict[str, Any] | None:
    """The newest probe record of ``machine_id`` whose bandwidth and ``kernels`` were
    measured at every thread count in ``threads`` with at least one undisturbed pass
    each (``clean_passes`` > 0): ``{"record": ..., "bandwidth_gbs": {t: ...},
    "peak_gops": {kernel: {t: ...}}}`` with string thread keys; None if there is none.

    Only the figures asked for must be clean: a disturbed int8 kernel does not
    spoil a record's bandwidth.
    """
    wanted = [str(t) for t in threads]
    for record in reversed(records):
        if record.get("kind") != "probe" or record.get("machine", {}).get("id") != machine_id:
            continue
        limits = (record.get("payload") or {}).get("machine_limits") or {}
        clean = limits.get("clean_passes")
        figures = {"bandwidth": limits.get("bandwidth_gbs")} | {
            k: (limits.get("peak_gops") or {}).get(k) for k in kernels}
        if not isinstance(clean, dict) or not all(
                isinstance(values, dict) and isinstance(clean.get(name), dict)
                and all(t in values and int(clean[name].get(t, 0)) > 0 for t in wanted)
                for name, values in figures.items()):
            continue
        return {
            "record": record,
            "bandwidth_gbs": {t: float(limits["bandwidth_gbs"][t]) for t in wanted},
            "peak_gops": {k: {t: float(limits["peak_gops"][k][t]) for t in wanted}
                          for k in kernels},
        }
    return None


def roofline(bytes_per_step: float, flops_per_token: float, machine: dict[str, Any]) -> dict:
    """Lower bounds on ms/token from a machine dict.

    Decode reads ``bytes_per_step`` per token, so it cannot beat
    ``bytes / bandwidth``; prefill does ``flops_per_token`` of arithmetic, so
    it cannot beat ``flops / peak`` for each probed kernel (``mul_add_f32x8`` is
    the bitwise f32 schedules' arithmetic; the ``vnni_*`` entries count int8
    ops and apply when the work is int8). Keys are thread counts as strings::

        {"decode_ms_per_token": {"1": 165.9, "2": 130.1},
         "prefill_ms_per_token": {"mul_add_f32x8": {"1": 13.0, ...}, "fma_f32x8": {...}},
         "bytes_per_step": ..., "flops_per_token": ...}
    """
    decode = {t: 1e3 * bytes_per_step / (gbs * 1e9) for t, gbs in machine["bandwidth_gbs"].items()}
    prefill = {
        name: {t: 1e3 * flops_per_token / (gops * 1e9) for t, gops in per_thread.items()}
        for name, per_thread in machine["peak_gops"].items()
    }
    return {
        "bytes_per_step": bytes_per_step,
        "flops_per_token": flops_per_token,
        "decode_ms_per_token": decode,
        "prefill_ms_per_token": prefill,
    }


def standard_rooflines(machine: dict[str, Any], prompt_tokens: int = 128) -> dict[str, dict]:
    """Rooflines for the f32, bf16, int8 and int8_all byte counts at one prompt length."""
    flops = prefill_flops_per_token(prompt_tokens)
    return {
        precision: roofline(decode_bytes_per_step(precision), flops, machine)
        for precision in ("f32", "bf16", "int8", "int8_all")
    }


PRECISIONS = ("f32", "bf16", "int8", "int8_all")


def _cells(values: dict[str, float], clean: dict[str, int], threads: list[str], fmt: str) -> str:
    """Right-aligned cells; a value from passes that were all disturbed is starred."""
    return "".join(
        format(values[t], fmt) + ("*" if clean.get(t, 1) == 0 else " ") if t in values else " " * 12
        for t in threads
    )


def _format_summary(machine: dict[str, Any], rooflines: dict[str, dict], prompt: int) -> str:
    threads = [str(t) for t in machine["threads"]]
    clean = machine.get("clean_passes", {})
    cols = "".join(f"{t + ' thr':>11} " for t in threads)
    raw = machine["probe"]
    quick = "; QUICK (cache-sized buffer)" if raw["quick"] else ""
    lines = [
        f"clock {machine['ghz']:.2f} GHz (1 thread); buffer {raw['buffer_bytes'] / 2**30:.2f} GiB;"
        f" best of >= {raw['passes']} passes{quick}",
        f"{'':34}{cols}",
        f"{'read bandwidth GB/s':34}"
        + _cells(machine["bandwidth_gbs"], clean.get("bandwidth", {}), threads, "11.1f"),
    ]
    for loop, per_thread in machine.get("bandwidth_by_loop_gbs", {}).items():
        lines.append(f"{'  ' + loop + ' loop':34}" + _cells(per_thread, {}, threads, "11.1f"))
    for name, per_thread in machine["peak_gops"].items():
        unit = "GOP/s (int8)" if name.startswith("vnni") else "GFLOP/s"
        cells = _cells(per_thread, clean.get(name, {}), threads, "11.1f")
        lines.append(f"{name + ' ' + unit:34}{cells}")
    lines.append("decode roofline ms/token (bytes read per step):")
    for precision, r in rooflines.items():
        label = f"  {precision} ({r['bytes_per_step'] / 1e9:.3f} GB)"
        lines.append(f"{label:34}" + _cells(r["decode_ms_per_token"], {}, threads, "11.1f"))
    f32 = rooflines["f32"]
    lines.append(
        f"prefill roofline ms/token ({prompt}-token prompt,"
        f" {f32['flops_per_token'] / 1e9:.3f} GFLOP/token):"
    )
    for name, per_thread in f32["prefill_ms_per_token"].items():
        if name.startswith(("mul_add", "fma")):
            lines.append(f"{'  ' + name:34}" + _cells(per_thread, {}, threads, "11.2f"))
    if any(n == 0 for per in clean.values() for n in per.values()):
        lines.append("* every pass was disturbed (another process took a core): a low bound")
    return "\n".join(lines)


def _probe_arguments(parser: argparse.ArgumentParser) -> None:
    default_threads = sorted({1, os.cpu_count() or 1})
    parser.add_argument(
        "--threads",
        default=",".join(map(str, default_threads)),
        help="comma-separated thread counts (default: %(default)s)",
    )
    parser.add_argument("--fresh", action="store_true", help="re-measure even if cached today")
    parser.add_argument(
        "--quick", action="store_true", help="small buffer, short passes; printed, not recorded"
    )
    parser.add_argument("--bytes", type=int, default=None, help="bandwidth buffer size in bytes")
    parser.add_argument("--passes", type=int, default=None, help="best of this many passes")
    parser.add_argument("--prompt", type=int, default=128, help="prompt length for prefill")
    parser.add_argument("--no-record", action="store_true", help="do not append to results.jsonl")


def parse_threads(text: str) -> list[int]:
    """``--threads 1,2``: sorted distinct counts in 1..256, else a BenchError."""
    try:
        threads = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise BenchError(f"--threads wants comma-separated integers, got {text!r}") from None
    if not threads or any(t < 1 or t > 256 for t in threads):
        raise BenchError(f"--threads wants counts in 1..256, got {text!r}")
    return sorted(set(threads))


@command(
    "probe",
    help="measure bandwidth and peak arithmetic; append a probe record",
    arguments=_probe_arguments,
)
def probe_command(args: argparse.Namespace) -> int:
    """Measure (or reuse today's measurement), print it, and record a fresh full run."""
    threads = parse_threads(args.threads)
    if args.bytes is not None and args.bytes < (2 << 20):
        raise BenchError("--bytes must be at least 2 MiB")
    if args.passes is not None and not 1 <= args.passes <= 64:
        raise BenchError("--passes must be in 1..64")
    machine = measure_machine(
        threads, fresh=args.fresh, quick=args.quick, buffer_bytes=args.bytes, passes=args.passes
    )
    rooflines = standard_rooflines(machine, args.prompt)
    print(_format_summary(machine, rooflines, args.prompt))
    if args.quick or args.no_record:
        print("not recorded (--quick or --no-record)")
    elif machine["cached"]:
        age = (time.time() - machine["measured_at"]) / 3600
        print(f"cached measurement from {age:.1f} h ago, not recorded again (--fresh re-measures)")
    else:
        payload = {"machine_limits": machine, "prompt_tokens": args.prompt, "rooflines": rooflines}
        results.append_record(results.make_record("probe", payload, threads=threads))
        print(f"appended a probe record to {results.RESULTS_PATH}")
    return 0

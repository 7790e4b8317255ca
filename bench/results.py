"""The append-only benchmark record, ``bench/results.jsonl``.

One JSON object per line, never rewritten. Every record carries::

    {"schema": 1, "kind": "probe" | "decode" | ..., "time": "2026-...Z", "unix_time": ...,
     "machine": {...}, "versions": {...}, "git": {...}, "threads": {...}, "loadavg": [...],
     "payload": {...}}

Engine timings go in ``payload["measurements"]``, a list of dicts with at least
``engine``, ``metric`` (e.g. ``"decode_ms_per_token"``), ``threads`` and
``median`` (plus ``min``, ``n``, spreads as the command likes). The control
check reads its history from those entries (:func:`history_medians`).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_PATH = Path(__file__).resolve().parent / "results.jsonl"
SCHEMA_VERSION = 1
FLAGS_OF_INTEREST = ("avx2", "fma", "avx512f", "avx_vnni", "avx512_vnni", "avx512_bf16")
PACKAGES = ("numpy", "torch", "transformers", "xdsl", "llama_cpp_python", "gguf", "threadpoolctl")
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def _cpuinfo() -> tuple[str, set[str]]:
    """The first CPU's model name and flags from /proc/cpuinfo."""
    model: str | None = None
    flags: set[str] = set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model or platform.processor() or "unknown", flags


def _meminfo_bytes(field: str = "MemTotal") -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine_kind(flags: Mapping[str, bool]) -> str:
    """The machine kind the goals are judged per: ``"avx512"`` (the CPU has ``avx512f``),
    ``"avx2-only"`` (``avx2`` and ``fma`` but no ``avx512f``) or ``"no-avx2"``.

    ``flags`` maps flag names to presence, as ``machine_facts()["flags"]`` does.
    """
    if flags.get("avx512f"):
        return "avx512"
    if flags.get("avx2") and flags.get("fma"):
        return "avx2-only"
    return "no-avx2"


def kind_of(record: Mapping[str, Any]) -> str | None:
    """A record's machine kind: ``machine.kind``, else derived from ``machine.flags``
    (records written before the kind was stored); None without flags."""
    machine = record.get("machine") or {}
    kind = machine.get("kind")
    if isinstance(kind, str):
        return kind
    flags = machine.get("flags")
    return machine_kind(flags) if isinstance(flags, dict) else None


def machine_facts() -> dict[str, Any]:
    """CPU model, core counts, SIMD flags of interest, machine kind, memory, OS; ``id``
    groups runs.

    ``id`` is a short hash of the hardware facts (not the host name), so the
    control check compares runs on the same kind of machine; ``kind``
    (:func:`machine_kind`) is coarser: the class of machine a goal is judged for.
    """
    model, flags = _cpuinfo()
    cpu_flags = {flag: flag in flags for flag in FLAGS_OF_INTEREST}
    cpu_flags["amx"] = any(f.startswith("amx") for f in flags)
    mem = _meminfo_bytes()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    facts: dict[str, Any] = {
        "cpu_model": model,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "flags": cpu_flags,
        "kind": machine_kind(cpu_flags),
        "mem_total_bytes": mem,
        "arch": platform.machine(),
        "os": f"{platform.system()} {platform.release()}",
        "hostname": platform.node(),
    }
    mem_gib = round(mem / 2**30) if mem else None
    ident = json.dumps([model, os.cpu_count(), mem_gib, cpu_flags], sort_keys=True)
    facts["id"] = hashlib.sha256(ident.encode()).hexdigest()[:12]
    return facts


def _gcc_version() -> str | None:
    try:
        out = subprocess.run(["gcc", "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.splitlines()[0].strip() if out.stdout else None


def versions() -> dict[str, str | None]:
    """Python, gcc and installed package versions (read from metadata, nothing imported)."""
    found: dict[str, str | None] = {"python": sys.version.split()[0], "gcc": _gcc_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip()


def git_info() -> dict[str, Any]:
    """HEAD commit, branch, whether tracked files differ from HEAD, untracked file count."""
    commit = _git("rev-parse", "HEAD")
    tracked = _git("status", "--porcelain", "--untracked-files=no")
    untracked = _git("ls-files", "--others", "--exclude-standard")
    return {
        "commit": commit,
        "branch": _git("rev-parse", "--abbrev-ref", "HEAD"),
        "dirty": bool(tracked) if tracked is not None else None,
        "untracked_files": len(untracked.splitlines()) if untracked else 0,
    }


def thread_info(threads: list[int] | int | None = None) -> dict[str, Any]:
    """Requested thread counts, BLAS thread pools and the thread environment variables.

    BLAS pools come from threadpoolctl when it is installed (after importing
    numpy so its BLAS is loaded); otherwise ``blas`` is ``None`` and only the
    environment variables are recorded.
    """
    info: dict[str, Any] = {
        "requested": threads,
        "env": {var: os.environ.get(var) for var in THREAD_ENV_VARS},
        "blas": None,
    }
    try:
        import numpy  # noqa: F401  (loads the BLAS threadpoolctl inspects)
        from threadpoolctl import threadpool_info
    except ImportError:
        return info
    info["blas"] = [
        {k: pool.get(k) for k in ("user_api", "internal_api", "num_threads", "version")}
        for pool in threadpool_info()
    ]
    return info


def make_record(
    kind: str, payload: dict[str, Any], *, threads: list[int] | int | None = None
) -> dict[str, Any]:
    """A complete record: the payload plus machine, versions, git, threads and time."""
    now = dt.datetime.now(dt.UTC)
    return {
        "schema": SCHEMA_VERSION,
        "kind": kind,
        "time": now.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "unix_time": now.timestamp(),
        "machine": machine_facts(),
        "versions": versions(),
        "git": git_info(),
        "threads": thread_info(threads),
        "loadavg": list(os.getloadavg()),
        "payload": payload,
    }


def append_record(record: dict[str, Any], path: Path = RESULTS_PATH) -> None:
    """Append one record as a JSON line (file created if missing, never truncated).

    Appends hold an exclusive lock, and a line is started on a fresh line even
    if an earlier writer died mid-line.
    """
    line = json.dumps(record, sort_keys=True, allow_nan=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.seek(0, os.SEEK_END)
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
            f.write(line.encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def load_records(path: Path = RESULTS_PATH, kind: str | None = None) -> list[dict[str, Any]]:
    """All records in file order (optionally one ``kind``); a missing file is empty.

    A line that is not a JSON object is reported with its line number.
    """
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON: {exc}") from exc
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{number}: not a JSON object")
        if kind is None or record.get("kind") == kind:
            records.append(record)
    return records


def iter_measurements(records: list[dict[str, Any]]) -> Iterator[tuple[dict, dict]]:
    """(record, measurement) for every entry of every record's ``payload["measurements"]``."""
    for record in records:
        payload = record.get("payload")
        if isinstance(payload, dict):
            for m in payload.get("measurements", ()):
                if isinstance(m, dict):
                    yield record, m


def history_medians(
    records: list[dict[str, Any]],
    *,
    engine: str,
    metric: str,
    threads: int,
    machine_id: str,
) -> list[float]:
    """Recorded medians of one engine/metric/thread count on one machine id, in file order."""
    return [
        float(m["median"])
        for record, m in iter_measurements(records)
        if record.get("machine", {}).get("id") == machine_id
        and m.get("engine") == engine
        and m.get("metric") == metric
        and m.get("threads") == threads
        and isinstance(m.get("median"), int | float)
    ]

"""The tuner's records: ``tuning.json`` in the cache directory.

``nanocompile tune`` measures candidate schedules of each projection kernel
on this machine and writes what it found here; ``compile`` and ``generate``
read it back and schedule a kernel with a recorded winner by the winner's
knobs, without measuring. The file holds, per machine (the compiler, the CPU
model and flags, the thread count: ``machine_key``), per kernel (its
``kernel_key``: the IR and the arch), one entry::

    {"kernel": "fused_matmul_3", "knobs": "rows=6 columns=4 ...",
     "hand": "rows=6 columns=4 ...", "winner": true,
     "hand_ns": 1234567, "tuned_ns": 1100000, "speedup": 1.12,
     "candidates": 31, "seed": 0, "costs": [[knobs, ns], ...], "date": "..."}

``winner`` is true only when the winner beat the hand-written schedule by
more than the threshold in the final paired run; an entry without a winner
still records that the kernel was searched (and its costs, for a replay).

``NANOCOMPILE_TUNING`` overrides the place: a path, or ``off`` (no records
read or written: the hand-written schedules everywhere, what the tests use).
A file that cannot be read or parsed is reported once on stderr and counts as
empty; writes go to a temporary file renamed over the old one.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nanocompile.backend.gcc import compiler_identity, cpu_identity, default_cache_dir
from nanocompile.backend.pool import env_threads
from nanocompile.checkpoint.jsonfile import parse_json

TUNING_ENV = "NANOCOMPILE_TUNING"
FILE_NAME = "tuning.json"
VERSION = 2
"""2: costs are ns per token summed over the workloads (1: ns per run, where
the prefill outweighed gate/up's decode step ~17:1; its winners are not reused)."""
_warned: set[str] = set()


def tuning_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where the records are (None: ``NANOCOMPILE_TUNING=off``)."""
    value = (os.environ if environ is None else environ).get(TUNING_ENV, "")
    if value.strip().lower() == "off":
        return None
    return Path(value).expanduser() if value else default_cache_dir() / FILE_NAME


def default_threads() -> int:
    """The thread count the pool starts with: ``NANOCOMPILE_THREADS``, else the
    physical cores this process may run on, as ``pool.c`` counts them."""
    try:
        threads = env_threads()
    except ValueError:
        threads = None
    if threads is not None:
        return threads
    cores = set()
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topology.joinpath("physical_package_id").read_text().strip(),
                       topology.joinpath("core_id").read_text().strip()))
        except OSError:
            cores = set()
            break
    return len(cores) or len(cpus) or os.cpu_count() or 1


def machine_description(threads: int) -> str:
    """What a record's machine is, readable: compiler, CPU model, threads."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            fields.setdefault(name.strip(), value.strip())
    except OSError:
        pass
    cpu = fields.get("model name", "unknown CPU")
    if "cpu family" in fields and "model" in fields:  # "AMD EPYC" alone names no generation
        cpu += f" (family {fields['cpu family']}, model {fields['model']})"
    return f"{compiler_identity()} | {cpu} | threads {threads}"


def machine_key(threads: int) -> str:
    """sha256 of the compiler, the CPU model and flags, and the thread count."""
    text = f"{compiler_identity()}\n{cpu_identity()}\nthreads {threads}"
    return hashlib.sha256(text.encode()).hexdigest()


def load(path: Path | None) -> dict[str, Any]:
    """The records at ``path`` (empty when absent, off, or unreadable: reported once)."""
    empty: dict[str, Any] = {"version": VERSION, "machines": {}}
    if path is None or not path.exists():
        return empty
    try:
        data = parse_json(path.read_bytes())
        version = data.get("version") if isinstance(data, dict) else None
        if isinstance(version, int) and version < VERSION:
            raise ValueError(f"they are of version {version}, measured another way; "
                             f"this nanocompile reads version {VERSION} "
                             "('nanocompile tune' records anew)")
        if not isinstance(data, dict) or version != VERSION \
                or not isinstance(data.get("machines"), dict):
            raise ValueError(f"expected a version {VERSION} tuning file")
    except (OSError, ValueError) as e:
        if str(path) not in _warned:
            _warned.add(str(path))
            print(f"nanocompile: ignoring the tuning records in {path}: {e}", file=sys.stderr)
        return empty
    return data


def entries(path: Path | None, threads: int) -> dict[str, dict[str, Any]]:
    """This machine's entries at ``threads``, by kernel key."""
    machine = load(path)["machines"].get(machine_key(threads), {})
    found = machine.get("kernels", {}) if isinstance(machine, dict) else {}
    return {k: v for k, v in found.items() if isinstance(v, dict)}


def winners(path: Path | None, threads: int) -> dict[str, str]:
    """The recorded winners' knobs (as text) by kernel key, this machine, ``threads``."""
    return {key: entry["knobs"] for key, entry in entries(path, threads).items()
            if entry.get("winner") is True and isinstance(entry.get("knobs"), str)}


def record(path: Path, threads: int, kernel_key: str, entry: Mapping[str, Any]) -> None:
    """Store ``entry`` for ``kernel_key`` on this machine at ``threads`` (replacing
    an older one), writing the file atomically."""
    data = load(path)
    machine = data["machines"].setdefault(
        machine_key(threads), {"machine": machine_description(threads), "kernels": {}})
    machine["kernels"][kernel_key] = dict(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tuning-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""The target architecture: which vector code the schedules may ask for.

``Arch`` names an instruction set the C target can print vector loops for,
and its f32 vector width. ``host_arch()`` reads the CPU's flags (Linux
``/proc/cpuinfo``: the widest of ``avx512`` (``avx512f``), ``avx2`` and
``scalar`` the CPU runs) or ``NANOCOMPILE_ARCH`` (``scalar``, ``avx2`` or
``avx512``, checked against the flags) to override it; the default schedules
vectorize only when the arch has vectors, by its lane count. The C target
prints a vector by its lane count (``targets/c_vector.py``: 8 lanes as AVX2,
16 as AVX-512F), so the arch decides only what the schedules ask for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Arch:
    """An instruction set: its name, f32 lanes per vector (1: scalar), the CPU
    flags it needs and its vector registers (0: scalar)."""

    name: str
    f32_lanes: int
    cpu_flags: tuple[str, ...]
    vector_registers: int = 0

    @property
    def vector(self) -> bool:
        return self.f32_lanes > 1


SCALAR = Arch("scalar", 1, ())
AVX2 = Arch("avx2", 8, ("avx2", "fma"), 16)  # FMA3: the matmuls' _mm256_fmadd_ps
AVX512 = Arch("avx512", 16, ("avx512f",), 32)
ARCHES = {a.name: a for a in (SCALAR, AVX2, AVX512)}
WIDEST_FIRST = (AVX512, AVX2)  # what host_arch() looks for, in order


class ArchError(ValueError):
    """An unknown arch name, or one this CPU cannot run."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The flags of the first CPU listed (empty when the file is unreadable)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


def arch_named(name: str, flags: frozenset[str] | None = None) -> Arch:
    """The arch called ``name``, checked against the CPU's flags."""
    arch = ARCHES.get(name)
    if arch is None:
        raise ArchError(f"unknown arch '{name}', expected one of {', '.join(ARCHES)}")
    missing = [f for f in arch.cpu_flags if f not in (cpu_flags() if flags is None else flags)]
    if missing:
        raise ArchError(f"arch '{name}' needs CPU flags {', '.join(missing)}, which this "
                        "CPU does not report")
    return arch


def host_arch() -> Arch:
    """``NANOCOMPILE_ARCH`` if set, else the widest arch this CPU runs."""
    override = os.environ.get("NANOCOMPILE_ARCH")
    if override:
        try:
            return arch_named(override)
        except ArchError as e:
            raise ArchError(f"NANOCOMPILE_ARCH: {e}") from None
    return widest_arch(cpu_flags())


def widest_arch(flags: frozenset[str]) -> Arch:
    """The widest arch a CPU with ``flags`` runs (``scalar`` when none)."""
    for arch in WIDEST_FIRST:
        if all(f in flags for f in arch.cpu_flags):
            return arch
    return SCALAR

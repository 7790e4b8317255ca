"""The target architecture: which vector code the schedules may ask for.

``Arch`` names an instruction set the C target can print vector loops for,
and its f32 vector width. ``host_arch()`` reads the CPU's flags (Linux
``/proc/cpuinfo``: the widest of ``avx512`` (``avx512f``), ``avx2`` and
``scalar`` the CPU runs) or ``NANOCOMPILE_ARCH`` (``scalar``, ``avx2`` or
``avx512``, checked against the flags) to override it; the default schedules
vectorize only when the arch has vectors, by its lane count. The C target
prints a vector by its lane count (``targets/c_vector.py``: 8 lanes as AVX2,
16 as AVX-512F), so the arch decides only what the schedules ask for.

**The int8-dot path** (spec §5 kernel B's integer core, a vector
``loop.dot4``): which instructions the C target prints it with, chosen from
the CPU's flags when the program is compiled (``host_int8_dot()``; the best
this CPU runs: ``avx512_vnni`` (flags ``avx512_vnni`` and ``avx512vl``:
``vpdpbusd`` on ymm/zmm), ``avx_vnni`` (``avx_vnni``: the VEX ``vpdpbusd``),
``avx2`` (``vpmaddubsw`` with the sign trick), else ``scalar``) or
``NANOCOMPILE_INT8_DOT`` (one of those names, checked against the flags), so
a CPU lacking an instruction never gets it to compile. Every path computes the
same exact integers (``targets/c_vector.py``), hence the same bits.
``host_arch()`` records the path in its ``Arch`` (``int8_dot``: part of its
``repr``, so of the program cache's key).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path


@dataclass(frozen=True)
class Arch:
    """An instruction set: its name, f32 lanes per vector (1: scalar), the CPU
    flags it needs and its vector registers (0: scalar)."""

    name: str
    f32_lanes: int
    cpu_flags: tuple[str, ...]
    vector_registers: int = 0
    int8_dot: str = field(default="scalar", compare=False)  # the int8-dot path (docstring)

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
    """``NANOCOMPILE_ARCH`` if set, else the widest arch this CPU runs; with its
    int8-dot path (``host_int8_dot``; ``scalar`` for the scalar arch)."""
    override = os.environ.get("NANOCOMPILE_ARCH")
    if override:
        try:
            arch = arch_named(override)
        except ArchError as e:
            raise ArchError(f"NANOCOMPILE_ARCH: {e}") from None
    else:
        arch = widest_arch(cpu_flags())
    return replace(arch, int8_dot=host_int8_dot() if arch.vector else "scalar")


INT8_DOT_FLAGS = {"avx512_vnni": ("avx512_vnni", "avx512vl"), "avx_vnni": ("avx_vnni",),
                  "avx2": ("avx2",), "scalar": ()}
"""The int8-dot paths (module docstring), best first, and the CPU flags each needs."""


def int8_dot_named(name: str, flags: frozenset[str] | None = None) -> str:
    """The int8-dot path ``name``, checked against the CPU's flags."""
    if name not in INT8_DOT_FLAGS:
        raise ArchError(f"unknown int8-dot path '{name}', expected one of "
                        f"{', '.join(INT8_DOT_FLAGS)}")
    have = cpu_flags() if flags is None else flags
    missing = [f for f in INT8_DOT_FLAGS[name] if f not in have]
    if missing:
        raise ArchError(f"int8-dot path '{name}' needs CPU flags {', '.join(missing)}, which "
                        "this CPU does not report")
    return name


def best_int8_dot(flags: frozenset[str]) -> str:
    """The best int8-dot path a CPU with ``flags`` runs (``scalar`` when none)."""
    return next(name for name, need in INT8_DOT_FLAGS.items() if all(f in flags for f in need))


def host_int8_dot() -> str:
    """``NANOCOMPILE_INT8_DOT`` if set (checked against the flags), else the best
    int8-dot path this CPU runs; under ``NANOCOMPILE_ARCH=avx2`` (an AVX2 CPU
    emulated) not ``avx512_vnni`` (EVEX-encoded: AVX-512 hardware), under
    ``scalar`` only ``scalar``."""
    override = os.environ.get("NANOCOMPILE_INT8_DOT")
    if override:
        try:
            return int8_dot_named(override)
        except ArchError as e:
            raise ArchError(f"NANOCOMPILE_INT8_DOT: {e}") from None
    flags = cpu_flags()
    arch = os.environ.get("NANOCOMPILE_ARCH")
    if arch == SCALAR.name:
        return "scalar"
    if arch == AVX2.name:
        flags = flags - set(INT8_DOT_FLAGS["avx512_vnni"])
    return best_int8_dot(flags)


def widest_arch(flags: frozenset[str]) -> Arch:
    """The widest arch a CPU with ``flags`` runs (``scalar`` when none)."""
    for arch in WIDEST_FIRST:
        if all(f in flags for f in arch.cpu_flags):
            return arch
    return SCALAR

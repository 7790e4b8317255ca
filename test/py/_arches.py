"""The archs a test runs compiled code for: every arch of ``targets/arch.py``,
each skipped with its reason when this CPU lacks its flags (the scalar path
needs none, so it always runs)."""

from __future__ import annotations

from typing import Any

import pytest

from nanocompile.targets.arch import ARCHES, Arch, cpu_flags, host_arch

TITLES = {"scalar": "scalar", "avx2": "AVX2", "avx512": "AVX-512"}


def missing_reason(arch: Arch) -> str | None:
    """Why ``arch``'s compiled code cannot run here, None when it can."""
    flags = cpu_flags()
    missing = [f for f in arch.cpu_flags if f not in flags]
    if not missing:
        return None
    return (f"the CPU has no {', '.join(missing)} ({TITLES[arch.name]} path untested "
            "here)")


def off_host(arch: Arch) -> bool:
    """A vector arch that is not the host's (AVX2 on an AVX-512 CPU)."""
    return arch.vector and arch.name != host_arch().name


def slow_off_host(arch: Arch) -> list[Any]:
    """``[pytest.mark.slow]`` for an :func:`off_host` arch, else no mark: the
    non-slow suite's 3-minute budget (the host's arch and the scalar path keep
    the case quick; the full suite runs every arch)."""
    return [pytest.mark.slow] if off_host(arch) else []


def arch_params(archs: tuple[Arch, ...] = tuple(ARCHES.values()),
                quick_on_host_only: bool = False) -> list[Any]:
    """``pytest.param`` per arch, id its name, skipped where the CPU lacks it;
    with ``quick_on_host_only`` an :func:`off_host` arch runs in the full suite
    only (:func:`slow_off_host`)."""
    params = []
    for arch in archs:
        reason = missing_reason(arch)
        marks: list[Any] = [pytest.mark.skip(reason=reason)] if reason else []
        if quick_on_host_only:
            marks += slow_off_host(arch)
        params.append(pytest.param(arch, id=arch.name, marks=marks))
    return params

"""Files built once per pytest session and shared by its xdist workers.

Each xdist worker has its own ``tmp_path_factory`` base directory, one level
below the session's (``.../pytest-N/popen-gw0``), so a session-scoped fixture
would build its files once per worker. What is deterministic and only read by
the tests (the tiny synthetic snapshot, the Qwen2 tokenizer files) is built
here instead, in the session's directory, by whichever worker asks first; the
others wait on a lock and reuse it. A run without xdist builds in its own base
directory, as before. The gcc and program cache of the tests that compile but
do not test the cache is kept in pytest's cache directory (``kernel_cache_dir``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nanocompile.checkpoint.synth import write_synthetic_snapshot

SYNTH_SEED = 0
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def session_root(factory: pytest.TempPathFactory) -> Path:
    """The session's temporary directory, the parent of every worker's base directory."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], object]) -> Path:
    """``<session root>/name``, filled by ``build(directory)`` on the session's first call.

    A ``name.done`` marker is written after a complete build; a directory without
    it (a worker that died while building) is removed and built again.
    """
    root = session_root(factory)
    target = root / name
    done = root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            if target.exists():
                shutil.rmtree(target)
            target.mkdir()
            build(target)
            done.touch()
    return target


def tiny_snapshot_dir(factory: pytest.TempPathFactory) -> Path:
    """The tiny synthetic snapshot (2 layers, hidden 64, real vocabulary, tokenizer files)."""
    return built_once(factory, "tiny-snapshot", lambda out: write_synthetic_snapshot(
        out, tiny=True, seed=SYNTH_SEED, tokenizer=True))


def copy_tokenizer_files(factory: pytest.TempPathFactory, out: Path) -> None:
    """Copy the session's tokenizer files (``write_tokenizer_files``' output, written
    for the tiny snapshot by this session's builder) into ``out``."""
    source = tiny_snapshot_dir(factory)
    for name in TOKENIZER_FILES:
        shutil.copyfile(source / name, out / name)


def tokenizer_dir(factory: pytest.TempPathFactory) -> Path:
    """A directory holding only the session's tokenizer files."""
    return built_once(factory, "qwen-tokenizer",
                      lambda out: copy_tokenizer_files(factory, out))


KERNEL_CACHE = "nanocompile-kernels"  # pytest's cache directory: .pytest_cache/d/<this>
KERNEL_CACHE_DAYS = 7  # files older than this are removed at a session's start


def kernel_cache_dir(config: pytest.Config, factory: pytest.TempPathFactory) -> Path:
    """The gcc and program cache (``NANOCOMPILE_CACHE_DIR``) of the tests that compile
    graphs but do not test the cache; never the user's cache.

    It lives in pytest's cache directory (``.pytest_cache/d/nanocompile-kernels``) and
    is kept from run to run, like the user's cache the other tests compile into: a
    graph compiled by one module, worker or run is a cache hit for the others. Both
    caches are made for concurrent processes (per-key locks, entries installed by
    ``os.replace``) and are keyed by all their output depends on: the C source, the
    flags, gcc and the CPU for a library; the graph, the options, the arch, the CPU
    and every source file of the compiler for a program, so a changed compiler
    runs its pipeline afresh. Files older than ``KERNEL_CACHE_DAYS`` are removed once
    per session (a removed entry is a miss). Without pytest's cache provider
    (``-p no:cacheprovider``) it is a directory of the session's own.
    """
    cache = getattr(config, "cache", None)
    if cache is None:
        path = session_root(factory) / "kernel-cache"
        path.mkdir(exist_ok=True)
        return path
    path = Path(cache.mkdir(KERNEL_CACHE))
    built_once(factory, "kernel-cache-pruned", lambda _: _remove_old_files(path))
    return path


def _remove_old_files(root: Path) -> None:
    """Remove the files under ``root`` not modified for ``KERNEL_CACHE_DAYS`` days
    (not the lock files, which another process may hold, nor builds in progress)."""
    limit = time.time() - KERNEL_CACHE_DAYS * 86400
    for path in root.rglob("*"):
        parts = path.relative_to(root).parts
        if path.suffix == ".lock" or any(part.startswith(".tmp-") for part in parts):
            continue
        with contextlib.suppress(OSError):  # gone already, or a directory
            if path.is_file() and path.stat().st_mtime < limit:
                path.unlink()

"""Files built once per pytest session and shared by its xdist workers.

Each xdist worker has its own ``tmp_path_factory`` base directory, one level
below the session's (``.../pytest-N/popen-gw0``), so a session-scoped fixture
would build its files once per worker. What is deterministic and only read by
the tests (the tiny synthetic snapshot, the Qwen2 tokenizer files) is built
here instead, in the session's directory, by whichever worker asks first; the
others wait on a lock and reuse it. A run without xdist builds in its own base
directory, as before.
"""

from __future__ import annotations

import fcntl
import os
import shutil
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


def kernel_cache_dir(factory: pytest.TempPathFactory) -> Path:
    """The session's gcc and program cache (``NANOCOMPILE_CACHE_DIR``) for the tests
    that compile graphs but do not test the cache: a graph compiled by one module
    or worker is a cache hit for the others (both caches are safe for concurrent
    processes: per-key locks, entries installed by ``os.replace``)."""
    path = session_root(factory) / "kernel-cache"
    path.mkdir(exist_ok=True)
    return path

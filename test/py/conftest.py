"""Shared pytest fixtures: the synthetic snapshots (spec §1.2).

``tiny_snapshot`` is generated once per session (well under a second, plus
~2 s for the tokenizer files), by the first xdist worker that needs it, and
shared with the other (``_session_files``). ``full_snapshot``'s weights (~1 GB, ~7 s) are
those of the embedded default model, generated once by
:func:`nanocompile.api.ensure_default_snapshot` into
``~/.cache/nanocompile/synthetic-qwen2.5-0.5b-seed0`` (``$NANOCOMPILE_HOME``
overrides the root) and shared with the command line and the benchmarks. Only
what the generator version pins (config, generation config, weights) is taken
from there; each session links those into a fresh directory and writes the
tokenizer files of this session's tiny snapshot, so a changed tokenizer builder
never meets a stale copy.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _session_files import SYNTH_SEED, copy_tokenizer_files, kernel_cache_dir, tiny_snapshot_dir

# the tests schedule by hand: a developer's `nanocompile tune` records never reach them
# (the tuner's own tests point NANOCOMPILE_TUNING at a file of their own)
os.environ["NANOCOMPILE_TUNING"] = "off"

# With PYTHONDONTWRITEBYTECODE set (as on some machines here) pytest rewrites the
# asserts of every test module again in each process, ~6 s of a 13 s collection:
# bytecode is written, under .pytest_cache rather than beside the sources
if sys.dont_write_bytecode:
    sys.dont_write_bytecode = False
    if sys.pycache_prefix is None:
        sys.pycache_prefix = str(Path(__file__).resolve().parents[2] / ".pytest_cache" / "pycache")
    # and so do the Python processes the tests start (the CLI, nc-opt, the children
    # of the pool and sanitizer tests), which would otherwise compile every module
    # whose bytecode beside the sources is missing or stale, at each start
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

CACHED_FILES = ("config.json", "generation_config.json", "model.safetensors")


@pytest.fixture(scope="session")
def tiny_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny synthetic snapshot (2 layers, hidden 64, real vocabulary), seed 0."""
    return tiny_snapshot_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def full_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The full-size synthetic Qwen2.5-0.5B snapshot, seed 0 (weights cached)."""
    from nanocompile.api import DEFAULT_SEED, ensure_default_snapshot

    assert DEFAULT_SEED == SYNTH_SEED
    weights = ensure_default_snapshot()
    out = tmp_path_factory.mktemp("full-snapshot")
    for name in CACHED_FILES:
        (out / name).symlink_to(weights / name)
    copy_tokenizer_files(tmp_path_factory, out)
    return out


@pytest.fixture(scope="session")
def shared_kernel_cache(pytestconfig: pytest.Config,
                        tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gcc and program cache of the tests that compile but do not test the cache
    (those keep caches of their own): in .pytest_cache, kept between runs; never the
    user's (``_session_files.kernel_cache_dir``)."""
    return kernel_cache_dir(pytestconfig, tmp_path_factory)

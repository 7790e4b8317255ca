"""Shared pytest fixtures: the synthetic snapshots (spec §1.2).

``tiny_snapshot`` is generated once per session (well under a second, plus
~2 s for the tokenizer files). ``full_snapshot``'s weights (~1 GB, ~7 s) are
cached across sessions under ``~/.cache/nanocompile/test-synth-<seed>-<version>``
(``$NANOCOMPILE_CACHE`` overrides the root). The cache holds only what the
generator version pins (config, generation config, weights); each session
links them into a fresh directory and writes the tokenizer files there, so a
changed tokenizer builder never leaves a stale cache behind.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from nanocompile.checkpoint.safetensors import SafetensorsError, SafetensorsFile
from nanocompile.checkpoint.synth import SYNTH_VERSION, write_synthetic_snapshot

SYNTH_SEED = 0
CACHED_FILES = ("config.json", "generation_config.json", "model.safetensors")


def tokenizer_builder_available() -> bool:
    """True once ``nanocompile.tokenizer.build`` exists (snapshots then get tokenizer files)."""
    return importlib.util.find_spec("nanocompile.tokenizer.build") is not None


def _write_tokenizer(out_dir: Path) -> None:
    if tokenizer_builder_available():
        from nanocompile.tokenizer.build import write_tokenizer_files

        write_tokenizer_files(out_dir)


def _cache_root() -> Path:
    root = os.environ.get("NANOCOMPILE_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "nanocompile"


def _is_complete(directory: Path) -> bool:
    if not all((directory / name).is_file() for name in CACHED_FILES):
        return False
    try:
        with SafetensorsFile.open(directory / "model.safetensors"):
            return True
    except SafetensorsError:
        return False


def cached_full_weights(seed: int = SYNTH_SEED) -> Path:
    """The full-size synthetic weights for ``seed``, generated once and cached.

    Generated into a temporary sibling and renamed into place, so the cache
    directory either is complete or does not exist.
    """
    cache = _cache_root() / f"test-synth-{seed}-{SYNTH_VERSION}"
    if _is_complete(cache):
        return cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{cache.name}.", dir=cache.parent))
    try:
        write_synthetic_snapshot(staging, seed=seed, tokenizer=False)
        if cache.exists():
            shutil.rmtree(cache)  # an incomplete leftover
        try:
            staging.rename(cache)
        except OSError:
            if not _is_complete(cache):  # not a concurrent session that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return cache


@pytest.fixture(scope="session")
def tiny_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny synthetic snapshot (2 layers, hidden 64, real vocabulary), seed 0."""
    out = tmp_path_factory.mktemp("tiny-snapshot")
    return write_synthetic_snapshot(
        out, tiny=True, seed=SYNTH_SEED, tokenizer=tokenizer_builder_available()
    )


@pytest.fixture(scope="session")
def full_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The full-size synthetic Qwen2.5-0.5B snapshot, seed 0 (weights cached)."""
    weights = cached_full_weights()
    out = tmp_path_factory.mktemp("full-snapshot")
    for name in CACHED_FILES:
        (out / name).symlink_to(weights / name)
    _write_tokenizer(out)
    return out

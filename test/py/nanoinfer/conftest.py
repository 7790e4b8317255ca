"""Fixtures of the nanoinfer differential tests (docs/nanoinfer.md).

``side`` is one snapshot seen by both worlds: a nanoinfer checkout's model
(``NanoinferOracle``) and nanocompile's interpreter and C engines (built on
first use through ``nanocompile.api.load``). It is parametrized over the
tiny and the full-size synthetic snapshot (full size marked slow); without a
checkout it skips with the one-line reason of ``_adapter.find_checkout``.

``standin`` is the same oracle over the test suite's stand-in package
(``standin/nanoinfer``), found through ``NANOINFER_PATH`` like a real
checkout; ``standin_env`` points ``NANOINFER_PATH`` at it for one test.
Both leave ``sys.path`` and ``sys.modules`` as they found them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _adapter import (
    STANDIN_ROOT,
    CheckoutMissing,
    NanoinferOracle,
    find_checkout,
)
from _differential import Side


@pytest.fixture(scope="session")
def nanoinfer_root() -> Path:
    """The nanoinfer checkout, or a skip saying how to point the tests at one."""
    try:
        return find_checkout()
    except CheckoutMissing as missing:
        pytest.skip(str(missing))


@pytest.fixture(scope="session")
def tiny_side(nanoinfer_root: Path, tiny_snapshot: Path) -> Side:
    return Side(tiny_snapshot, NanoinferOracle.open(tiny_snapshot), "tiny")


@pytest.fixture(scope="session")
def full_side(nanoinfer_root: Path, full_snapshot: Path) -> Side:
    return Side(full_snapshot, NanoinferOracle.open(full_snapshot), "full")


@pytest.fixture(params=["tiny", pytest.param("full", marks=pytest.mark.slow)])
def side(request: pytest.FixtureRequest) -> Side:
    """The tiny snapshot's side, or the full-size one's (slow)."""
    return request.getfixturevalue(f"{request.param}_side")


def _nanoinfer_modules() -> dict[str, Any]:
    return {name: module for name, module in sys.modules.items()
            if name == "nanoinfer" or name.startswith("nanoinfer.")}


@pytest.fixture(scope="module")
def standin_env() -> Iterator[pytest.MonkeyPatch]:
    """``NANOINFER_PATH`` at the stand-in for a module's tests; afterwards ``sys.path``
    and the imported ``nanoinfer`` modules are put back as they were."""
    saved_path, saved_modules = list(sys.path), _nanoinfer_modules()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NANOINFER_PATH", str(STANDIN_ROOT))
        yield mp
    sys.path[:] = saved_path
    for name in _nanoinfer_modules():
        del sys.modules[name]
    sys.modules.update(saved_modules)


@pytest.fixture(scope="module")
def standin(standin_env: pytest.MonkeyPatch, tiny_snapshot: Path) -> Side:
    """The tiny snapshot through the adapter, with the stand-in as "the checkout"."""
    return Side(tiny_snapshot, NanoinferOracle.open(tiny_snapshot), "tiny")

"""C sources the C target pastes into generated libraries, shipped as package data.

* ``pool.c``: the persistent thread pool every library with a parallel loop
  runs on (C11 + pthreads, self-contained). What it does and its API are
  described in ``nanocompile.backend.pool``, which drives a loaded library's
  pool over ctypes, and in docs/threads.md.

The files are read through ``importlib.resources``, so they are found in a
wheel or an installed tree as well as in the source tree
(``[tool.setuptools.package-data]`` in pyproject.toml ships them).
"""

from __future__ import annotations

from importlib.resources import files


def read_source(name: str) -> str:
    """The text of the C file ``name`` of this package."""
    return files(__name__).joinpath(name).read_text(encoding="utf-8")


POOL_C = read_source("pool.c")
"""The thread pool's C, exactly as the C target pastes it."""

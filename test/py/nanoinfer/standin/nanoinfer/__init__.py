"""A STAND-IN for nanoinfer, written in nanocompile's test suite. It is not nanoinfer.

It implements the interface facts of spec §7 (``model.Qwen2``,
``weights.ModelWeights``, ``tokenizer.Tokenizer``) over the project's
hand-written NumPy engine (``bench/numpy_engine.py``) and nanocompile's
tokenizer, so that the nanoinfer adapter (``test/py/nanoinfer/_adapter.py``)
and the bench's nanoinfer engines run end to end on every CI run, without
the real checkout. ``NANOINFER_PATH`` pointed at ``test/py/nanoinfer/standin``
finds it (it has ``nanoinfer/model.py``).

Its arithmetic is the NumPy engine's, whose float32 operation order differs
from the interpreter's: it agrees with nanocompile to rounding, never
bitwise, so the bitwise claims of the real differential tests do not hold
for it (docs/nanoinfer.md).
"""

from __future__ import annotations

import sys
from pathlib import Path


def _repository_on_path() -> None:
    """Make ``bench`` importable: the nearest parent directory holding ``bench/numpy_engine.py``."""
    for parent in Path(__file__).resolve().parents:
        if (parent / "bench" / "numpy_engine.py").is_file():
            if str(parent) not in sys.path:
                sys.path.append(str(parent))
            return
    raise ImportError("the nanoinfer stand-in needs nanocompile's bench/numpy_engine.py")


_repository_on_path()

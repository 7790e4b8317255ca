"""Prompts and comparisons shared by the model tests."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from nanocompile.tokenizer.chat import render_chat
from nanocompile.tokenizer.tokenizer import Tokenizer

PROMPTS = {
    "france": "The capital of France is",
    "fibonacci": "def fibonacci(n):",
    "chat": None,  # a ChatML user turn, rendered with the snapshot's template
}

# Longer prompts, kept apart so that the tests parametrized over PROMPTS stay three.
# "text-and-code": English prose, a Python snippet, punctuation and numbers; 277 tokens
# with the snapshot's tokenizer (test_accuracy.py checks it stays within 260..280).
LONG_PROMPTS = {
    "text-and-code": (
        "A compiler turns one program into a faster one. This one fuses a graph of "
        "primitive operations into kernels and prints C for gcc; a 0.5B model decodes "
        "a token in about 80 ms. Here is the matrix product at its heart, written plainly:\n"
        "\n"
        "```python\n"
        "def matmul(x: list[list[float]], w: list[list[float]]) -> list[list[float]]:\n"
        '    """x @ w.T, summing k in index order."""\n'
        "    out = [[0.0] * len(w) for _ in x]\n"
        "    for i, row in enumerate(x):\n"
        "        for j, col in enumerate(w):\n"
        "            acc = 0.0\n"
        "            for k in range(len(row)):\n"
        "                acc += row[k] * col[k]  # one rounding per add\n"
        "            out[i][j] = acc\n"
        "    return out\n"
        "```\n"
        "\n"
        "Why does the order matter? Because (a + b) + c != a + (b + c) in f32: "
        "with a = 1e8, b = -1e8 and c = 0.5, the left side gives 0.5, the right side 0.0. "
        "Summing one by one lets the error grow with k; a tree of partial sums keeps it "
        "small. Enough? Measure it -- against float64 -- and see!"
    ),
}


def prompt_ids(snapshot_dir: Path, key: str) -> list[int]:
    """The token ids of prompt ``key`` of PROMPTS or LONG_PROMPTS."""
    text = PROMPTS[key] if key in PROMPTS else LONG_PROMPTS[key]
    if text is None:
        text = render_chat([{"role": "user", "content": "Write a haiku about compilers."}],
                           add_generation_prompt=True, snapshot_dir=snapshot_dir)
    return _tokenizer(*_identity(Path(snapshot_dir))).encode(text)


def _identity(snapshot_dir: Path) -> tuple[Path, int, int, int]:
    """The directory and its ``tokenizer.json``'s inode, size and mtime: a tokenizer
    loaded for one is reused only while that file is unchanged."""
    stat = (snapshot_dir / "tokenizer.json").stat()
    return snapshot_dir.resolve(), stat.st_ino, stat.st_size, stat.st_mtime_ns


@functools.cache
def _tokenizer(snapshot_dir: Path, inode: int, size: int, mtime_ns: int) -> Tokenizer:
    """The snapshot's tokenizer, loaded once (``Tokenizer.from_dir``: ~0.25 s each)."""
    return Tokenizer.from_dir(snapshot_dir)


def max_rel_diff(ours: np.ndarray, ref: np.ndarray) -> float:
    """max |ours - ref| over the largest |ref| (at least 1)."""
    return float(np.abs(ours - ref).max() / max(1.0, float(np.abs(ref).max())))

"""Prompts and comparisons shared by the model tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nanocompile.tokenizer.chat import render_chat
from nanocompile.tokenizer.tokenizer import Tokenizer

PROMPTS = {
    "france": "The capital of France is",
    "fibonacci": "def fibonacci(n):",
    "chat": None,  # a ChatML user turn, rendered with the snapshot's template
}


def prompt_ids(snapshot_dir: Path, key: str) -> list[int]:
    tok = Tokenizer.from_dir(snapshot_dir)
    text = PROMPTS[key]
    if text is None:
        text = render_chat([{"role": "user", "content": "Write a haiku about compilers."}],
                           add_generation_prompt=True, snapshot_dir=snapshot_dir)
    return tok.encode(text)


def max_rel_diff(ours: np.ndarray, ref: np.ndarray) -> float:
    """max |ours - ref| over the largest |ref| (at least 1)."""
    return float(np.abs(ours - ref).max() / max(1.0, float(np.abs(ref).max())))

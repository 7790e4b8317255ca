"""The comparisons of nanocompile against a nanoinfer (or the stand-in), and their prompts.

Each check takes a :class:`Bound` so that one code path serves the real
differential tests (bitwise for the interpreter) and the stand-in tests
(within rounding: the stand-in is the NumPy engine, not nanoinfer).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from _adapter import NanoinferOracle
from _prompts import PROMPTS

from nanocompile.api import Model, load
from nanocompile.tokenizer.chat import render_chat

CHAT_TURN = "Write a haiku about compilers."  # the user turn of _prompts' "chat" prompt
N_GREEDY = 32
# Prose, code, numbers, CJK, emoji, whitespace runs and ChatML special tokens in one text.
LONG_MIXED = (
    "<|im_start|>system\nYou are a careful reviewer of compiler code.<|im_end|>\n"
    "<|im_start|>user\nThe capital of France is Paris; 東京は日本の首都です。 "
    "Ça coûte 3,14 € — or $2.72?\n"
    "```python\ndef fibonacci(n: int) -> int:\n    a, b = 0, 1\n    for _ in range(n):\n"
    "        a, b = b, a + b\n    return a\n```\n"
    "\tTabs,   runs of   spaces,\n\n\nand blank lines; numbers 1234567890 0x7fff 1e-3 "
    "-0.0; emoji 🚀🔥 and math ∑∫√ π≈3.14159.\n"
    "Explain why `x @ W.T` reads W row by row, and what RoPE does to q and k.<|im_end|>\n"
    "<|im_start|>assistant\n"
)
PROMPT_KEYS = (*PROMPTS, "long-mixed")


def prompt_text(snapshot_dir: Path, key: str) -> str:
    """The text of one prompt: ``_prompts.PROMPTS``' three, or the long mixed one."""
    if key == "long-mixed":
        return LONG_MIXED
    text = PROMPTS[key]
    if text is None:
        text = render_chat([{"role": "user", "content": CHAT_TURN}],
                           add_generation_prompt=True, snapshot_dir=snapshot_dir)
    return text


@dataclass(frozen=True)
class Bound:
    """How two float32 arrays must agree: ``bitwise``, or within ``abs`` / ``rel`` ``value``
    (``rel``: over the largest |reference|, at least 1)."""

    kind: str
    value: float = 0.0

    def check(self, ours: np.ndarray, ref: np.ndarray, what: str) -> None:
        """Assert the agreement, naming ``what`` and the worst element on failure."""
        assert self.kind in ("bitwise", "abs", "rel"), self.kind
        assert ours.shape == ref.shape, f"{what}: shapes {ours.shape} vs {ref.shape}"
        assert ours.dtype == ref.dtype == np.float32, f"{what}: {ours.dtype} vs {ref.dtype}"
        diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape)) \
            if diff.size else ()
        detail = f"max |diff| {diff.max() if diff.size else 0:.3g} at {worst}"
        if self.kind == "bitwise":
            same = np.ascontiguousarray(ours).view(np.uint32) == np.ascontiguousarray(
                ref).view(np.uint32)
            assert same.all(), f"{what}: {int((~same).sum())} of {same.size} not bitwise " \
                f"equal; {detail}"
            return
        scale = max(1.0, float(np.abs(ref).max())) if self.kind == "rel" else 1.0
        assert float(diff.max()) / scale <= self.value, \
            f"{what}: beyond {self.kind} {self.value}: {detail}"

    def __str__(self) -> str:
        return "bitwise" if self.kind == "bitwise" else f"{self.kind} {self.value:g}"


BITWISE = Bound("bitwise")


class Side:
    """One snapshot: nanoinfer's model and nanocompile's engines (all positions' logits)."""

    def __init__(self, snapshot_dir: Path, oracle: NanoinferOracle, size: str) -> None:
        self.dir = snapshot_dir
        self.oracle = oracle
        self.size = size

    @cached_property
    def interp(self) -> Model:
        """nanocompile's graph interpreter."""
        return load(self.dir, backend="interpreter", last_only=False)

    @cached_property
    def compiled(self) -> Model:
        """nanocompile's generated C (the default schedules)."""
        return load(self.dir, backend="c", last_only=False)


def check_tokenizer(oracle: NanoinferOracle, tokenizer: Any, snapshot_dir: Path) -> None:
    """nanoinfer's token ids equal nanocompile's on every prompt."""
    for key in PROMPT_KEYS:
        text = prompt_text(snapshot_dir, key)
        assert oracle.encode(text) == tokenizer.encode(text), key


def check_weights(oracle: NanoinferOracle, snapshot: Any) -> None:
    """Every tensor nanoinfer loads is the snapshot's, widened exactly (bitwise), in HF
    or transposed layout (nanoinfer's orientation is not in spec §7)."""
    theirs = oracle.weights()
    assert set(theirs) == set(snapshot.expected_tensors())
    for name, arr in theirs.items():
        ref = np.asarray(snapshot.f32(name))
        same = arr.shape == ref.shape and np.array_equal(arr.view(np.uint32),
                                                         ref.view(np.uint32))
        if not same and arr.T.shape == ref.shape:
            same = np.array_equal(np.ascontiguousarray(arr.T).view(np.uint32),
                                  np.ascontiguousarray(ref).view(np.uint32))
        assert same, f"{name}: nanoinfer {arr.shape} {arr.dtype} differs from the snapshot"


def check_logits(oracle: NanoinferOracle, engine: Any, ids: list[int], bound: Bound) -> None:
    """Uncached logits of every position agree within ``bound``."""
    bound.check(engine.forward(ids), oracle.logits(ids), f"logits of {len(ids)} tokens")


def check_cached_steps(oracle: NanoinferOracle, engine: Any, ids: list[int],
                       logits: Bound, cache: Bound) -> None:
    """A prefill of ``ids`` and three one-token steps through each engine's own cache:
    each step's logits within ``logits``, then the caches' contents within ``cache``."""
    steps = [ids, [11], [42], [7]]
    capacity = len(ids) + len(steps) + 2  # room left over: only the filled part is compared
    ours, theirs = engine.new_cache(capacity), oracle.new_cache(capacity)
    for i, step in enumerate(steps):
        logits.check(engine.forward(step, ours), oracle.logits(step, theirs),
                     f"logits of step {i}")
    n = len(ids) + len(steps) - 1
    assert ours.length == n
    layers, kv_heads, _, head_dim = ours.keys.shape
    keys, values = oracle.cache_arrays(theirs, n, kv_heads, head_dim)
    assert keys.shape[0] == layers, f"nanoinfer's cache has {keys.shape[0]} layers"
    cache.check(ours.keys[:, :, :n], keys, "cached keys")
    cache.check(ours.values[:, :, :n], values, "cached values")


def check_greedy(oracle: NanoinferOracle, engine: Any, ids: list[int],
                 n_tokens: int = N_GREEDY) -> None:
    """The same ``n_tokens`` greedy tokens, each engine with its own cache."""
    assert oracle.greedy(ids, n_tokens) == engine.greedy(ids, n_tokens)

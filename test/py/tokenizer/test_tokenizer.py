"""The Qwen2 tokenizer: built tokenizer.json, encode/decode, token bytes, streaming.

Checked against spec §1.3's reference encodings, against tiktoken running the
same ranks with no merge list, and (oracle) against transformers.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import numpy as np
import pytest
import tokenizers
from _tokenizer_fixture import (
    SPEC_ADDED_TOKENS,
    SPEC_FIRST_ADDED_ID,
    SPEC_NOT_SPECIAL,
    SPEC_PATTERN,
    corpus,
    qwen_tokenizer_dir,
    tiktoken_reference,
)
from tokenizers import decoders, models, pre_tokenizers

from nanocompile.tokenizer import StreamDecoder, Tokenizer, write_tokenizer_files
from nanocompile.tokenizer.build import (
    bpe_parts,
    parse_ranks,
    recover_merges,
)
from nanocompile.tokenizer.tokenizer import byte_to_unicode

CORPUS_SIZE = 3000


@pytest.fixture(scope="session")
def snapshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return qwen_tokenizer_dir(tmp_path_factory)


@pytest.fixture(scope="module")
def tok(snapshot_dir: Path) -> Tokenizer:
    return Tokenizer.from_dir(snapshot_dir)


@pytest.fixture(scope="module")
def reference():
    return tiktoken_reference()


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return corpus(CORPUS_SIZE, seed=20240601)


# --- spec §1.3 -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("The capital of France is", [785, 6722, 315, 9625, 374]),
        ("def fibonacci(n):", [750, 75698, 1445, 1648]),
        ("<|im_start|>", [151644]),
        ("<|im_start|>user\nhi<|im_end|>", [151644, 872, 198, 6023, 151645]),
    ],
)
def test_reference_encodings(tok: Tokenizer, text: str, ids: list[int]) -> None:
    assert tok.encode(text) == ids
    assert tok.decode(ids) == text


def test_digits_split_one_at_a_time(tok: Tokenizer) -> None:
    assert tok.encode("12345") == [16, 17, 18, 19, 20]
    assert [tok.decode([i]) for i in tok.encode(" 2024!")] == [" ", "2", "0", "2", "4", "!"]


def test_special_ids_and_vocab_size(tok: Tokenizer) -> None:
    assert tok.id_of("<|endoftext|>") == 151643
    assert tok.id_of("<|im_start|>") == 151644
    assert tok.id_of("<|im_end|>") == 151645
    assert tok.id_of("<|file_sep|>") == 151664
    assert tok.vocab_size == 151665
    assert list(tok.special_tokens) == [c for c in SPEC_ADDED_TOKENS if c not in SPEC_NOT_SPECIAL]
    assert tok.special_tokens["<|video_pad|>"] == 151656
    with pytest.raises(KeyError, match="not in the vocabulary"):
        tok.id_of("<|extra_0|>")


# --- the built files --------------------------------------------------------


def test_tokenizer_json_layout(snapshot_dir: Path) -> None:
    data = json.loads((snapshot_dir / "tokenizer.json").read_text(encoding="utf-8"))
    model = data["model"]
    assert model["type"] == "BPE"
    assert len(model["vocab"]) == 151_643
    assert len(model["merges"]) == 151_643 - 256  # one merge per multi-byte token
    assert model["ignore_merges"] is False
    assert model["byte_fallback"] is False
    assert model["unk_token"] is None
    assert data["normalizer"] == {"type": "NFC"}
    split, byte_level = data["pre_tokenizer"]["pretokenizers"]
    assert split["pattern"] == {"Regex": SPEC_PATTERN}
    assert split["behavior"] == "Isolated"
    assert byte_level["type"] == "ByteLevel"
    assert byte_level["use_regex"] is False
    added = [(t["id"], t["content"], t["special"]) for t in data["added_tokens"]]
    expected = [
        (SPEC_FIRST_ADDED_ID + i, c, c not in SPEC_NOT_SPECIAL)
        for i, c in enumerate(SPEC_ADDED_TOKENS)
    ]
    assert added == expected
    assert added[-1] == (151664, "<|file_sep|>", False)
    assert (151657, "<tool_call>", False) in added


def test_build_is_deterministic(snapshot_dir: Path, tmp_path: Path) -> None:
    write_tokenizer_files(tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / name).read_bytes() == (snapshot_dir / name).read_bytes(), name


def test_build_rejects_a_file_as_directory(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        write_tokenizer_files(target)


# --- merge recovery on a hand-checked toy vocabulary -------------------------


def _toy_ranks() -> dict[bytes, int]:
    singles = {bytes([b]): b for b in range(256)}
    # "ab" < "bc" < "abc": BPE on "abc" below rank 258 merges "ab" first, so
    # abc = ab + c (not a + bc). "cab" below 259: "ab" (256) beats nothing
    # else, giving c + ab.
    return singles | {b"ab": 256, b"bc": 257, b"abc": 258, b"cab": 259}


def test_recover_merges_toy() -> None:
    assert recover_merges(_toy_ranks()) == [
        (b"a", b"b"),
        (b"b", b"c"),
        (b"ab", b"c"),
        (b"c", b"ab"),
    ]


def test_bpe_parts_respects_max_rank() -> None:
    ranks = _toy_ranks()
    assert bpe_parts(b"abc", ranks, 256) == [b"a", b"b", b"c"]
    assert bpe_parts(b"abc", ranks, 257) == [b"ab", b"c"]
    assert bpe_parts(b"abc", ranks, 1000) == [b"abc"]


def test_recover_merges_rejects_unreachable_token() -> None:
    # "abc" cannot be reached: below its rank, "abc" stays three bytes.
    ranks = {bytes([b]): b for b in range(256)} | {b"abc": 256}
    with pytest.raises(ValueError, match="unreachable by BPE"):
        recover_merges(ranks)


def test_recover_merges_needs_all_bytes() -> None:
    with pytest.raises(ValueError, match="all 256 single bytes"):
        recover_merges({b"a": 0, b"b": 1, b"ab": 2})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"YQ== 0\nYg== 2\n", "not exactly 0..n-1"),
        (b"YQ== 0\nYQ== 1\n", "duplicate token"),
        (b"YQ== zero\n", "expected 'base64 rank'"),
        (b"Y!== 0\n", "bad base64"),
    ],
)
def test_parse_ranks_errors(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_ranks(data)


# --- agreement with tiktoken -------------------------------------------------


def test_agrees_with_tiktoken_on_generated_corpus(tok: Tokenizer, reference, texts) -> None:
    """Token-for-token agreement with tiktoken on 3,000 seeded strings.

    tokenizer.json has an NFC normalizer (as the real Qwen2 one) and tiktoken
    has none, so the corpus strings are generated already NFC-normalised
    (`corpus` applies Python's NFC); on such strings the normalizer is the
    identity and both sides see the same text. (Normalising only for
    tiktoken would not do: added tokens are split out of the raw text before
    NFC, so `<|im_start|>` followed by U+0338 stays `<|im_start|>` here while
    NFC turns the `>` into `≯` for tiktoken.)
    """
    disagreements = [
        s for s in texts if tok.encode(s) != reference.encode(s, allowed_special="all")
    ]
    assert disagreements == []


def test_agrees_with_tiktoken_on_source_text(tok: Tokenizer, reference) -> None:
    """Long realistic text: this repository's own Python sources."""
    sources = sorted(Path(__file__).resolve().parents[3].glob("src/nanocompile/**/*.py"))
    assert sources
    for path in sources:
        text = path.read_text(encoding="utf-8")
        assert tok.encode(text) == reference.encode(text, allowed_special="all"), path


def test_allow_special_false_is_ordinary_text(tok: Tokenizer, reference, texts) -> None:
    """Without allow_special, only non-special added tokens (`<tool_call>`) match."""
    ordinary_added = set(SPEC_NOT_SPECIAL)
    for text in texts[:1000]:
        expected = reference.encode(text, allowed_special=ordinary_added, disallowed_special=())
        assert tok.encode(text, allow_special=False) == expected
    assert tok.encode("<|im_start|>", allow_special=False) == reference.encode_ordinary(
        "<|im_start|>"
    )


def test_decode_round_trips(tok: Tokenizer, texts) -> None:
    for text in texts:
        assert tok.decode(tok.encode(text)) == text


def test_token_bytes_match_tiktoken_for_every_id(tok: Tokenizer, reference) -> None:
    for token_id in range(tok.vocab_size):
        assert tok.token_bytes(token_id) == reference.decode_single_token_bytes(token_id)


def _random_ids(rng: random.Random, vocab_size: int) -> list[int]:
    # Bias toward single-byte tokens (ranks 0..255 are single bytes here), so
    # broken and split UTF-8 sequences are common.
    return [
        rng.randrange(256) if rng.random() < 0.5 else rng.randrange(vocab_size)
        for _ in range(rng.randint(1, 20))
    ]


def test_decode_of_arbitrary_ids_matches_tiktoken(tok: Tokenizer, reference) -> None:
    """Invalid UTF-8 becomes U+FFFD exactly as Python's 'replace' decoding does."""
    rng = random.Random(7)
    for _ in range(2000):
        ids = _random_ids(rng, tok.vocab_size)
        assert tok.decode(ids) == reference.decode(ids, errors="replace"), ids


@pytest.mark.parametrize("bad", [-1, 151665, 10**12])
def test_decode_rejects_out_of_range_ids(tok: Tokenizer, bad: int) -> None:
    with pytest.raises(ValueError, match=f"token id {bad} out of range"):
        tok.decode([1, bad])
    with pytest.raises(ValueError, match="out of range"):
        tok.token_bytes(bad)


def test_numpy_ids_are_accepted(tok: Tokenizer) -> None:
    ids = np.array([785, 6722, 315, 9625, 374], dtype=np.int64)
    assert tok.decode(ids) == "The capital of France is"
    assert tok.token_bytes(ids[1]) == b" capital"
    assert tok.stream_decoder().push_many(ids) == "The capital of France is"


def test_decode_rejects_non_int_ids(tok: Tokenizer) -> None:
    with pytest.raises(TypeError, match="must be int"):
        tok.decode([1.0])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="got bool"):
        tok.decode([True])
    with pytest.raises(TypeError, match="expects str"):
        tok.encode(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "where"),
    [("\udcff", "U+DCFF at index 0"),  # os.fsdecode(b"\xff"): argv, stdin under a C locale
     ("ok \udce9t\udce9", "U+DCE9 at index 3"),
     ("\ud83d", "U+D83D at index 0")],  # half of a surrogate pair, from the API
)
def test_encode_rejects_lone_surrogates(tok: Tokenizer, text: str, where: str) -> None:
    """Issue 14, point 4: once ``TypeError: TextInputSequence must be str`` from
    the tokenizers library; now a ValueError saying what and where."""
    with pytest.raises(ValueError, match=re.escape(
            f"expected valid Unicode text, got a lone surrogate {where}")):
        tok.encode(text)
    with pytest.raises(ValueError, match="lone surrogate"):
        tok.encode(text, allow_special=False)


def test_replace_undecodable() -> None:
    from nanocompile.tokenizer.tokenizer import replace_undecodable

    assert replace_undecodable("plain") == ("plain", 0)
    assert replace_undecodable(os.fsdecode(b"caf\xc3\xa9 \xff\xfe!")) == (
        "café \ufffd\ufffd!", 2)
    assert replace_undecodable("\ud83d\ude00") == ("\ufffd\ufffd", 2)


def test_from_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="snapshot directory not found"):
        Tokenizer.from_dir(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match=r"no tokenizer\.json"):
        Tokenizer.from_dir(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError, match="cannot load"):
        Tokenizer.from_dir(tmp_path)


# --- streaming --------------------------------------------------------------


def _stream(tok: Tokenizer, ids: list[int]) -> list[str]:
    stream = tok.stream_decoder()
    return [stream.push(i) for i in ids] + [stream.flush()]


def test_stream_decoder_reproduces_decode(tok: Tokenizer, texts) -> None:
    for text in texts:
        ids = tok.encode(text)
        assert "".join(_stream(tok, ids)) == tok.decode(ids)


def test_stream_decoder_on_arbitrary_ids(tok: Tokenizer) -> None:
    rng = random.Random(11)
    for _ in range(2000):
        ids = _random_ids(rng, tok.vocab_size)
        assert "".join(_stream(tok, ids)) == tok.decode(ids), ids


@pytest.mark.parametrize(
    ("text", "spread"),
    [("🫠 melting", "🫠"), ("龘 and 𠀀", "龘"), ("x𠀀y", "𠀀"), ("math 𝔘!", "𝔘")],
)
def test_stream_decoder_emits_whole_characters(tok: Tokenizer, text: str, spread: str) -> None:
    """`spread` takes several tokens; it is printed once, whole, when its last one arrives."""
    assert len(tok.encode(spread)) > 1
    pieces = _stream(tok, tok.encode(text))
    assert "".join(pieces) == text
    assert all("\ufffd" not in piece for piece in pieces)
    at = pieces.index(spread)
    assert pieces[at - len(tok.encode(spread)) + 1 : at] == [""] * (len(tok.encode(spread)) - 1)


def test_stream_decoder_flushes_an_unfinished_character(tok: Tokenizer) -> None:
    stream = tok.stream_decoder()
    first = tok.encode("🫠")[0]  # F0 9F: a strict prefix of the emoji's four bytes
    assert stream.push(first) == ""
    assert stream.flush() == "\ufffd" == tok.decode([first])
    assert stream.push_many(tok.encode("ok")) == "ok"  # reusable after flush


# --- any snapshot, not just Qwen -------------------------------------------


def _write_toy_snapshot(directory: Path) -> None:
    a_tilde = "".join(byte_to_unicode()[b] for b in "Ã".encode())  # two byte-level chars
    vocab = {"a": 0, "b": 1, "Ġ": 2, "ab": 3, a_tilde: 4}
    backend = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(["<eos>"])
    directory.mkdir()
    backend.save(str(directory / "tokenizer.json"))


def test_any_byte_level_snapshot(tmp_path: Path) -> None:
    _write_toy_snapshot(tmp_path / "toy")
    toy = Tokenizer.from_dir(tmp_path / "toy")
    assert toy.vocab_size == 6
    assert toy.id_of("<eos>") == 5
    assert toy.encode("ab ab<eos>") == [3, 2, 3, 5]
    assert toy.token_bytes(2) == b" "
    assert toy.token_bytes(4) == b"\xc3\x83"  # "Ã" in UTF-8: one character, two bytes
    assert "".join(_stream(toy, [4, 3, 5])) == toy.decode([4, 3, 5]) == "Ãab<eos>"


def test_token_bytes_needs_byte_level_decoder() -> None:
    backend = tokenizers.Tokenizer(models.WordLevel(vocab={"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    plain = Tokenizer(backend)
    assert plain.decode([0]) == "a"
    with pytest.raises(ValueError, match="needs a ByteLevel decoder"):
        plain.token_bytes(0)
    with pytest.raises(ValueError, match="needs a ByteLevel decoder"):
        StreamDecoder(plain)


# --- oracle: transformers reads the same directory --------------------------


ORACLE_TEXTS = (
    "The capital of France is",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "<|im_start|>user\nHéllo, 世界! 👋🏽<|im_end|>\n<|im_start|>assistant\n",
    '<tool_call>{"name": "f"}</tool_call> <|fim_prefix|>x<|fim_suffix|>',
    "<|im_start|>\u0338 e\u0301 \r\n\t\t 12345 'S 'll",
)


@pytest.mark.oracle
def test_transformers_agrees(snapshot_dir: Path, tok: Tokenizer) -> None:
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(snapshot_dir)
    assert len(hf) == tok.vocab_size
    assert hf.eos_token_id == tok.id_of("<|im_end|>")
    assert hf.pad_token_id == tok.id_of("<|endoftext|>")
    assert hf.bos_token is None
    for text in ORACLE_TEXTS:
        ids = tok.encode(text)
        assert hf.encode(text, add_special_tokens=False) == ids, text
        assert hf.decode(ids) == tok.decode(ids)
        ordinary = hf.encode(text, add_special_tokens=False, split_special_tokens=True)
        assert ordinary == tok.encode(text, allow_special=False), text

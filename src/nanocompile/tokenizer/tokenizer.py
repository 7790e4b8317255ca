"""Text to token ids and back, for any snapshot's `tokenizer.json`.

The work is done by the maintained `tokenizers` library; this module adds the
few things an inference engine needs on top of it: special-token lookup by
name, the raw bytes of a token, and a streaming decoder that holds back
incomplete UTF-8 so a character split across tokens prints once, whole.

Nothing here knows Qwen's vocabulary: every id comes from the snapshot.

    tok = Tokenizer.from_dir(snapshot)
    ids = tok.encode("The capital of France is")
    stream = tok.stream_decoder()
    text = "".join(stream.push(i) for i in ids) + stream.flush()
"""

from __future__ import annotations

import codecs
import functools
import operator
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import tokenizers
from tokenizers import decoders

TOKENIZER_FILE = "tokenizer.json"
_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_undecodable(text: str) -> tuple[str, int]:
    """``text`` with each lone surrogate replaced by U+FFFD, and how many there were.

    Python decodes bytes that are not UTF-8 (in ``sys.argv``, the environment,
    and stdin under a C locale) with ``surrogateescape``: each undecodable byte
    becomes one lone surrogate (U+DC80..U+DCFF). Such a str is not valid
    Unicode and ``Tokenizer.encode`` rejects it; this is what the command line
    does instead, one U+FFFD per byte (half of a surrogate pair counts as one).
    """
    return _SURROGATE.subn("\ufffd", text)


@functools.cache
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet: each byte as one printable character.

    Printable Latin-1 bytes stand for themselves; the other 68 bytes (controls,
    space, DEL, NBSP, soft hyphen) map to U+0100 onward in byte order. This is
    the table `tokenizers`' ByteLevel pre-tokenizer and decoder use.
    """
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    table = {b: chr(b) for b in printable}
    shifted = (b for b in range(256) if b not in table)
    for offset, b in enumerate(shifted):
        table[b] = chr(256 + offset)
    return dict(sorted(table.items()))


@functools.cache
def unicode_to_byte() -> dict[str, int]:
    """The inverse of `byte_to_unicode`."""
    return {c: b for b, c in byte_to_unicode().items()}


class Tokenizer:
    """A snapshot's tokenizer: encode, decode, token bytes, special ids.

    Wraps a `tokenizers.Tokenizer`. Ids run from 0 to `vocab_size - 1`
    (model vocabulary plus added tokens such as `<|im_end|>`).
    """

    def __init__(self, backend: tokenizers.Tokenizer, source: str = "<memory>") -> None:
        self._backend = backend
        self._source = source
        self.vocab_size: int = backend.get_vocab_size(with_added_tokens=True)
        self._byte_level = isinstance(backend.decoder, decoders.ByteLevel)

    @property
    def is_byte_level(self) -> bool:
        """Whether the decoder is ByteLevel, so tokens have raw bytes (`token_bytes`)."""
        return self._byte_level

    @classmethod
    def from_dir(cls, path: str | os.PathLike[str]) -> Tokenizer:
        """Load `<path>/tokenizer.json` (a snapshot directory in the HF layout)."""
        directory = Path(path)
        if not directory.is_dir():
            raise FileNotFoundError(f"snapshot directory not found: {directory}")
        file = directory / TOKENIZER_FILE
        if not file.is_file():
            raise FileNotFoundError(f"no {TOKENIZER_FILE} in snapshot directory {directory}")
        try:
            backend = tokenizers.Tokenizer.from_file(str(file))
        except Exception as err:  # tokenizers raises a bare Exception on bad JSON
            raise ValueError(f"cannot load {file}: {err}") from err
        return cls(backend, source=str(file))

    def __repr__(self) -> str:
        return f"Tokenizer({self._source!r}, vocab_size={self.vocab_size})"

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The underlying `tokenizers.Tokenizer`."""
        return self._backend

    @functools.cached_property
    def _ordinary_backend(self) -> tokenizers.Tokenizer:
        """A copy that treats special tokens' text as ordinary text."""
        clone = tokenizers.Tokenizer.from_str(self._backend.to_str())
        clone.encode_special_tokens = True
        return clone

    def encode(self, text: str, *, allow_special: bool = True) -> list[int]:
        """Token ids of `text`; nothing (no BOS) is added around it.

        With `allow_special` (the default), a special token's text such as
        `<|im_start|>` becomes that one token. Without it, special tokens' text
        is tokenized like any other text (as `tokenizers`' `encode_special_tokens`
        and transformers' `split_special_tokens=True` do), so user input cannot
        smuggle in control tokens. Added tokens that are not special (Qwen's
        `<tool_call>`) are ordinary words of the vocabulary and match either way.

        `text` must be valid Unicode: a lone surrogate (what Python makes of a
        byte that is not UTF-8) is a ValueError; see `replace_undecodable`.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode expects str, got {type(text).__name__}")
        bad = _SURROGATE.search(text)
        if bad is not None:  # the tokenizers library would fail with a TypeError
            raise ValueError(
                f"expected valid Unicode text, got a lone surrogate U+{ord(bad.group()):04X} at "
                f"index {bad.start()} (an undecodable byte? replace_undecodable() makes each "
                "one U+FFFD)")
        backend = self._backend if allow_special else self._ordinary_backend
        return backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids`, special tokens included; invalid UTF-8 becomes U+FFFD."""
        checked = [self._check_id(i) for i in ids]
        return self._backend.decode(checked, skip_special_tokens=False)

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes token `token_id` contributes to decoded text.

        Mirrors the ByteLevel decoder: a token written entirely in the byte
        alphabet stands for those bytes; any other token (an added token with
        characters outside the alphabet) stands for its UTF-8 text.
        """
        if not self.is_byte_level:
            raise ValueError(
                f"token_bytes needs a ByteLevel decoder; {self._source} has "
                f"{type(self._backend.decoder).__name__}"
            )
        text = self._backend.id_to_token(self._check_id(token_id))
        assert text is not None  # _check_id rejects an id without a token
        table = unicode_to_byte()
        if all(c in table for c in text):
            return bytes(table[c] for c in text)
        return text.encode("utf-8")

    def id_of(self, token: str) -> int:
        """The id of the token spelled `token` (for example `"<|im_end|>"`)."""
        token_id = self._backend.token_to_id(token)
        if token_id is None:
            raise KeyError(f"token {token!r} is not in the vocabulary of {self._source}")
        return token_id

    @functools.cached_property
    def special_tokens(self) -> dict[str, int]:
        """Added tokens marked special, name to id, in id order."""
        added = self._backend.get_added_tokens_decoder()
        return {t.content: i for i, t in sorted(added.items()) if t.special}

    def stream_decoder(self) -> StreamDecoder:
        """A fresh incremental decoder over this tokenizer."""
        return StreamDecoder(self)

    def _check_id(self, token_id: int) -> int:
        """`token_id` as a Python int (NumPy integers accepted), or a clear error."""
        if isinstance(token_id, bool):
            raise TypeError("token id must be int, got bool")
        try:
            token_id = operator.index(token_id)
        except TypeError:
            raise TypeError(f"token id must be int, got {type(token_id).__name__}") from None
        if not 0 <= token_id < self.vocab_size:
            raise ValueError(f"token id {token_id} out of range [0, {self.vocab_size})")
        if self._backend.id_to_token(token_id) is None:
            raise ValueError(f"token id {token_id} has no token in {self._source}")
        return token_id


class StreamDecoder:
    """Turns token ids, one at a time, into printable text pieces.

    Bytes of a character that is not yet complete are held back until the
    tokens that finish it arrive, so the pieces concatenated (with `flush()`
    at the end) equal `Tokenizer.decode` of all the ids, character for
    character, including U+FFFD for bytes that can never form valid UTF-8.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        if not tokenizer.is_byte_level:
            tokenizer.token_bytes(0)  # raises the clear ByteLevel error
        self._tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        """Add one token; return the text that is now complete (possibly "")."""
        return self._utf8.decode(self._tokenizer.token_bytes(token_id))

    def push_many(self, ids: Sequence[int]) -> str:
        """Add several tokens at once; same text as pushing them one by one."""
        return "".join(self.push(i) for i in ids)

    def flush(self) -> str:
        """End of stream: held-back bytes of an unfinished character become U+FFFD."""
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text

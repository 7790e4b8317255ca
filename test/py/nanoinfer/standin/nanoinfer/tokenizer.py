"""``Tokenizer.from_model_dir(dir)``: nanocompile's tokenizer under spec §7's name."""

from __future__ import annotations

import os
from collections.abc import Iterable

from nanocompile.tokenizer.tokenizer import Tokenizer as _NanocompileTokenizer


class Tokenizer:
    """Byte-level BPE from the snapshot's ``tokenizer.json``."""

    def __init__(self, inner: _NanocompileTokenizer) -> None:
        self.inner = inner

    @classmethod
    def from_model_dir(cls, model_dir: str | os.PathLike[str]) -> Tokenizer:
        """Read ``tokenizer.json`` from ``model_dir``."""
        return cls(_NanocompileTokenizer.from_dir(model_dir))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens' text becomes the special token; no BOS)."""
        return self.inner.encode(text)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of ``ids``."""
        return self.inner.decode(ids)

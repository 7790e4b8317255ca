"""``nc-opt``: run nanocompile pass pipelines over ``.mlir`` text.

A subclass of xDSL's ``xDSLOptMain`` that registers nanocompile's dialects,
passes and targets. Two things are added to the stock driver:

* every parsed op remembers where it was written, so a verifier error is
  reported as ``file:line:col`` with the offending line underlined;
* bad input (a parse error, an invalid op, an unknown pass, a malformed pass
  pipeline, a missing file) ends in one diagnostic on stderr and exit code 1,
  never a traceback.

Only the targets that can print this project's IR are offered: xDSL's
``mlir`` and nanocompile's own (``c``); xDSL's llvm, mps, wgsl and ``*-asm``
targets expect other dialects.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import (
    ArgSpecParseError,
    DiagnosticException,
    ParseError,
    VerifyException,
)
from xdsl.utils.lexer import Span
from xdsl.xdsl_opt_main import xDSLOptMain

from nanocompile.dialects import get_all_dialects
from nanocompile.ir import xdsl_fixes
from nanocompile.ir.checks import DominanceError, check_dominance
from nanocompile.passes import get_all_passes

xdsl_fixes.apply()


class LocatingParser(Parser):
    """A parser that remembers the source span of every operation it parses."""

    def __init__(self, ctx: Context, input: str | bytes, name: str = "<unknown>") -> None:
        super().__init__(ctx, input, name)
        self.spans: dict[int, Span] = {}

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        op = super().parse_operation()
        self.spans[id(op)] = start
        loc = start.get_location()
        op.location = FileLineColLoc(StringAttr(loc.file), IntAttr(loc.line), IntAttr(loc.col))
        return op


def verify_located(module: ModuleOp, spans: dict[int, Span], line_offset: int = 0) -> None:
    """Verify op by op; re-raise the first failure located at its op's source."""
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as e:
            culprit = getattr(e, "op", op)
            span = spans.get(id(culprit))
            if span is None:
                raise
            span = dataclasses.replace(span, line_offset=line_offset)
            raise VerifyException(span.print_with_context(f"error: {e}").rstrip()) from None
    try:
        check_dominance(module)
    except DominanceError as e:
        span = spans.get(id(e.op))
        if span is None:
            raise VerifyException(str(e)) from None
        span = dataclasses.replace(span, line_offset=line_offset)
        raise VerifyException(span.print_with_context(f"error: {e}").rstrip()) from None


class NcOptMain(xDSLOptMain):
    """nanocompile's ``mlir-opt``."""

    version_format = "nc-opt (nanocompile) on xdsl {xdsl_version}"

    def register_all_dialects(self) -> None:
        for name, factory in get_all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        from nanocompile.targets import get_all_targets

        self.available_targets = {"mlir": self.available_targets["mlir"], **get_all_targets()}

    def parse_chunk(
        self, chunk: IO[bytes], file_extension: str, start_offset: int = 0
    ) -> ModuleOp | None:
        if self.args.frontend not in (None, "mlir") or file_extension not in ("mlir", ""):
            return super().parse_chunk(chunk, file_extension, start_offset)
        parser = LocatingParser(self.ctx, chunk.read(), self.get_input_name())
        module = parser.parse_module(not self.args.no_implicit_module)
        if not self.args.disable_verify:
            verify_located(module, parser.spans, start_offset)
        return module


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``nc-opt`` console script."""
    try:
        NcOptMain(description="nanocompile optimizer driver", args=argv).run()
    except ArgSpecParseError as e:  # a BaseException in xDSL: a bad -p or -t spec
        sys.exit(f"nc-opt: error: {e}".rstrip())
    except ParseError as e:
        sys.exit(f"nc-opt: parse error: {e}".rstrip())
    except DiagnosticException as e:
        sys.exit(f"nc-opt: {e}".rstrip())
    except (ValueError, KeyError, OSError) as e:
        sys.exit(f"nc-opt: error: {e}")
    except RecursionError:
        sys.exit("nc-opt: error: input nested too deeply")
    except Exception as e:  # a bug in nanocompile, not in the input
        if os.environ.get("NANOCOMPILE_TRACEBACK"):
            raise
        sys.exit(f"nc-opt: internal error: {type(e).__name__}: {e} "
                 "(set NANOCOMPILE_TRACEBACK=1 for the traceback)")


if __name__ == "__main__":
    main()

"""The knobs of a projection's default schedule: the space the tuner searches.

A projection (``schedule/defaults.py``: rows x columns, each result a lanes
loop ``k`` over contiguous rows of ``x`` and ``W``) gets its candidate
schedules from a few numbers and switches, ``ProjectionKnobs``:

* ``rows`` x ``columns``: the register tile (``rows`` rows of ``x`` jammed
  with ``columns`` output columns; a kernel of two sums per column, gate/up,
  counts its columns as pairs). The hand-written values are
  ``MATMUL_TILES`` / ``WIDE_TILES`` (per arch, measured on one machine);
* ``decode``: the output columns the leftover rows (decode: the one row)
  jam, for the schedules that jam more columns there than the tile has
  (kernel A's four-vector sums, ``DECODE_COLUMNS``; a bf16 or f32 weight's
  strided tiles, ``STRIDED_DECODE_COLUMNS``), counted in sums (halved for
  gate/up);
* ``strided``: decode reads ``decode`` columns ``n / decode`` apart
  (``_decode_strided``: each a stream that the next tile continues), else
  adjacent columns; on by hand for every format (8 streams: 16 measured best
  for bf16 on the Xeon, 8 no worse there; a Zen 4 streams int8 rows at the
  probe's bandwidth with 2 to 4 such streams, at a third of it with 16 or
  with adjacent rows, and bf16 and f32 rows faster with 8 than 16);
* ``row_block``: long rows go in blocks of rows that stay in L2
  (``ROW_BLOCK_BYTES``; never searched: ``knob_space``);
* ``slp``: an epilogue calling ``exp`` (gate/up's SiLU) runs 4 outputs to a
  vector (``sched.slp``);
* ``prefetch``: elements ahead along ``k`` at which the loads of the weight
  are preceded by a software prefetch of its row (``sched.prefetch``, into
  L2), 0 for none (by hand: the Zen 4 measured no gain in session 24; on
  the Xeon a C probe of the bf16 decode tile read 14.4 GB/s without and
  16.3-16.8 with, 512-2,048 ahead, any hint, session 31). Only the loads
  of the leftover rows (the peeled tail of the rows split, where decode's
  one row runs and streams the weight) where a candidate splits the rows;
  the prefill register tile reuses its weight tile from cache, and
  prefetches there only cost issue slots (bf16 prefill at 128 tokens ran
  0.94x the hand schedule's speed with them in the tile too). Written in
  ``text`` only when on, so points recorded before it read back the same.
  Every weight format has it: kernel B's weight loads index ``k`` as ``4 *
  k`` (groups of 4 int8), and its ``ahead`` counts int8 along that index.

``default_schedules(kernel, arch)`` uses ``hand_knobs`` (the hand-written
point, byte for byte the schedules before knobs existed);
``default_schedules(kernel, arch, knobs=...)`` any other point. Every point
is a schedule, and a schedule never changes a result bit, so the tuner's
choice is a matter of speed only. ``knob_space`` lists the values worth
trying for one kernel (a switch that changes nothing there is left out).

A kernel is named for the tuner by ``kernel_key``: a hash of its IR with its
symbol name blanked (the 24 layers' q projections are one kernel) and the
arch it is scheduled for.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass

from nanocompile.dialects import loop


@dataclass(frozen=True)
class ProjectionKnobs:
    """One point of a projection's schedule space (module docstring)."""

    rows: int
    columns: int
    decode: int = 16
    strided: bool = True
    row_block: bool = True
    slp: bool = True
    prefetch: int = 0

    def __post_init__(self) -> None:
        for name in ("rows", "columns", "decode"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 64:
                raise ValueError(f"knob {name}: expected an integer in 1..64, got {value!r}")
        if (not isinstance(self.prefetch, int) or isinstance(self.prefetch, bool)
                or not 0 <= self.prefetch <= MAX_PREFETCH):
            raise ValueError(f"knob prefetch: expected an integer in 0..{MAX_PREFETCH}, "
                             f"got {self.prefetch!r}")
        for name in ("strided", "row_block", "slp"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"knob {name}: expected true or false, "
                                 f"got {getattr(self, name)!r}")

    def text(self) -> str:
        """``rows=6 columns=4 decode=16 strided=1 row_block=1 slp=1``: what
        ``parse`` reads back (``prefetch=N`` after it when on)."""
        return " ".join(f"{f.name}={int(getattr(self, f.name))}"
                        for f in dataclasses.fields(self)
                        if f.name != "prefetch" or self.prefetch)

    @staticmethod
    def parse(text: str) -> ProjectionKnobs:
        """The knobs ``text`` writes (ValueError, one line, for anything else)."""
        names = {f.name: f.type for f in dataclasses.fields(ProjectionKnobs)}
        values: dict[str, int | bool] = {}
        for item in text.split():
            name, sep, value = item.partition("=")
            if not sep or name not in names or not value.isdigit():
                raise ValueError(f"knobs: expected name=integer with a name among "
                                 f"{', '.join(names)}, got {item!r}")
            values[name] = bool(int(value)) if names[name] == "bool" else int(value)
        missing = [n for n in ("rows", "columns") if n not in values]
        if missing:
            raise ValueError(f"knobs: {', '.join(missing)} missing in {text!r}")
        return ProjectionKnobs(**values)  # type: ignore[arg-type]  # checked in __post_init__

    def replace(self, **changes: int | bool) -> ProjectionKnobs:
        """These knobs with ``changes``."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


MAX_PREFETCH = 1 << 16
"""The farthest a ``prefetch`` knob may look ahead, in elements."""

KNOB_VALUES: dict[str, tuple[int | bool, ...]] = {
    "rows": (1, 2, 3, 4, 5, 6, 8),
    "columns": (1, 2, 3, 4, 6, 8),
    "decode": (2, 4, 8, 16, 32),
    "strided": (False, True),
    "row_block": (False, True),
    "slp": (False, True),
    "prefetch": (0, 512, 2048),
}
"""The values each knob may take in a search (``knob_space`` keeps those that
matter for one kernel)."""


def kernel_key(kernel: loop.KernelOp, arch: str) -> str:
    """sha256 of ``kernel``'s IR with its name blanked and its symbol list cut to
    the symbols it uses (a program's kernels all list every symbol of the
    program: the same projection in a program with a KV-cache state lists
    ``capacity`` too), and of ``arch``."""
    clone = kernel.clone()
    clone.sym_name = type(kernel.sym_name)("kernel")
    used = {op.symbol.data for op in kernel.walk() if isinstance(op, loop.SymOp)}
    for fp in kernel.footprints.data:
        for expr in (*fp.dims, *fp.stride_exprs):
            used |= expr.symbols
    listed = ", ".join(f'"{s}"' for s in kernel.symbols if s in used)
    head, newline, body = str(clone).partition("\n")
    head = re.sub(r"syms \[[^\]]*\]", f"syms [{listed}]", head, count=1)
    return hashlib.sha256(f"{arch}\n{head}{newline}{body}".encode()).hexdigest()

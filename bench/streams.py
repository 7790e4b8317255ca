"""``python -m bench streams``: how a decode step's weight rows stream from memory.

Runs bench/streams.c (built with gcc into ``bench/.cache/``): a dot product of
x with every row of an int8 weight (rows of 896 bytes, kernel A's format; the
buffer a multiple of the last-level cache) read by tiles of R rows, the
tile's rows adjacent (the hand decode tiles of f32 weights and kernel A) or
``n / R`` apart (R streams: the ``strided`` knob), and a plain read of the
same bytes; the rows in 2 MiB pages (``--pages huge``, the default: as the
model maps its weights and the tuner times them) or 4 KiB ones (``small``;
on the Zen 4 of session 29: the plain read 21.9 GB/s against 33.6, strided
x4 21.0 against 25.0, x8 19.9 against 23.1). The variants alternate within
each pass; the fastest pass of each is printed in GB/s and appended to
bench/results.jsonl (kind "streams"). One thread: it explains the tuner's
choice of the ``strided`` and ``decode`` knobs on a machine, it does not time
the model.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

from bench import BenchError, command, results
from bench.probe import BENCH_DIR, build_tool

SOURCE = BENCH_DIR / "streams.c"
CFLAGS = ("-O3", "-march=native", "-ffp-contract=off")
ROW_BYTES = 896
DEFAULT_MIB = 208  # gate and up of the 24 layers in int8: 233,472 rows


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mib", type=int, default=DEFAULT_MIB,
                        help=f"MiB of int8 rows (default {DEFAULT_MIB}: gate and up of "
                             "24 layers; keep it several times the last-level cache)")
    parser.add_argument("--passes", type=int, default=7,
                        help="passes over every variant (default 7; the fastest counts)")
    parser.add_argument("--pages", choices=["huge", "small"], default="huge",
                        help="the rows in 2 MiB pages (default, as the model's weights) or "
                             "in 4 KiB ones")
    parser.add_argument("--results", type=Path, default=results.RESULTS_PATH,
                        help="JSON-lines file the record is appended to")
    parser.add_argument("--no-record", action="store_true", help="print only, append nothing")


def measure_streams(mib: int, passes: int, pages: str = "huge") -> list[dict[str, Any]]:
    """The variants' fastest passes (``streams.c``'s JSON lines, parsed), the rows
    in 2 MiB pages (``pages="huge"``) or 4 KiB ones (``"small"``)."""
    if mib < 1 or passes < 1:
        raise BenchError("--mib and --passes: at least 1")
    rows = (mib << 20) // ROW_BYTES // 16 * 16
    binary = build_tool(SOURCE, CFLAGS)
    proc = subprocess.run([str(binary), str(rows), str(passes), pages], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise BenchError(f"{SOURCE.name} failed: {proc.stderr.strip()}")
    try:
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise BenchError(f"{SOURCE.name} printed something unusable: {exc}") from None


@command("streams", help="how weight rows stream: adjacent vs strided decode tiles",
         arguments=_arguments)
def streams_command(args: argparse.Namespace) -> int:
    found = measure_streams(args.mib, args.passes, args.pages)
    read = next(v["gbs"] for v in found if v["pattern"] == "read")
    print(f"int8 rows of {ROW_BYTES} bytes, {args.mib} MiB in "
          f"{'2 MiB' if args.pages == 'huge' else '4 KiB'} pages, 1 thread, fastest of "
          f"{args.passes} passes")
    for v in found:
        label = "plain read" if v["pattern"] == "read" else f"{v['pattern']} x{v['rows']}"
        print(f"  {label:14s} {v['ms']:8.2f} ms  {v['gbs']:6.2f} GB/s  "
              f"({v['gbs'] / read:4.0%} of the plain read)")
    if not args.no_record:
        record = results.make_record("streams", {"mib": args.mib, "passes": args.passes,
                                                 "pages": args.pages, "row_bytes": ROW_BYTES,
                                                 "variants": found},
                                     threads=1)
        results.append_record(record, args.results)
        print(f"appended a streams record to {args.results}")
    return 0

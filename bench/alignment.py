"""``python -m bench alignment``: what a bf16 weight file whose data lies off a
32-byte boundary costs, and what its realigned copy gives back.

A safetensors writer pads the header to a multiple of 8 bytes only, so in
three real snapshots of four the bf16 data starts 8, 16 or 24 bytes past a
32-byte boundary, and half of the kernels' 32-byte loads of a weight row then
straddle two cache lines. ``nanocompile.load`` maps such a file through a
realigned copy (``checkpoint/aligned.py``); ``NANOCOMPILE_REALIGN=off`` maps it
as it lies. This writes a copy of the snapshot whose data starts ``--offset``
bytes past a 64-byte boundary (the header padded with spaces; the tensors'
bytes unchanged) and loads three models in one process: the snapshot as it is,
the shifted one through its realigned copy, the shifted one as it lies. Each
round runs a ``--prompt``-token prefill and ``--decode`` decode steps of each
model (a fresh prompt per round and model; the order reversed every round).
Reported per thread count: medians and minima of prefill ms/token and decode
ms/step, and sign tests of "realigned faster than as it lies" and "as it lies
slower than the original". Appended to bench/results.jsonl (kind "alignment").
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import BenchError, command

MODELS = ("original", "realigned", "as-it-lies")
WEIGHTS_NAME = "model.safetensors"


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, default=None,
                        help="snapshot directory (default: the full-size synthetic one)")
    parser.add_argument("--offset", type=int, default=8,
                        help="where the shifted copy's data starts past a 64-byte boundary: "
                             "8, 16, 24, 40, 48 or 56 (default 8)")
    parser.add_argument("--threads", default="1", help="comma-separated thread counts (default 1)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds (default 8)")
    parser.add_argument("--prompt", type=int, default=128, help="prefill tokens (default 128)")
    parser.add_argument("--decode", type=int, default=16, help="decode steps (default 16)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results file to append to (default bench/results.jsonl)")
    parser.add_argument("--no-append", action="store_true", help="do not append the result")


def shifted_copy(source: Path, out: Path, offset: int) -> Path:
    """``out``: snapshot ``source`` with its weight file's data starting ``offset``
    bytes past a 64-byte boundary (the header padded; tensors' bytes unchanged);
    the other files linked."""
    out.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.name != WEIGHTS_NAME and not (out / f.name).exists():
            (out / f.name).symlink_to(f.resolve())
    with open(source / WEIGHTS_NAME, "rb") as src, \
            open(out / WEIGHTS_NAME, "wb") as dst:
        n = struct.unpack("<Q", src.read(8))[0]
        header = src.read(n).rstrip(b" ")
        header += b" " * ((offset - 8 - len(header)) % 64)
        dst.write(struct.pack("<Q", len(header)) + header)
        while chunk := src.read(1 << 24):
            dst.write(chunk)
    return out


def _load(path: Path, realign: bool) -> Any:
    import nanocompile
    from nanocompile.api import REALIGN_ENV

    saved = os.environ.get(REALIGN_ENV)
    os.environ[REALIGN_ENV] = "on" if realign else "off"
    try:
        return nanocompile.load(path)
    finally:
        if saved is None:
            os.environ.pop(REALIGN_ENV, None)
        else:
            os.environ[REALIGN_ENV] = saved


def _rounds(models: dict[str, Any], ids: list[int], rounds: int, decode: int
            ) -> dict[str, dict[str, list[float]]]:
    names = list(models)
    out: dict[str, dict[str, list[float]]] = {n: {"prefill": [], "decode": []} for n in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            shift = 1 + r * len(names) + names.index(name)  # a fresh prompt: no prefix reuse
            prompt = [(i + 7919 * shift) % 151_643 for i in ids]
            g = models[name].generate_ids(prompt, max_tokens=decode + 1, stop_ids=())
            out[name]["prefill"].append(1e3 * g.prefill_seconds / len(ids))
            out[name]["decode"].append(1e3 * g.decode_seconds / max(1, g.decode_steps))
    return out


@command("alignment", help="a bf16 weight file off 32-byte boundaries: as it lies against "
                           "its realigned copy and an aligned original",
         arguments=_arguments)
def main(args: argparse.Namespace) -> int:
    from bench import results, stats
    from bench.engines import full_synthetic_snapshot, prompt_ids
    from bench.probe import parse_threads
    from nanocompile.checkpoint import Snapshot
    from nanocompile.checkpoint.aligned import LOAD_BYTES, misaligned_tensors

    if args.offset % 8 or not 0 < args.offset < 64 or args.offset % LOAD_BYTES == 0:
        raise BenchError(f"--offset must be a multiple of 8 in 8..56 that is not a multiple "
                         f"of {LOAD_BYTES}, got {args.offset}")
    if args.rounds < 2 or args.prompt < 1 or args.decode < 1:
        raise BenchError("--rounds must be at least 2, --prompt and --decode at least 1")
    threads = parse_threads(args.threads)
    source: Path = (args.model if args.model is not None
                    else full_synthetic_snapshot(lambda m: print(m, file=sys.stderr)))
    config = Snapshot.open(source).config
    result: dict[str, Any] = {"tuning": os.environ.get("NANOCOMPILE_TUNING", "default"),
                              "offset": args.offset, "rounds": args.rounds,
                              "prompt": args.prompt, "decode": args.decode, "by_threads": {}}
    with tempfile.TemporaryDirectory(prefix="nc-alignment-") as tmp:
        print(f"writing a copy of {source} with its data {args.offset} bytes past a line ...",
              file=sys.stderr)
        shifted = shifted_copy(source, Path(tmp) / "shifted", args.offset)
        print("loading (the realigned copy is written once into the cache) ...",
              file=sys.stderr)
        models = {"original": _load(source, True), "realigned": _load(shifted, True),
                  "as-it-lies": _load(shifted, False)}
        result["misaligned_tensors"] = {n: len(misaligned_tensors(m.snapshot))
                                        for n, m in models.items()}
        if result["misaligned_tensors"]["as-it-lies"] == 0:
            raise BenchError("the shifted copy has no misaligned bf16 tensor: does the "
                             "snapshot store bf16?")
        ids = prompt_ids(config, args.prompt)
        for t in threads:
            pool = {n: m.engine.backend.program.set_threads(t)  # its env is read once
                    for n, m in models.items()}
            for m in models.values():
                m.generate_ids(ids[:16], max_tokens=2, stop_ids=())  # warm up
            print(f"{t} thread(s): {args.rounds} rounds ...", file=sys.stderr)
            times = _rounds(models, ids, args.rounds, args.decode)
            per: dict[str, Any] = {"pool_threads": pool, "ms": times}
            for metric in ("prefill", "decode"):
                per[metric] = {n: stats.summarize(times[n][metric]) for n in MODELS}
                per[metric]["realigned_faster_than_as_it_lies"] = stats.sign_test(
                    times["realigned"][metric], times["as-it-lies"][metric]).as_dict()
                per[metric]["original_faster_than_as_it_lies"] = stats.sign_test(
                    times["original"][metric], times["as-it-lies"][metric]).as_dict()
                med = {n: per[metric][n]["median"] for n in MODELS}
                win = per[metric]["realigned_faster_than_as_it_lies"]
                print(f"{t} thread(s) {metric}: original {med['original']:.2f}, realigned "
                      f"{med['realigned']:.2f}, as it lies {med['as-it-lies']:.2f} ms "
                      f"(as it lies / realigned {med['as-it-lies'] / med['realigned']:.3f}; "
                      f"realigned faster in {win['wins']}/{win['n']}, "
                      f"p = {win['p_value']:.3g})")
            result["by_threads"][str(t)] = per
    if not args.no_append:
        record = results.make_record("alignment", result, threads=threads)
        path = args.out if args.out is not None else results.RESULTS_PATH
        results.append_record(record, path)
        print(f"appended to {path}", file=sys.stderr)
    return 0

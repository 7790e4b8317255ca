"""The ``nanocompile`` command line: one subcommand per job.

Every error a user can cause ends in one line on stderr and a non-zero exit,
never a traceback (set ``NANOCOMPILE_TRACEBACK=1`` to see one anyway).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path


class UserError(Exception):
    """A problem with the user's input, reported as one line."""


def _cmd_synth(args: argparse.Namespace) -> int:
    from nanocompile.checkpoint.synth import write_synthetic_snapshot

    def progress(stage: str, done: int, total: int) -> None:
        if sys.stderr.isatty():
            print(f"\r{stage}: {done}/{total}", end="", file=sys.stderr, flush=True)
            if done >= total:
                print(file=sys.stderr)

    out = write_synthetic_snapshot(Path(args.dir), tiny=args.tiny, seed=args.seed,
                                   progress=progress)
    size = "tiny 2-layer" if args.tiny else "full-size Qwen2.5-0.5B-shaped"
    print(f"wrote a {size} synthetic snapshot (seed {args.seed}) to {out}")
    print("note: synthetic weights: the model's text is meaningless by design")
    return 0


Command = Callable[[argparse.Namespace], int]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nanocompile",
        description="A small tensor compiler for Qwen2 on xDSL.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    synth = sub.add_parser("synth", help="write a deterministic synthetic Qwen2 snapshot",
                           description="Write a deterministic synthetic Qwen2.5-0.5B-shaped "
                           "snapshot (bf16 safetensors, config, tokenizer) to DIR.")
    synth.add_argument("dir", metavar="DIR", help="output directory")
    synth.add_argument("--tiny", action="store_true", help="the tiny 2-layer test config")
    synth.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    synth.set_defaults(func=_cmd_synth)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``nanocompile`` console script."""
    args = _parser().parse_args(argv)
    func: Command = args.func
    try:
        sys.exit(func(args))
    except KeyboardInterrupt:
        sys.exit("nanocompile: interrupted")
    except (UserError, ValueError, OSError) as e:
        if os.environ.get("NANOCOMPILE_TRACEBACK"):
            raise
        sys.exit(f"nanocompile: error: {e}")


if __name__ == "__main__":
    main()

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


def _load_config(model: str | None):  # type: ignore[no-untyped-def]
    from nanocompile.checkpoint.config import Qwen2Config

    if model is None:
        from nanocompile.checkpoint.synth import synthetic_config

        return Qwen2Config.from_dict(synthetic_config(), source="<Qwen2.5-0.5B config>")
    path = Path(model)
    if not path.is_dir():
        raise UserError(f"{path}: model directory does not exist")
    return Qwen2Config.from_file(path / "config.json")


def _cmd_dump(args: argparse.Namespace) -> int:
    from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

    cfg = _load_config(args.model)
    if args.layers is not None and not 0 < args.layers <= cfg.num_hidden_layers:
        raise UserError(f"--layers must be in [1, {cfg.num_hidden_layers}], got {args.layers}")
    module = build_qwen2(cfg, Qwen2GraphOptions(n_layers=args.layers, last_only=args.last_only))
    print(module)
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

    dump = sub.add_parser("dump", help="print the IR of the Qwen2 graph at a stage",
                          description="Print the Qwen2 program as .mlir after a stage.")
    dump.add_argument("--model", metavar="DIR",
                      help="snapshot directory (default: the Qwen2.5-0.5B architecture)")
    dump.add_argument("--stage", choices=["graph"], default="graph",
                      help="which IR to print (default: graph)")
    dump.add_argument("--layers", type=int, default=None, metavar="N",
                      help="build only the first N layers (default: all)")
    dump.add_argument("--last-only", action="store_true",
                      help="logits for the last position only")
    dump.set_defaults(func=_cmd_dump)
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

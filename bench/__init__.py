"""nanocompile's benchmark harness: ``python -m bench <command> ...``.

Commands live in their own modules and register themselves with
:func:`command`; :func:`main` imports every module named in
:data:`COMMAND_MODULES` and dispatches to the chosen subcommand. To add one::

    # bench/decode.py
    from bench import command

    def _arguments(parser):
        parser.add_argument("--rounds", type=int, default=12)

    @command("decode", help="decode ms/token per engine", arguments=_arguments)
    def decode(args) -> int:
        ...
        return 0

and append ``"bench.decode"`` to ``COMMAND_MODULES``. Command modules must
import without optional dependencies (import llama_cpp, torch, ... inside the
command) so a missing peer never breaks ``python -m bench``. Raise
:class:`BenchError` for user-facing failures: ``main`` prints it as one line
and exits 1.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

COMMAND_MODULES: tuple[str, ...] = ("bench.probe", "bench.run", "bench.plot", "bench.matmul",
                                    "bench.profile_step", "bench.memory", "bench.quality",
                                    "bench.context", "bench.streams", "bench.growth",
                                    "bench.alignment")


class BenchError(Exception):
    """A failure to report to the user as one line, without a traceback."""


@dataclass(frozen=True)
class Command:
    """One ``python -m bench`` subcommand."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], int]
    arguments: Callable[[argparse.ArgumentParser], None] | None = None


COMMANDS: dict[str, Command] = {}


def command(
    name: str,
    *,
    help: str,
    arguments: Callable[[argparse.ArgumentParser], None] | None = None,
) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register the decorated ``run(args) -> exit code`` as subcommand ``name``."""

    def register(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        existing = COMMANDS.get(name)
        if existing is not None and existing.run.__qualname__ != run.__qualname__:
            raise ValueError(f"bench command {name!r} registered twice")
        COMMANDS[name] = Command(name, help, run, arguments)
        return run

    return register


def load_commands() -> dict[str, Command]:
    """Import every module in COMMAND_MODULES (registering its commands)."""
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    return COMMANDS


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m bench`` parser with one subparser per registered command."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, cmd in sorted(load_commands().items()):
        p = sub.add_parser(name, help=cmd.help, description=cmd.help)
        if cmd.arguments is not None:
            cmd.arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command].run(args)
    except BenchError as exc:
        print(f"bench {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"bench {args.command}: interrupted", file=sys.stderr)
        return 130

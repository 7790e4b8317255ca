"""The one way nanocompile reads JSON: snapshot files and the safetensors header.

A snapshot's JSON (``config.json``, ``tokenizer_config.json``,
``generation_config.json``, ``model.safetensors.index.json``) comes from
whoever made the snapshot, so reading it must not hang, exhaust memory or
escape as anything but one error:

- only a regular file is read (a FIFO would block forever, a device never
  end); it is opened non-blocking and checked with ``fstat`` on the open
  descriptor, so what is checked is what is read;
- at most ``MAX_JSON_BYTES`` (the largest safetensors header allowed);
- strict UTF-8, then the standard library's parser;
- nesting deeper than the parser's recursion allows is an error, not a
  ``RecursionError``.

Every failure is a ``JSONFileError`` (a ``ValueError``) whose message says
what is wrong without the path; callers wrap it in their own error type with
the file's name (``ConfigError``, ``SnapshotError``, ...).

    data = read_json(directory / "config.json")
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from typing import Any

MAX_JSON_BYTES = 100 * 1024 * 1024

PairsHook = Callable[[list[tuple[str, Any]]], Any]


class JSONFileError(ValueError):
    """A JSON file or text that cannot be read: the message says why."""


def parse_json(data: bytes | str, *, object_pairs_hook: PairsHook | None = None) -> Any:
    """``data`` (UTF-8 bytes or text) parsed as JSON.

    ``object_pairs_hook`` is passed to ``json.loads``; a ``ValueError`` it
    raises (a duplicate key, say) becomes a ``JSONFileError`` too.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise JSONFileError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise JSONFileError("not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise JSONFileError(f"not valid JSON: {exc}") from None


def read_json(path: str | os.PathLike[str], *, max_bytes: int = MAX_JSON_BYTES,
              object_pairs_hook: PairsHook | None = None) -> Any:
    """The JSON value in the regular file ``path`` (symlinks followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise JSONFileError("no such file") from None
    except OSError as exc:
        raise JSONFileError(f"cannot open ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise JSONFileError(f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > max_bytes:
            raise JSONFileError(f"{info.st_size} bytes is larger than the {max_bytes}-byte "
                                "limit for a JSON file")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise JSONFileError(f"cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew since fstat
        raise JSONFileError(f"larger than the {max_bytes}-byte limit for a JSON file")
    return parse_json(data, object_pairs_hook=object_pairs_hook)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return f"mode {stat.filemode(mode)}"


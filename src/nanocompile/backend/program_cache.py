"""The program cache: a warm start without lowering, scheduling or C emission.

A compile's result besides the shared library is plain data: the C source and
what the runtime reads from the Loop IR (``runtime.ProgramSpec``). This cache
stores both in one JSON file per key, next to the libraries of the gcc cache
(``gcc.default_cache_dir()``)::

    <cache>/<key[:2]>/<key>.program.json

The key (``program_key``) hashes everything the result depends on: the graph
as printed, the compile options (with the weight format's pass), the arch the
schedules are chosen for, the CPU (``gcc.cpu_identity``) and the compiler
itself (every source file of the ``nanocompile`` package, its C runtime
included: ``compiler_source_hash``). gcc's own key is computed
from the stored source when the library is looked up, as on a cold start.

The file holds ``{"key", "sha256", "payload"}``: an entry verifies only if it
parses, names its own key and its payload hashes to ``sha256``. Anything else
(missing, truncated, bit-flipped, another key's file, a payload of the wrong
shape) is a miss: the bad file is deleted and the caller runs the full
pipeline and stores a new entry. Entries are written into a temporary
directory of the key's directory (``.tmp-program-<pid>-*``, swept by
``gcc.remove_stale_builds`` like gcc's) and installed by ``os.replace``, so a
reader sees a whole file or none; two writers of one key write the same bytes.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from nanocompile.backend.gcc import (
    TMP_PREFIX,
    cpu_identity,
    default_cache_dir,
    mark_used,
    remove_stale_builds,
)
from nanocompile.backend.runtime import ProgramSpec, TempBuffer
from nanocompile.checkpoint.jsonfile import parse_json
from nanocompile.dialects.graph.signature import Signature
from nanocompile.ir.shapes import TensorSpec
from nanocompile.ir.symbolic import Expr, parse_expr

PROGRAM_KEY_VERSION = 3  # bump when the entry's layout or the key's contents change
SUFFIX = ".program.json"


class EntryError(ValueError):
    """A cache entry that does not hold a well-formed program."""


PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # the nanocompile package


def source_files(root: Path = PACKAGE_ROOT) -> list[Path]:
    """Every file of the package at ``root`` (default: this one) but Python's
    bytecode, sorted: the ``.py`` files and the data the compiler pastes into its
    output (the thread pool's C, ``targets/c_runtime/pool.c``)."""
    return sorted(p for p in root.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def source_hash(root: Path) -> str:
    """sha256 over the relative path and bytes of every ``source_files(root)``."""
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@functools.cache
def compiler_source_hash() -> str:
    """``source_hash`` of this package, once per process: any change to the
    compiler, its C runtime included, changes every key."""
    return source_hash(PACKAGE_ROOT)


@functools.cache
def ir_library_version() -> str:
    """The installed xDSL's version: the compiler's passes, printer and parser are
    its code too (pinned in pyproject, but an environment may hold another)."""
    return importlib.metadata.version("xdsl")


def program_key(graph_text: str, *, fuse: bool, schedule: bool, arch: str,
                quantize: str = "", tuned: str = "") -> str:
    """sha256 over the graph's text, the options (``quantize``: the weight-format
    pass the graph passes start with, as its pipeline text, e.g.
    ``quantize-int8{kernel=a embedding=int8}``; "" for none), the arch (the
    resolved one, as text: ``repr`` of ``targets.arch.Arch``), the CPU and the
    compiler (its source files and the xDSL it runs on); ``tuned``: the tuner's
    winners the schedules used (their text, ``CompileOptions.tuned``), "" for
    none."""
    parts = [PROGRAM_KEY_VERSION, hashlib.sha256(graph_text.encode()).hexdigest(),
             fuse, schedule, arch, quantize, cpu_identity(), compiler_source_hash(),
             ir_library_version()]
    if tuned:  # without winners the key stays what it was
        parts.append(tuned)
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def entry_path(key: str, cache_dir: Path | None = None) -> Path:
    """Where the entry of ``key`` lives."""
    root = default_cache_dir() if cache_dir is None else Path(cache_dir)
    return root / key[:2] / f"{key}{SUFFIX}"


class Entry(NamedTuple):
    """A program cache entry: the runtime's spec, the C, and how many kernels the
    tuner's winners scheduled (``compile_program``'s report on a hit)."""

    spec: ProgramSpec
    source: str
    tuned_kernels: int = 0


def load_entry(key: str, cache_dir: Path | None = None) -> Entry | None:
    """The entry stored under ``key``, or None (missing or bad: a bad entry is
    deleted)."""
    path = entry_path(key, cache_dir)
    try:
        data = path.read_bytes()
    except OSError:  # missing, or a directory where the file should be
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        return None
    try:
        document = parse_json(data)  # a nesting bomb is a ValueError too
        if not isinstance(document, dict) or document.get("key") != key:
            raise EntryError("not this key's entry")
        payload = document["payload"]
        if document.get("sha256") != _digest(payload):
            raise EntryError("the payload does not match its hash")
        tuned = payload.get("tuned_kernels", 0)
        if not isinstance(tuned, int) or isinstance(tuned, bool) or tuned < 0:
            raise EntryError("tuned_kernels is not a count")
        entry = Entry(_spec(payload), _str(payload["source"]), tuned)
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        path.unlink(missing_ok=True)
        return None
    mark_used(path)
    return entry


def store_entry(key: str, spec: ProgramSpec, source: str, cache_dir: Path | None = None,
                tuned_kernels: int = 0) -> Path:
    """Write the entry of ``key`` atomically; its path."""
    path = entry_path(key, cache_dir)
    _make_directory(path.parent)
    remove_stale_builds(path.parent.parent)
    payload = _payload(spec, source)
    if tuned_kernels:
        payload["tuned_kernels"] = tuned_kernels
    document = {"key": key, "sha256": _digest(payload), "payload": payload}
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}program-{os.getpid()}-", dir=path.parent))
    try:
        staged = tmp / path.name
        staged.write_text(json.dumps(document))
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        os.replace(staged, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def _make_directory(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file where the directory goes
        path.unlink(missing_ok=True)
        path.mkdir(parents=True, exist_ok=True)


def _digest(payload: object) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------
# ProgramSpec <-> JSON


def _payload(spec: ProgramSpec, source: str) -> dict[str, Any]:
    def specs(named: tuple[tuple[str, TensorSpec], ...]) -> list[Any]:
        return [[n, s.dtype, [str(d) for d in s.shape]] for n, s in named]

    sig = spec.signature
    return {
        "name": sig.name,
        "inputs": specs(sig.inputs),
        "weights": specs(sig.weights),
        "outputs": specs(sig.outputs),
        "scalars": list(sig.scalars),
        "symbols": list(spec.symbols),
        "temps": [[str(t.size), t.first, t.last] for t in spec.temps],
        "io": [list(slot) for slot in spec.io],
        "requirements": [[str(e), m] for e, m in spec.requirements],
        "checks": [list(c) for c in spec.checks],
        "launches": list(spec.launches),
        "source": source,
    }


def _spec(p: dict[str, Any]) -> ProgramSpec:
    def specs(items: list[Any]) -> tuple[tuple[str, TensorSpec], ...]:
        return tuple((_str(n), TensorSpec(_str(dt), tuple(_expr(d) for d in _list(dims))))
                     for n, dt, dims in _list(items))

    signature = Signature(_str(p["name"]), specs(p["inputs"]), specs(p["weights"]),
                          specs(p["outputs"]), tuple(_str(s) for s in _list(p["scalars"])))
    return ProgramSpec(
        signature=signature,
        symbols=tuple(_str(s) for s in _list(p["symbols"])),
        temps=tuple(TempBuffer(_expr(size), _int(first), _int(last))
                    for size, first, last in _list(p["temps"])),
        io=tuple((_str(kind), _str(name), None if tile is None else _int(tile))
                 for kind, name, tile in _list(p["io"])),
        requirements=tuple((_expr(e), _str(m)) for e, m in _list(p["requirements"])),
        checks=tuple((_str(k), _int(code), _str(m)) for k, code, m in _list(p["checks"])),
        launches=tuple(_str(k) for k in _list(p["launches"])),
    )


def _expr(text: object) -> Expr:
    """An ``Expr`` from the text ``str`` printed; it must print back the same."""
    expr = parse_expr(_str(text))
    if str(expr) != text:
        raise EntryError(f"expression {text!r} does not round-trip")
    return expr


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise EntryError(f"expected a string, got {value!r}")
    return value


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise EntryError(f"expected an int, got {value!r}")
    return value


def _list(value: object) -> list[Any]:
    if not isinstance(value, list):
        raise EntryError(f"expected a list, got {value!r}")
    return value

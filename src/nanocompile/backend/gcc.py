"""The gcc driver and the compile cache: C source in, a verified shared library out.

`compile_library(source)` builds one shared library with the flags of spec §3
and caches it under a key that hashes everything the bytes depend on: the
source, the flags, the compiler (``gcc --version`` and ``gcc -dumpmachine``)
and the CPU (``-march=native``: model name and feature flags). The cache lives
in ``$NANOCOMPILE_CACHE_DIR`` or ``~/.cache/nanocompile/kernels``::

    <cache>/<key[:2]>/<key>.so       the library
    <cache>/<key[:2]>/<key>.c        its source (for debugging; gcc saw this name)
    <cache>/<key[:2]>/<key>.sha256   sha256 of the .so bytes
    <cache>/<key[:2]>/<key>.lock     serialises builders of one key
    <cache>/<key[:2]>/.tmp-<name>-<pid>-*  a build in progress (see remove_stale_builds)
    <cache>/failed/<name>-<key[:16]>.c  the source of a failed compile
    <cache>/pch/<key>/nc_pch.h(.gch)  the system headers, precompiled (below)
    <cache>/<key[:2]>/<key>.program.json  a program cache entry (``program_cache``:
                                     another key, the same directory conventions)

gcc compiles the source with one line appended (`key_stamp`): the key as an
exported string ``nanocompile_cache_key``. An entry verifies only if its
``.so`` hashes to its ``.sha256`` *and* holds its own key, so an entry whose
two files were swapped for another entry's pair is rebuilt, never loaded;
after ``dlopen`` the loader reads the symbol back and checks it once more.
A directory standing where an entry's file (or a file where the key's
directory) should be does not verify and is removed before the rebuild.
Build directories of builders that died (SIGKILL) are removed by the next
process that builds into the cache.

gcc runs in a temporary directory inside the cache (same file system), and the
results are installed by ``os.replace`` in the order .c, .sha256, .so, so a
reader that sees a ``.so`` sees a complete file and its hash. Builders of one
key take an exclusive ``flock``: a second process compiling the same source
waits and then finds a cache hit. Every lookup, and every `CompiledLibrary.load`,
hashes the ``.so`` and compares it with the stored hash; a truncated or corrupt
library, or one without its hash, is deleted and rebuilt, never loaded.

The generated C starts with its system headers (a comment, the feature macro
and ``#include <...>`` lines: `system_prefix`), and ``<immintrin.h>`` follows
a little later; parsing that alone takes gcc ~0.2 s of a typical kernel
library's 0.3-0.6 s. So those lines and ``<immintrin.h>`` are compiled once
into a precompiled header (``nc_pch.h.gch``, keyed like a library by its text,
the flags, the compiler and the CPU), and gcc reads a copy of the source
whose prefix is replaced by ``#include "<cache>/pch/<key>/nc_pch.h"`` (and as
many empty lines, so gcc's line numbers are the source's). The headers are
processed with the same macros defined, and ``<immintrin.h>``'s later
``#include`` (include-guarded) adds nothing, so the library is the same bytes
(a test compares); a header that gcc cannot precompile, or a compile that
fails with it, falls back to the source as it is.

Sanitizer mode (``sanitize=True`` or ``NANOCOMPILE_SANITIZE=1``) adds
AddressSanitizer and UndefinedBehaviorSanitizer and has its own cache keys.
Python itself is not built with ASan, so the ASan runtime must be the first
library of the process; this recipe works with Debian 12's gcc 12::

    LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 \\
        PYTHONMALLOC=malloc python script.py

``detect_leaks=0`` because CPython does not free everything at exit;
``PYTHONMALLOC=malloc`` so that small Python-allocated buffers come from
malloc, where ASan puts redzones, not from pymalloc's arenas. libubsan needs no
preload: the library links it. ASan sees overruns of whole allocations only: a
write past one buffer of an arena into its neighbour, or past a ctypes buffer of
16 bytes or less (kept inside the Python object), goes unseen, so sanitized runs
should give every buffer its own allocation. `sanitizer_env()` returns these variables;
`CompiledLibrary.load` refuses (with `SanitizerError`) to load a sanitized
library into a process without the ASan runtime, which would otherwise kill it.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

GCC = "gcc"
FLAGS = (
    "-O3",
    "-march=native",
    "-ffp-contract=off",
    "-fwrapv",
    "-fno-math-errno",
    "-fPIC",
    "-shared",
    "-std=c11",
)
LIBS = ("-lm", "-pthread")
SANITIZE_FLAGS = (
    "-fsanitize=address,undefined",
    "-fno-omit-frame-pointer",
    "-fno-sanitize-recover=undefined",
)
PCH_DIR = "pch"  # <cache>/pch/<key>/: a precompiled header of the generated C's system headers
PCH_HEADER = "nc_pch.h"
PCH_HOISTED = "#if defined(__SSE4_1__)\n#include <immintrin.h>\n#endif\n"
_PREFIX_LINE = re.compile(r"(/\*[^*]*\*/|#define _POSIX_C_SOURCE \d+L|#include <[\w./]+>|)")
_QUOTABLE = re.compile(r'[^"\\\n]+')  # a path an #include "..." can name as it is
_PCH_FAILED: set[str] = set()  # headers gcc could not precompile, by key
KEY_VERSION = 1  # bump when the cache layout or the key's contents change
KEY_SYMBOL = "nanocompile_cache_key"  # every cached library exports its own key
TMP_PREFIX = ".tmp-"  # build directories: .tmp-<name>-<pid>-<random> in a key's directory
STALE_SECONDS = 6 * 3600.0  # a build directory older than this has no live owner
_SWEPT: set[Path] = set()  # cache roots already swept for stale build directories
CONTEXT_LINES = 2  # source lines shown either side of a line gcc reports
MAX_REPORTED_ERRORS = 5

_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_DIAGNOSTIC = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: ")


class CompileError(Exception):
    """gcc rejected the source: the message holds its first error and the source around it.

    ``stderr`` is gcc's full output, ``source_path`` the saved C source and
    ``context`` the source lines around every reported error.
    """

    def __init__(self, message: str, *, stderr: str, source_path: Path | None, context: str):
        super().__init__(message)
        self.stderr = stderr
        self.source_path = source_path
        self.context = context


class CacheError(RuntimeError):
    """A cache entry that verified is not the library it claims to be."""


class SanitizerError(ValueError):
    """The sanitizer runtime is missing: not installed, or not preloaded into this process.

    A ValueError, as a user error: the environment asked for sanitizer mode
    (``NANOCOMPILE_SANITIZE=1``) in a process that cannot have it."""


def default_cache_dir() -> Path:
    """``$NANOCOMPILE_CACHE_DIR`` if set, else ``~/.cache/nanocompile/kernels``."""
    env = os.environ.get("NANOCOMPILE_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "nanocompile" / "kernels"


def sanitize_default() -> bool:
    """Whether ``NANOCOMPILE_SANITIZE`` asks for sanitizer mode ("1") or not ("0" or unset)."""
    value = os.environ.get("NANOCOMPILE_SANITIZE", "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"NANOCOMPILE_SANITIZE must be 0 or 1, got {value!r}")
    return value == "1"


def compile_flags(sanitize: bool) -> tuple[str, ...]:
    """The full gcc command line apart from file names, in order."""
    return _options(sanitize) + LIBS


def _options(sanitize: bool) -> tuple[str, ...]:
    return FLAGS + (SANITIZE_FLAGS if sanitize else ())


@functools.cache
def compiler_identity() -> str:
    """``gcc --version``'s first line and ``gcc -dumpmachine``, once per process."""
    version = _run_gcc_query("--version").splitlines()[0]
    machine = _run_gcc_query("-dumpmachine").strip()
    return f"{version} | {machine}"


@functools.cache
def cpu_identity() -> str:
    """sha256 of the CPU model name and feature flags (what ``-march=native`` sees)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    model = next((ln for ln in lines if ln.startswith("model name")), "")
    flags = next((ln for ln in lines if ln.startswith("flags")), "")
    return hashlib.sha256(f"{model}\n{flags}".encode()).hexdigest()


def cache_key(source: str, flags: Sequence[str]) -> str:
    """sha256 over the source, the flags, the compiler and the CPU."""
    parts = [KEY_VERSION, source, list(flags), compiler_identity(), cpu_identity()]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def sanitizer_preload() -> str:
    """Absolute path of gcc's libasan, the library to put in ``LD_PRELOAD``.

    libubsan is not listed: sanitized libraries link it, and it may load late.
    """
    path = _run_gcc_query("-print-file-name=libasan.so").strip()
    if not os.path.isabs(path) or not os.path.exists(path):
        raise SanitizerError(f"gcc has no libasan (it answered {path!r}); install libasan")
    return os.path.realpath(path)


def sanitizer_env() -> dict[str, str]:
    """Environment variables for a child process that loads sanitized libraries."""
    return {
        "LD_PRELOAD": sanitizer_preload(),
        "ASAN_OPTIONS": "detect_leaks=0",
        "UBSAN_OPTIONS": "print_stacktrace=1",
        "PYTHONMALLOC": "malloc",
        "NANOCOMPILE_SANITIZE": "1",
    }


def asan_runtime_loaded() -> bool:
    """Whether libasan is mapped into this process (it can only get there by preload)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    return "libasan" in maps


@dataclass(frozen=True)
class CompiledLibrary:
    """A shared library in the cache; `load` re-verifies its bytes before opening it."""

    path: Path
    key: str
    cache_hit: bool
    compile_seconds: float
    sanitize: bool
    _source: str = field(repr=False)
    _name: str = field(repr=False)

    def load(self) -> ctypes.CDLL:
        """Open the library with ctypes, rebuilding it first if its bytes no longer verify."""
        if self.sanitize and not asan_runtime_loaded():
            raise SanitizerError(
                "NANOCOMPILE_SANITIZE=1 (or sanitize=True) needs the ASan runtime preloaded: "
                "run with LD_PRELOAD=$(gcc -print-file-name=libasan.so) "
                "ASAN_OPTIONS=detect_leaks=0 PYTHONMALLOC=malloc, as "
                "nanocompile.backend.gcc.sanitizer_env() gives"
            )
        entry = _Entry(self.path.parent.parent, self.key)
        if not entry.verified():
            _ensure(entry, self._source, self._name, self.sanitize)
        library = _open(entry.so)
        _check_stamp(library, self.key, entry.so)
        return library


def compile_library(
    source: str,
    *,
    name: str = "kernels",
    sanitize: bool | None = None,
    cache_dir: Path | None = None,
) -> CompiledLibrary:
    """Compile `source` into a shared library, or find it in the cache.

    `name` labels temporary directories and error reports; it is not part of
    the key. `sanitize` defaults to ``NANOCOMPILE_SANITIZE``.
    """
    if not _NAME.fullmatch(name):
        raise ValueError(f"library name must match {_NAME.pattern}, got {name!r}")
    sanitize = sanitize_default() if sanitize is None else sanitize
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    entry = _Entry(root, cache_key(source, compile_flags(sanitize)))
    seconds = None if entry.verified() else _ensure(entry, source, name, sanitize)
    if seconds is None:
        mark_used(entry.so)
    return CompiledLibrary(
        path=entry.so,
        key=entry.key,
        cache_hit=seconds is None,
        compile_seconds=seconds or 0.0,
        sanitize=sanitize,
        _source=source,
        _name=name,
    )


@dataclass(frozen=True)
class _Entry:
    """The files of one cache key."""

    root: Path
    key: str

    @property
    def directory(self) -> Path:
        return self.root / self.key[:2]

    @property
    def so(self) -> Path:
        return self.directory / f"{self.key}.so"

    @property
    def source(self) -> Path:
        return self.directory / f"{self.key}.c"

    @property
    def digest(self) -> Path:
        return self.directory / f"{self.key}.sha256"

    @property
    def lock(self) -> Path:
        return self.directory / f"{self.key}.lock"

    def verified(self) -> bool:
        """The library exists, its bytes hash to the stored digest, and it is this
        key's library: its bytes hold the key (`key_stamp`), so an entry whose
        ``.so`` and ``.sha256`` were both replaced by another entry's pair does not
        verify. Anything unreadable (missing, a directory, a file where the key's
        directory should be) does not verify either."""
        try:
            expected = self.digest.read_text().strip()
            data = self.so.read_bytes()
        except (OSError, UnicodeDecodeError):
            return False
        return expected == hashlib.sha256(data).hexdigest() and _stamp(self.key) in data

    def discard(self) -> None:
        """Delete a bad entry, library first so no reader pairs it with a new hash;
        a directory standing where one of its files should be goes too."""
        for path in (self.so, self.digest, self.source):
            _remove(path)


def _ensure(entry: _Entry, source: str, name: str, sanitize: bool) -> float | None:
    """Build the entry under its lock unless another process already has; gcc's seconds."""
    _make_directory(entry.directory)
    remove_stale_builds(entry.root)
    with _locked(entry.lock):
        if entry.verified():
            return None
        entry.discard()
        return _build(entry, source, name, sanitize)


def _build(entry: _Entry, source: str, name: str, sanitize: bool) -> float:
    """Run gcc in a temporary directory of the cache and install the results atomically."""
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{name}-{os.getpid()}-", dir=entry.directory))
    try:
        c_file = tmp / entry.source.name
        so_file = tmp / entry.so.name
        command = [GCC, *_options(sanitize), c_file.name, "-o", so_file.name, *LIBS]
        start = time.perf_counter()
        header = precompiled_header(entry.root, source, sanitize)
        result = None
        if header is not None:
            c_file.write_text(with_header(source, header) + key_stamp(entry.key))
            result = _run(command, cwd=tmp)
        if result is None or result.returncode != 0:  # the source as it is decides and reports
            c_file.write_text(source + key_stamp(entry.key))
            result = _run(command, cwd=tmp)
        seconds = time.perf_counter() - start
        if result.returncode != 0:
            raise _compile_error(entry, source, name, result.stderr, result.returncode)
        c_file.write_text(source)  # the cache keeps the source as given, without the stamp
        digest = tmp / entry.digest.name
        digest.write_text(_sha256_file(so_file) + "\n")
        for path, target in ((c_file, entry.source), (digest, entry.digest), (so_file, entry.so)):
            os.replace(path, target)
        return seconds
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def system_prefix(source: str) -> tuple[str, int] | None:
    """The leading lines of ``source`` that are only a one-line comment, blank,
    ``#define _POSIX_C_SOURCE <n>L`` or ``#include <header>`` (the generated C's
    system headers), and how many lines they are; None when they include
    nothing."""
    lines = source.split("\n")
    n = 0
    while n < len(lines) - 1 and _PREFIX_LINE.fullmatch(lines[n]):
        n += 1
    if not any(line.startswith("#include") for line in lines[:n]):
        return None
    return "".join(line + "\n" for line in lines[:n]), n


def with_header(source: str, header: Path) -> str:
    """``source`` with its system prefix replaced by an ``#include`` of ``header``
    and empty lines, so every later line keeps its number."""
    found = system_prefix(source)
    assert found is not None
    _, n = found
    rest = source.split("\n", n)[n]
    return f'#include "{header}"\n' + "\n" * (n - 1) + rest


def precompiled_header(root: Path, source: str, sanitize: bool) -> Path | None:
    """The precompiled header of ``source``'s system prefix and ``<immintrin.h>``
    under ``root`` (built once, under a lock, installed by renaming its
    directory); None when the source has no such prefix or gcc cannot build it."""
    found = system_prefix(source)
    if found is None:
        return None
    text = found[0] + PCH_HOISTED
    flags = _options(sanitize) + LIBS
    parts = [KEY_VERSION, "pch", text, list(flags), compiler_identity(), cpu_identity()]
    key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()
    directory = root / PCH_DIR / key
    header, built = directory / PCH_HEADER, directory / f"{PCH_HEADER}.gch"
    if key in _PCH_FAILED or not _QUOTABLE.fullmatch(str(header)):
        return None
    if header.is_file() and built.is_file():
        return header
    _make_directory(directory.parent)
    with _locked(directory.parent / f"{key}.lock"):
        if header.is_file() and built.is_file():
            return header
        _remove(directory)
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}pch-{os.getpid()}-",
                                    dir=directory.parent))
        try:
            (tmp / PCH_HEADER).write_text(text)
            options = [f for f in _options(sanitize) if f != "-shared"]
            command = [GCC, *options, "-pthread", "-x", "c-header", PCH_HEADER,
                       "-o", f"{PCH_HEADER}.gch"]
            if _run(command, cwd=tmp).returncode != 0:
                _PCH_FAILED.add(key)  # not tried again by this process
                return None
            os.replace(tmp, directory)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return header


def _compile_error(
    entry: _Entry, source: str, name: str, stderr: str, returncode: int
) -> CompileError:
    """Save the failing source and point the message at it, with the lines gcc complained of."""
    failed = entry.root / "failed" / f"{name}-{entry.key[:16]}.c"
    failed.parent.mkdir(parents=True, exist_ok=True)
    failed.write_text(source)
    lines = source.splitlines()
    reported = _reported_lines(stderr, entry.source.name)
    context = "\n\n".join(_excerpt(lines, n) for n in reported[:MAX_REPORTED_ERRORS])
    errors = [ln for ln in stderr.splitlines() if _DIAGNOSTIC.match(ln)]
    others = [ln for ln in stderr.splitlines() if "error" in ln]
    first = (errors or others or [f"gcc exited with status {returncode}"])[0]
    first_context = f"\n{_excerpt(lines, reported[0])}" if reported else ""
    first = first.replace(entry.source.name, str(failed))
    stderr = stderr.replace(entry.source.name, str(failed))
    saved = "" if str(failed) in first else f" (source saved to {failed})"
    message = f"gcc failed on {name}{saved}: {first}{first_context}"
    return CompileError(message, stderr=stderr, source_path=failed, context=context)


def _reported_lines(stderr: str, file_name: str) -> list[int]:
    """Distinct lines of `file_name` that gcc reported errors on, in the order reported."""
    numbers: list[int] = []
    for line in stderr.splitlines():
        match = _DIAGNOSTIC.match(line)
        if match and match["file"] == file_name and int(match["line"]) not in numbers:
            numbers.append(int(match["line"]))
    return numbers


def _excerpt(lines: list[str], number: int) -> str:
    """Source lines around line `number` (1-based), the reported one marked with '>'."""
    first = max(1, number - CONTEXT_LINES)
    last = min(len(lines), number + CONTEXT_LINES)
    return "\n".join(
        f"{'>' if n == number else ' '} {n:5d} | {lines[n - 1]}" for n in range(first, last + 1)
    )


@contextmanager
def _locked(path: Path, wait: bool = True) -> Iterator[bool]:
    """An exclusive advisory lock on `path`, released on exit; with ``wait``
    False, taken only if free: yields whether it was (``try_locked``)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except IsADirectoryError:  # something else stands where the lock file goes
        _remove(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def try_locked(path: Path) -> AbstractContextManager[bool]:
    """``with try_locked(entry_lock) as free``: an entry's lock taken without
    waiting (False while a builder holds it; ``cache_usage.prune``)."""
    return _locked(path, wait=False)


def mark_used(path: Path) -> None:
    """A cache hit: set the entry's modification time to now, the time
    ``nanocompile cache --prune`` reads as its last use (``cache_usage``); a
    read-only cache keeps its times."""
    try:
        os.utime(path)
    except OSError:
        pass


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _open(path: Path) -> ctypes.CDLL:
    """dlopen a verified library (one place, so tests can watch what gets loaded)."""
    return ctypes.CDLL(str(path))


def key_stamp(key: str) -> str:
    """The C appended to every cached library's source: the cache key, as an
    exported string. `_Entry.verified` looks for it in the library's bytes before
    anything is loaded, and `CompiledLibrary.load` checks the symbol after."""
    return f"\n/* the compile cache's key of this library */\n" \
           f"const char {KEY_SYMBOL}[] = \"{key}\";\n"


def _stamp(key: str) -> bytes:
    return key.encode("ascii") + b"\0"


def _check_stamp(library: ctypes.CDLL, key: str, path: Path) -> None:
    try:  # the symbol is a char array: read the string at its address
        first = ctypes.c_char.in_dll(library, KEY_SYMBOL)
        found: bytes | None = ctypes.string_at(ctypes.addressof(first))
    except ValueError:  # no such symbol
        found = None
    if found != key.encode("ascii"):
        raise CacheError(f"{path}: the cached library is not the one for key {key[:16]}... "
                         f"(it carries {found!r}); delete the cache directory and retry")


def _remove(path: Path) -> None:
    """Remove a file or a directory tree at ``path``, if there is one."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _make_directory(path: Path) -> None:
    """``mkdir -p``, replacing a file that stands where the directory goes."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        _remove(path)
        path.mkdir(parents=True, exist_ok=True)


def remove_stale_builds(root: Path, max_age: float = STALE_SECONDS) -> int:
    """Delete the temporary build directories of builders that are gone.

    A build directory is ``<root>/<key[:2]>/.tmp-<name>-<pid>-<random>``; it is
    stale when that process no longer runs, or when it is older than
    ``max_age`` seconds (no build takes that long; this also covers a reused
    pid, and directories from before the pid was part of the name). Runs once
    per process and cache root, before the first build. Returns how many were
    removed."""
    if root in _SWEPT:
        return 0
    _SWEPT.add(root)
    return sweep_stale([*root.glob(f"??/{TMP_PREFIX}*"), *root.glob(f"{PCH_DIR}/{TMP_PREFIX}*")],
                       TMP_PREFIX, max_age)


def sweep_stale(candidates: Iterable[Path], prefix: str, max_age: float) -> int:
    """Remove each directory of ``candidates`` (named ``<prefix>[<name>-]<pid>-...``)
    whose owner process is gone or that is older than ``max_age`` seconds."""
    removed = 0
    now = time.time()
    for path in candidates:
        try:
            age = now - path.stat().st_mtime
        except OSError:
            continue
        if not path.is_dir() or (_owner_alive(path.name[len(prefix):]) and age < max_age):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed += 1
    return removed


def _owner_alive(rest: str) -> bool:
    """Whether the pid in ``[<name>-]<pid>-<random>`` is a running process (a name
    without a pid counts as alive: only its age can make it stale)."""
    pids = [int(part) for part in rest.split("-")[:-1] if part.isdigit()]
    if not pids:
        return True
    try:
        os.kill(pids[-1], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run gcc without this process's sanitizer preload (gcc is not an ASan program)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    except FileNotFoundError:
        raise CompileError(
            f"{GCC} not found on PATH", stderr="", source_path=None, context=""
        ) from None


def _run_gcc_query(option: str) -> str:
    result = _run([GCC, option])
    if result.returncode != 0:
        raise CompileError(
            f"{GCC} {option} failed: {result.stderr.strip()}",
            stderr=result.stderr,
            source_path=None,
            context="",
        )
    return result.stdout

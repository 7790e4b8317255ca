"""backend/gcc.py: compile, cache, verify, recover from corruption, survive concurrency.

Every test uses a fresh cache under tmp_path, never the user's cache. The
sanitizer recipe is exercised for real: a sanitized library with an
out-of-bounds write is called from a child Python started with
`gcc.sanitizer_env()`, and ASan must report it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nanocompile.backend import gcc

ADD = "int add(int a, int b) { return a + b; }\n"
SCALE = "float scale(float x) { return 2.5f * x; }\n"
BROKEN = "int f(void) {\n  int x = 1;\n  return y;\n}\nint g(void) { return z; }\n"
OOB = """\
#include <stdint.h>
void poke(char *p, int64_t i) { p[i] = 1; }
int shift(int a, int b) { return a << b; }
"""


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def entries(cache: Path, suffix: str) -> list[Path]:
    return sorted(p for p in cache.glob(f"??/*{suffix}"))


def test_compile_load_and_call(tmp_path: Path) -> None:
    lib = gcc.compile_library(ADD + SCALE, cache_dir=tmp_path)
    assert not lib.cache_hit
    assert lib.compile_seconds > 0
    assert lib.path == tmp_path / lib.key[:2] / f"{lib.key}.so"
    assert (lib.path.with_suffix(".c")).read_text() == ADD + SCALE
    assert lib.path.with_suffix(".sha256").read_text().strip() == sha(lib.path)
    so = lib.load()
    assert so.add(2, 40) == 42
    so.scale.argtypes = [ctypes.c_float]
    so.scale.restype = ctypes.c_float
    assert so.scale(1.5) == 3.75
    assert not list(tmp_path.glob("??/.tmp-*")), "temporary build directory left behind"


def test_second_compile_is_cache_hit_with_identical_bytes(tmp_path: Path) -> None:
    first = gcc.compile_library(ADD, cache_dir=tmp_path)
    before = first.path.read_bytes()
    inode = first.path.stat().st_ino
    second = gcc.compile_library(ADD, cache_dir=tmp_path)
    assert second.cache_hit
    assert second.compile_seconds == 0.0
    assert (second.key, second.path) == (first.key, first.path)
    assert second.path.read_bytes() == before
    assert second.path.stat().st_ino == inode, "a cache hit must not rewrite the library"
    elsewhere = gcc.compile_library(ADD, cache_dir=tmp_path / "other")
    assert not elsewhere.cache_hit
    assert elsewhere.path.read_bytes() == before, "gcc output is not deterministic"


def test_flags_follow_spec() -> None:
    flags = gcc.compile_flags(sanitize=False)
    for flag in ("-O3", "-march=native", "-ffp-contract=off", "-fwrapv", "-fno-math-errno"):
        assert flag in flags
    assert "-lm" in flags
    assert "-pthread" in flags
    assert not any("fast-math" in f or "sanitize" in f for f in flags)
    sanitized = gcc.compile_flags(sanitize=True)
    assert "-fsanitize=address,undefined" in sanitized
    assert "-fno-sanitize-recover=undefined" in sanitized


def test_key_covers_source_flags_compiler_and_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    flags = gcc.compile_flags(sanitize=False)
    base = gcc.cache_key(ADD, flags)
    assert gcc.cache_key(ADD, flags) == base
    assert gcc.cache_key(ADD + " ", flags) != base
    assert gcc.cache_key(ADD, gcc.compile_flags(sanitize=True)) != base
    assert gcc.cache_key(ADD, (*flags, "-O2")) != base
    monkeypatch.setattr(gcc, "compiler_identity", lambda: "gcc (Other) 13.1.0 | x86_64")
    assert gcc.cache_key(ADD, flags) != base
    monkeypatch.undo()
    monkeypatch.setattr(gcc, "cpu_identity", lambda: "another cpu")
    assert gcc.cache_key(ADD, flags) != base


def test_sanitize_mode_has_its_own_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = gcc.compile_library(ADD, cache_dir=tmp_path)
    monkeypatch.setenv("NANOCOMPILE_SANITIZE", "1")
    sanitized = gcc.compile_library(ADD, cache_dir=tmp_path)
    assert sanitized.sanitize
    assert not sanitized.cache_hit
    assert sanitized.key != plain.key
    assert sanitized.path.read_bytes() != plain.path.read_bytes()
    assert gcc.compile_library(ADD, cache_dir=tmp_path, sanitize=False).key == plain.key


@pytest.mark.parametrize(("value", "expected"), [("", False), ("0", False), ("1", True)])
def test_sanitize_env(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    monkeypatch.setenv("NANOCOMPILE_SANITIZE", value)
    assert gcc.sanitize_default() is expected


def test_sanitize_env_rejects_other_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NANOCOMPILE_SANITIZE", "yes")
    with pytest.raises(ValueError, match="NANOCOMPILE_SANITIZE must be 0 or 1"):
        gcc.compile_library(ADD)


def test_cache_dir_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(tmp_path / "env-cache"))
    lib = gcc.compile_library(ADD, sanitize=False)
    assert lib.path.is_relative_to(tmp_path / "env-cache")
    monkeypatch.delenv("NANOCOMPILE_CACHE_DIR")
    assert gcc.default_cache_dir() == Path.home() / ".cache" / "nanocompile" / "kernels"


def test_bad_library_name_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="library name"):
        gcc.compile_library(ADD, name="../escape", cache_dir=tmp_path)


def test_compile_error_carries_gcc_message_and_source(tmp_path: Path) -> None:
    with pytest.raises(gcc.CompileError) as info:
        gcc.compile_library(BROKEN, name="broken", cache_dir=tmp_path)
    error = info.value
    message = str(error)
    assert error.source_path is not None
    assert error.source_path.read_text() == BROKEN
    assert str(error.source_path) in message
    assert f"{error.source_path}:3:10: error:" in message
    assert "undeclared" in message.splitlines()[0]
    assert ">     3 |   return y;" in message
    assert "int g(void)" in message  # two lines of context after line 3
    assert ">     5 | int g(void) { return z; }" in error.context  # the second error too
    assert "‘z’ undeclared" in error.stderr or "'z' undeclared" in error.stderr
    assert not entries(tmp_path, ".so"), "a failed compile installed a library"
    assert not list(tmp_path.glob("??/.tmp-*")), "temporary build directory left behind"


def test_compile_error_without_line_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcc, "FLAGS", (*gcc.FLAGS, "-fno-such-flag"))
    with pytest.raises(gcc.CompileError, match="unrecognized command-line option") as info:
        gcc.compile_library(ADD, name="flagged", cache_dir=tmp_path)
    assert "source saved to" in str(info.value)


CORRUPTIONS = {
    "truncate": lambda lib: lib.path.write_bytes(lib.path.read_bytes()[:1000]),
    "flip-byte": lambda lib: lib.path.write_bytes(flip(lib.path.read_bytes(), 4000)),
    "empty": lambda lib: lib.path.write_bytes(b""),
    "missing-hash": lambda lib: lib.path.with_suffix(".sha256").unlink(),
    "wrong-hash": lambda lib: lib.path.with_suffix(".sha256").write_text("0" * 64 + "\n"),
}


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupt_entry_is_rebuilt_not_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, corruption: str
) -> None:
    good = gcc.compile_library(ADD, cache_dir=tmp_path)
    good_bytes = good.path.read_bytes()
    CORRUPTIONS[corruption](good)
    opened = watch_loads(monkeypatch)
    rebuilt = gcc.compile_library(ADD, cache_dir=tmp_path)
    assert not rebuilt.cache_hit
    assert rebuilt.path.read_bytes() == good_bytes
    assert rebuilt.load().add(1, 2) == 3
    assert opened == [hashlib.sha256(good_bytes).hexdigest()]


def test_load_reverifies_and_rebuilds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = gcc.compile_library(ADD, cache_dir=tmp_path)
    good_bytes = lib.path.read_bytes()
    lib.path.write_bytes(flip(good_bytes, 3000))  # corrupted after compile_library returned
    opened = watch_loads(monkeypatch)
    assert lib.load().add(20, 22) == 42
    assert opened == [hashlib.sha256(good_bytes).hexdigest()]
    assert lib.path.read_bytes() == good_bytes


def watch_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the sha256 of every library the backend hands to dlopen."""
    opened: list[str] = []
    real_open = gcc._open

    def recording_open(path: Path) -> ctypes.CDLL:
        opened.append(sha(path))
        return real_open(path)

    monkeypatch.setattr(gcc, "_open", recording_open)
    return opened


CHILD = """
import json, sys, time
from pathlib import Path
from nanocompile.backend import gcc
cache, go, source = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
lib = gcc.compile_library(source, cache_dir=cache, sanitize=False)
print(json.dumps({"key": lib.key, "hit": lib.cache_hit, "value": lib.load().f(10)}))
"""


def test_concurrent_compiles_share_one_cache(tmp_path: Path) -> None:
    cache, go = tmp_path / "cache", tmp_path / "go"
    sources = {
        "int f(int x) { return x + 1; }\n": 11,
        "int f(int x) { return 3 * x; }\n": 30,
    }
    jobs = [source for source in sources for _ in range(2)]  # each source twice, all at once
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(cache), str(go), source],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for source in jobs
    ]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
    go.touch()  # release all children together
    outputs = [child.communicate(timeout=120) for child in children]
    for child, (_, stderr) in zip(children, outputs, strict=True):
        assert child.returncode == 0, stderr
    results = [json.loads(out.splitlines()[-1]) for out, _ in outputs]
    assert [r["value"] for r in results] == [sources[s] for s in jobs]
    for source in sources:
        keys = {r["key"] for r, s in zip(results, jobs, strict=True) if s == source}
        assert len(keys) == 1
        compiled = [not r["hit"] for r, s in zip(results, jobs, strict=True) if s == source]
        assert sum(compiled) == 1, "the same source was compiled more than once"
    libraries = entries(cache, ".so")
    assert len(libraries) == len(sources)
    assert sorted(p.with_suffix(".c").read_text() for p in libraries) == sorted(sources)
    for path in libraries:
        assert path.with_suffix(".sha256").read_text().strip() == sha(path)
    assert len(entries(cache, ".sha256")) == len(sources)
    assert not list(cache.glob("??/.tmp-*")), "temporary build directory left behind"


def test_sanitized_library_refuses_to_load_without_runtime(tmp_path: Path) -> None:
    if gcc.asan_runtime_loaded():
        pytest.skip("this process runs with the ASan runtime preloaded")
    lib = gcc.compile_library(OOB, cache_dir=tmp_path, sanitize=True)
    with pytest.raises(gcc.SanitizerError, match="LD_PRELOAD"):
        lib.load()


def test_sanitizer_preload_is_gccs_libasan() -> None:
    path = Path(gcc.sanitizer_preload())
    assert path.is_absolute()
    assert path.exists()
    assert path.name.startswith("libasan.so")
    assert gcc.sanitizer_env()["LD_PRELOAD"] == str(path)


SANITIZED_CHILD = """
import ctypes, sys
from pathlib import Path
from nanocompile.backend import gcc
lib = gcc.compile_library(sys.argv[2], cache_dir=Path(sys.argv[1]))  # sanitize from the env
assert lib.sanitize and lib.cache_hit, (lib.sanitize, lib.cache_hit)
so = lib.load()
so.poke.argtypes = [ctypes.c_void_p, ctypes.c_int64]
buffer = ctypes.create_string_buffer(64)
so.poke(buffer, 63)
print("in-bounds ok", flush=True)
if sys.argv[3] == "oob":
    so.poke(buffer, 64)
if sys.argv[3] == "oob-numpy":
    import numpy as np
    array = np.zeros(3, np.uint8)
    so.poke(array.ctypes.data, 2)
    so.poke(array.ctypes.data, 3)
if sys.argv[3] == "shift":
    so.shift(1, 40)
print("survived", flush=True)
"""


@pytest.mark.sanitize
@pytest.mark.parametrize(
    ("action", "report"),
    [
        ("none", None),
        ("oob", "ERROR: AddressSanitizer: heap-buffer-overflow"),
        ("oob-numpy", "ERROR: AddressSanitizer: heap-buffer-overflow"),
        ("shift", "runtime error: shift exponent 40 is too large"),
    ],
)
def test_sanitizer_recipe_reports_errors(tmp_path: Path, action: str, report: str | None) -> None:
    lib = gcc.compile_library(OOB, cache_dir=tmp_path, sanitize=True)
    assert lib.sanitize
    env = {**os.environ, **gcc.sanitizer_env()}
    child = subprocess.run(
        [sys.executable, "-c", SANITIZED_CHILD, str(tmp_path), OOB, action],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "in-bounds ok" in child.stdout, child.stderr
    if report is None:
        assert child.returncode == 0, child.stderr
        assert "survived" in child.stdout
        assert "Sanitizer" not in child.stderr
        return
    assert child.returncode != 0
    assert "survived" not in child.stdout
    assert report in child.stderr, child.stderr


# --------------------------------------------------------------------------
# issue 14: an entry must prove it is the one asked for; leftovers are swept


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_swapped_entry_pair_is_rebuilt_not_loaded(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Entry A's .so and .sha256 both replaced by entry B's (a consistent pair, but
    for another key): A does not verify, is rebuilt, and only A's bytes are loaded."""
    a = gcc.compile_library(ADD, cache_dir=tmp_path)
    b = gcc.compile_library(SCALE, cache_dir=tmp_path)
    good = a.path.read_bytes()
    for suffix in (".so", ".sha256"):
        shutil.copyfile(b.path.with_suffix(suffix), a.path.with_suffix(suffix))
    opened: list[bytes] = []
    real_open = gcc._open
    monkeypatch.setattr(gcc, "_open", lambda path: opened.append(path.read_bytes())
                        or real_open(path))
    again = gcc.compile_library(ADD, cache_dir=tmp_path)
    assert not again.cache_hit, "another key's library was taken as this key's"
    assert again.load().add(2, 40) == 42
    assert opened == [good]


def test_library_exports_its_own_key(tmp_path: Path) -> None:
    lib = gcc.compile_library(ADD, cache_dir=tmp_path)
    so = lib.load()
    first = ctypes.c_char.in_dll(so, gcc.KEY_SYMBOL)
    assert ctypes.string_at(ctypes.addressof(first)).decode() == lib.key


@pytest.mark.parametrize("where", ["so", "sha256", "c", "lock", "key-directory"])
def test_directory_in_place_of_an_entry_file_is_rebuilt(tmp_path: Path, where: str) -> None:
    """A directory where one of an entry's files should be (or a file where the key's
    directory should be) is removed and the entry rebuilt, never an OSError."""
    lib = gcc.compile_library(ADD, cache_dir=tmp_path)
    if where == "key-directory":
        shutil.rmtree(lib.path.parent)
        lib.path.parent.write_text("not a directory")
    else:
        path = lib.path.with_suffix(f".{where}")
        path.unlink()
        (path / "inner").mkdir(parents=True)
    again = gcc.compile_library(ADD, cache_dir=tmp_path)
    assert again.cache_hit == (where in ("c", "lock"))  # .c and .lock are not verified
    assert again.load().add(2, 40) == 42
    assert gcc.compile_library(ADD, cache_dir=tmp_path).cache_hit


def test_stale_build_directories_are_removed(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Build directories left by a killed builder (its pid is gone), or older than any
    build (a name without a pid), are removed by the next build into the cache; a
    young one of a live process stays."""
    bucket = tmp_path / "ab"
    bucket.mkdir(parents=True)
    dead = bucket / f".tmp-kernels-{_dead_pid()}-x1y2"
    old = bucket / ".tmp-kernels-q9z8"  # the layout before pids were in the name
    live = bucket / f".tmp-kernels-{os.getpid()}-a1b2"
    for d in (dead, old, live):
        (d / "half-built.c").parent.mkdir()
        (d / "half-built.c").write_text("int x;")
    os.utime(old, (time.time() - gcc.STALE_SECONDS - 60,) * 2)
    monkeypatch.setattr(gcc, "_SWEPT", set())
    gcc.compile_library(ADD, cache_dir=tmp_path)
    assert not dead.exists()
    assert not old.exists()
    assert live.exists()

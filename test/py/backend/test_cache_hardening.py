"""The compile cache under concurrency and corruption, with real programs.

``test_gcc.py`` covers the gcc driver on toy libraries; here the same
guarantees are checked end to end through ``compile_program`` on the tiny
Qwen2 model: processes compiling the same and different graphs into one fresh
cache at the same moment all succeed, compile each library once and compute
identical logits; a cached library that is truncated, bit-flipped, emptied,
replaced or stripped of its hash is detected and rebuilt, never loaded (every
dlopen is watched); and a builder killed in the middle of gcc leaves nothing
that stops the next compile.
"""

from __future__ import annotations

import _ctypes
import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from nanocompile.backend import gcc, runtime
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program
from nanocompile.inference.engine import F32Weights
from nanocompile.interpreter import run_graph
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

PROMPT = [151644, 872, 198, 9707, 11, 1879, 0, 151645]

CHILD = r"""
import hashlib, json, sys, time
from pathlib import Path
import numpy as np
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program
from nanocompile.inference.engine import F32Weights
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

snapshot, go, variant = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
snap = Snapshot.open(snapshot)
weights = F32Weights(snap)
graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=variant == "last"))
ids = np.array(json.loads(sys.argv[4]), np.int64)
layers, heads, dim = (snap.config.num_hidden_layers, snap.config.num_key_value_heads,
                      snap.config.head_dim)
past = np.zeros((layers, heads, 0, dim), np.float32)
for name in weights:
    weights[name]
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
program = compile_program(graph, weights, fuse=True, schedule=True)  # as the API does
out = program.run({"token_ids": ids, "past_keys": past, "past_values": past})
digest = hashlib.sha256(b"".join(out[k].tobytes() for k in sorted(out))).hexdigest()
print(json.dumps({"key": program.library.key, "hit": program.library.cache_hit,
                  "outputs": digest, "so": hashlib.sha256(
                      program.library.path.read_bytes()).hexdigest()}))
"""


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def libraries(cache: Path) -> list[Path]:
    return sorted(cache.glob("??/*.so"))


def run_inputs(cfg: object) -> dict[str, np.ndarray]:
    past = np.zeros((cfg.num_hidden_layers, cfg.num_key_value_heads, 0,  # type: ignore[attr-defined]
                     cfg.head_dim), np.float32)  # type: ignore[attr-defined]
    return {"token_ids": np.array(PROMPT, np.int64), "past_keys": past, "past_values": past}


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_concurrent_compiles_of_the_tiny_model(tmp_path: Path, tiny_snapshot: Path) -> None:
    """Four processes released together into one empty cache: two compile the tiny
    model's all-positions graph, two its last-position graph. All succeed; each
    graph is compiled exactly once (the other process waits on the lock and hits);
    the pairs get the same library and bit-identical outputs; the cache ends with
    two verified libraries and no temporary directories."""
    cache, go = tmp_path / "cache", tmp_path / "go"
    env = {**os.environ, "NANOCOMPILE_CACHE_DIR": str(cache)}
    env.pop("NANOCOMPILE_SANITIZE", None)
    jobs = ["all", "last", "all", "last"]
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(tiny_snapshot), str(go),
                                  variant, json.dumps(PROMPT)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env) for variant in jobs]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready", child.stderr.read()  # type: ignore[union-attr]
    go.touch()
    outputs = [child.communicate(timeout=600) for child in children]
    for child, (_, stderr) in zip(children, outputs, strict=True):
        assert child.returncode == 0, stderr
    results = [json.loads(out.splitlines()[-1]) for out, _ in outputs]
    for variant in ("all", "last"):
        mine = [r for r, v in zip(results, jobs, strict=True) if v == variant]
        assert len({r["key"] for r in mine}) == 1, variant
        assert len({r["outputs"] for r in mine}) == 1, f"{variant}: different results"
        assert len({r["so"] for r in mine}) == 1, variant
        assert sorted(r["hit"] for r in mine) == [False, True], f"{variant}: compiled twice"
    assert results[0]["key"] != results[1]["key"]
    found = libraries(cache)
    assert len(found) == 2
    for path in found:
        assert path.with_suffix(".sha256").read_text().strip() == sha(path)
        assert path.with_suffix(".c").exists()
    assert not list(cache.glob("??/.tmp-*")), "a temporary build directory was left behind"


@pytest.fixture(scope="module")
def tiny(tiny_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The tiny model's last-position graph, compiled (fused) once into a module cache
    whose good entry each test copies into its own cache, with its outputs."""
    snap = Snapshot.open(tiny_snapshot)
    weights = F32Weights(snap)
    graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=True))
    cache = tmp_path_factory.mktemp("good-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NANOCOMPILE_CACHE_DIR", str(cache))
        program = compile_program(graph, weights, fuse=True, sanitize=False)
    return {"cfg": snap.config, "weights": weights, "graph": graph, "cache": cache,
            "entry": program.library.path, "good": program.library.path.read_bytes(),
            "outputs": program.run(run_inputs(snap.config))}


def copy_entry(tiny: dict, cache: Path) -> Path:
    """The good cache entry (.c, .sha256, .so) copied into ``cache``; its .so path."""
    source: Path = tiny["entry"]
    target = cache / source.parent.name
    target.mkdir(parents=True)
    for suffix in (".c", ".sha256", ".so"):
        (target / source.with_suffix(suffix).name).write_bytes(
            source.with_suffix(suffix).read_bytes())
    return target / source.name


def watch_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sha256 of every library handed to dlopen."""
    opened: list[str] = []
    real_open = gcc._open

    def recording_open(path: Path) -> ctypes.CDLL:
        opened.append(sha(path))
        return real_open(path)

    monkeypatch.setattr(gcc, "_open", recording_open)
    return opened


def replace_bytes(path: Path, data: bytes) -> None:
    """Damage a cache entry the way a bad disk or a foreign writer would, but as a new
    file: this process has the library mapped (dlopen), and rewriting that inode in
    place would change (or, truncated, SIGBUS) the code it is running."""
    tmp = path.with_name(path.name + ".damaged")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:]


CORRUPTIONS: dict[str, Callable[[Path, bytes], None]] = {
    "truncated": lambda so, good: replace_bytes(so, good[: len(good) // 2]),
    "bit-flip": lambda so, good: replace_bytes(so, flip(good, len(good) // 3)),
    "empty": lambda so, good: replace_bytes(so, b""),
    # a valid shared object, but not this one (CPython's own _ctypes extension)
    "other-library": lambda so, good: replace_bytes(so, Path(_ctypes.__file__).read_bytes()),
    "missing-hash": lambda so, good: so.with_suffix(".sha256").unlink(),
    "wrong-hash": lambda so, good: so.with_suffix(".sha256").write_text("0" * 64 + "\n"),
}


def same_outputs(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> bool:
    return got.keys() == want.keys() and all(
        np.array_equal(got[k].view(np.uint8), want[k].view(np.uint8)) for k in want)


def test_good_entry_is_a_cache_hit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   tiny: dict) -> None:
    """Control for the corruption tests: the copied entry, undamaged, is used as is."""
    copy_entry(tiny, tmp_path)
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(tmp_path))
    opened = watch_loads(monkeypatch)
    program = compile_program(tiny["graph"], tiny["weights"], fuse=True, sanitize=False)
    assert program.library.cache_hit
    assert opened == [hashlib.sha256(tiny["good"]).hexdigest()]
    assert same_outputs(program.run(run_inputs(tiny["cfg"])), tiny["outputs"])


# the non-slow suite's 3-minute budget; the full suite runs it: two kinds in the quick suite,
# the others slow (each is a gcc rebuild of the tiny model; test_gcc.py's
# test_corrupt_entry_is_rebuilt_not_loaded has those kinds quickly, on a small library)
QUICK_CORRUPTIONS = ("bit-flip", "other-library")


@pytest.mark.parametrize("corruption", [
    c if c in QUICK_CORRUPTIONS else pytest.param(c, marks=pytest.mark.slow)
    for c in sorted(CORRUPTIONS)])
def test_corrupt_cached_program_is_rebuilt_not_loaded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny: dict, corruption: str) -> None:
    """A cached tiny-model library damaged on disk: compile_program detects it (hash
    check), gcc runs again, only the good bytes are ever dlopened, and the program
    computes the same bits as the undamaged one."""
    so = copy_entry(tiny, tmp_path)
    CORRUPTIONS[corruption](so, tiny["good"])
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(tmp_path))
    opened = watch_loads(monkeypatch)
    program = compile_program(tiny["graph"], tiny["weights"], fuse=True, sanitize=False)
    assert not program.library.cache_hit, "a damaged entry was taken as a cache hit"
    assert program.library.path == so
    assert so.read_bytes() == tiny["good"]
    assert so.with_suffix(".sha256").read_text().strip() == sha(so)
    assert opened == [hashlib.sha256(tiny["good"]).hexdigest()]
    assert same_outputs(program.run(run_inputs(tiny["cfg"])), tiny["outputs"])


def test_library_damaged_between_lookup_and_load_is_rebuilt(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny: dict) -> None:
    """The window between the cache lookup and dlopen: a library that verifies at
    lookup but is damaged before ``load`` is re-verified there and rebuilt."""
    so = copy_entry(tiny, tmp_path)
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(tmp_path))
    real_compile = runtime.compile_library

    def compile_then_damage(*args: object, **kwargs: object) -> gcc.CompiledLibrary:
        library = real_compile(*args, **kwargs)  # type: ignore[arg-type]
        assert library.cache_hit
        replace_bytes(library.path, flip(tiny["good"], len(tiny["good"]) // 2))
        return library

    monkeypatch.setattr(runtime, "compile_library", compile_then_damage)
    opened = watch_loads(monkeypatch)
    program = compile_program(tiny["graph"], tiny["weights"], fuse=True, sanitize=False)
    assert opened == [hashlib.sha256(tiny["good"]).hexdigest()]
    assert so.read_bytes() == tiny["good"]
    assert same_outputs(program.run(run_inputs(tiny["cfg"])), tiny["outputs"])


KILLED_CHILD = r"""
import sys
from pathlib import Path
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program
from nanocompile.inference.engine import F32Weights
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
snap = Snapshot.open(Path(sys.argv[1]))
graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=True))
compile_program(graph, F32Weights(snap), fuse=False, sanitize=False)
"""


def test_builder_killed_during_gcc_leaves_a_usable_cache(tmp_path: Path, tiny: dict,
                                                         tiny_snapshot: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """SIGKILL a process (and its gcc) while it builds the unfused tiny model: the
    next compile of the same graph succeeds (the lock died with the process, the
    half-built temporary directory is ignored), its library verifies, is a cache
    hit from then on, and computes what the interpreter does."""
    cache = tmp_path / "cache"
    env = {**os.environ, "NANOCOMPILE_CACHE_DIR": str(cache)}
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, str(tiny_snapshot)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(cache.glob("??/.tmp-*/*.c")) and time.monotonic() < deadline:
        if child.poll() is not None:
            pytest.fail(f"the builder ended before gcc ran: {child.communicate()}")
        time.sleep(0.01)
    time.sleep(0.2)  # gcc is running now
    os.killpg(child.pid, signal.SIGKILL)  # the child and its gcc, nothing else
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(cache))
    opened = watch_loads(monkeypatch)
    program = compile_program(tiny["graph"], tiny["weights"], fuse=False, sanitize=False)
    assert not program.library.cache_hit
    path = program.library.path
    assert path.with_suffix(".sha256").read_text().strip() == sha(path) == opened[0]
    assert compile_program(tiny["graph"], tiny["weights"], fuse=False,
                           sanitize=False).library.cache_hit
    got = program.run(run_inputs(tiny["cfg"]))
    want = run_graph(tiny["graph"], run_inputs(tiny["cfg"]), tiny["weights"])
    for name in want:  # unfused C against the interpreter (test_qwen2_compiled's bound)
        scale = max(1.0, float(np.abs(want[name]).max()))
        assert np.abs(got[name] - want[name]).max() <= 1e-5 * scale, name

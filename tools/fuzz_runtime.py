"""Fuzz campaigns of the runtime's second hardening round (issue 14), run by
``tools/fuzz.py``:

    python tools/fuzz.py threads --count 200 --seed 0
    python tools/fuzz.py cache   --count 500 --seed 0
    python tools/fuzz.py json    --count 2000 --seed 0
    python tools/fuzz.py chains  --count 40  --seed 0

* ``threads``: the tiny model, one ``Model`` shared by 2-4 threads started
  together, each running a random mix of ``logits`` and greedy
  ``generate_ids`` on random prompts (1-40 tokens, equal lengths included).
  Every result must equal, bitwise, the same call made alone.
* ``cache``: a cache of small libraries (each returning its own number), then
  random damage: another entry's ``.so``/``.sha256`` pair swapped in, a file
  truncated or bit-flipped, a hash deleted, a directory where a file should be
  (or a file where the key's directory should be), dead builders' leftovers.
  Every later ``compile_library`` + ``load`` must return the library of its
  own source (the function answers its own number) without an exception.
* ``json``: every JSON file the tool reads (config.json, tokenizer_config.json,
  generation_config.json, model.safetensors.index.json) replaced by random
  deep nesting, truncation, non-UTF-8 bytes, huge numbers or wrong types; the
  snapshot is then opened as ``nanocompile.load`` opens it. Acceptable: a
  one-line ``ValueError``/``OSError`` or a successful open; anything else
  (``RecursionError``, ``TypeError``, ...) is a finding.
* ``chains``: flat elementwise chains of 200-3,000 random ``neg``/``add``/
  ``sub``/``mul`` primitives, compiled fused (and unfused up to 400 ops) and
  run against the interpreter (bitwise: every primitive of the chain is exact).

Input ``i`` depends only on ``(seed, i)``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# --------------------------------------------------------------------------
# shared


def _rng(seed: int, index: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([salt, seed, index])


def _tiny_snapshot(workdir: Path) -> Path:
    from nanocompile.checkpoint.synth import write_synthetic_snapshot

    out = workdir / "tiny"
    if not (out / "config.json").exists():
        write_synthetic_snapshot(out, tiny=True, seed=0)
    return out


# --------------------------------------------------------------------------
# threads


Request = tuple[str, tuple[int, ...]]


def _requests(rng: np.random.Generator) -> list[Request]:
    """2-4 requests (logits or 3 greedy tokens) on prompts of 1-40 tokens."""
    n_threads = int(rng.integers(2, 5))
    lengths = rng.integers(1, 41, n_threads)
    if rng.random() < 0.3:
        lengths[:] = lengths[0]  # equal lengths: one plan, one arena, shared
    return [("logits" if rng.random() < 0.6 else "generate",
             tuple(int(t) for t in rng.integers(0, 151643, n))) for n in lengths]


def _together(call: Callable[[Request], Any], work: list[Request]) -> tuple[list[Any], list[str]]:
    """Each request in its own thread, released together; results and errors."""
    got: list[Any] = [None] * len(work)
    errors: list[str] = []
    barrier = threading.Barrier(len(work))

    def body(k: int) -> None:
        try:
            barrier.wait()
            got[k] = call(work[k])
        except BaseException as e:  # a finding, reported by the caller
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=body, args=(k,)) for k in range(len(work))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got, errors


def threads_campaign(report: Any, count: int, seed: int, workdir: Path) -> None:
    from nanocompile import api

    model = api.load(_tiny_snapshot(workdir))
    alone: dict[Request, Any] = {}

    def call(item: Request) -> Any:
        kind, prompt = item
        if kind == "logits":
            return model.logits(list(prompt))
        return model.generate_ids(list(prompt), max_tokens=3).token_ids

    for i in range(count):
        work = _requests(_rng(seed, i, 14))
        for item in work:
            if item not in alone:
                alone[item] = call(item)
        got, errors = _together(call, work)
        report.count += 1
        if errors:
            report.outcomes["error"] += 1
            report.find("thread-error", input=i, detail=errors[0][:300])
            continue
        same = all(_same(g, alone[w]) for g, w in zip(got, work, strict=True))
        report.outcomes["bitwise" if same else "mismatch"] += 1
        if not same:
            report.find("thread-mismatch", "test/py/test_threads.py", input=i,
                        lengths=[len(w[1]) for w in work])
    report.extra["distinct_requests"] = len(alone)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))
    return bool(a == b)


# --------------------------------------------------------------------------
# cache

LIBRARIES = 6


def _source(k: int) -> str:
    return f"int which(void) {{ return {1000 + k}; }}\n"


def _damage(rng: np.random.Generator, root: Path, paths: list[Path]) -> str:
    """One random damage to the cache; returns its name."""
    k, other = (int(x) for x in rng.choice(len(paths), 2, replace=False))
    so = paths[k]
    kinds: dict[str, Callable[[], None]] = {
        "swap-pair": lambda: [_write_new(so.with_suffix(s), paths[other].with_suffix(s)
                                         .read_bytes())
                              for s in (".so", ".sha256") if paths[other].with_suffix(s).is_file()],
        "truncate": lambda: _write_new(so, so.read_bytes()[: int(rng.integers(0, 4096))])
        if so.is_file() else None,
        "bit-flip": lambda: _flip(so, rng),
        "delete-hash": lambda: _remove(so.with_suffix(".sha256")),
        "so-is-directory": lambda: _replace_with_dir(so),
        "hash-is-directory": lambda: _replace_with_dir(so.with_suffix(".sha256")),
        "lock-is-directory": lambda: _replace_with_dir(so.with_suffix(".lock")),
        "key-dir-is-file": lambda: _replace_with_file(so.parent),
        "dead-builder": lambda: _dead_builder(so.parent),
    }
    name = str(rng.choice(sorted(kinds)))
    if so.parent.is_dir() or name == "key-dir-is-file":
        kinds[name]()
    return name


def _write_new(path: Path, data: bytes) -> None:
    """Replace ``path`` by a new file (a new inode: this process has the old library
    mapped, and writing into it in place would change the code it runs)."""
    if path.is_dir():
        return
    tmp = path.with_name(path.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _flip(path: Path, rng: np.random.Generator) -> None:
    if not path.is_file() or path.stat().st_size == 0:
        return
    data = bytearray(path.read_bytes())
    at = int(rng.integers(0, len(data)))
    data[at] ^= 1 << int(rng.integers(0, 8))
    _write_new(path, bytes(data))


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _replace_with_dir(path: Path) -> None:
    if path.is_dir():
        return
    _remove(path)
    (path / "x").mkdir(parents=True)


def _replace_with_file(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    path.write_text("not a directory")


def _dead_builder(directory: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    if directory.is_dir():
        (directory / f".tmp-kernels-{child.pid}-zz" / "half.c").parent.mkdir(exist_ok=True)


def cache_campaign(report: Any, count: int, seed: int, workdir: Path) -> None:
    import ctypes

    from nanocompile.backend import gcc

    root = workdir / "cache"
    for i in range(count):
        rng = _rng(seed, i, 15)
        libs = [gcc.compile_library(_source(k), cache_dir=root) for k in range(LIBRARIES)]
        done = [_damage(rng, root, [lib.path for lib in libs])
                for _ in range(int(rng.integers(1, 4)))]
        report.count += 1
        try:
            for k in range(LIBRARIES):
                lib = gcc.compile_library(_source(k), cache_dir=root)
                fn = lib.load().which
                fn.restype = ctypes.c_int
                if fn() != 1000 + k:
                    report.outcomes["wrong-library"] += 1
                    report.find("cache-wrong-library", "test/py/backend/test_gcc.py", input=i,
                                damage=done, library=k)
                    break
            else:
                report.outcomes["ok"] += 1
        except Exception as e:  # every damage must be repaired, never raised
            report.outcomes["error"] += 1
            report.find("cache-error", input=i, damage=done,
                        detail=f"{type(e).__name__}: {e}"[:300])
        gcc._SWEPT.discard(root)  # the next input's first build sweeps again


# --------------------------------------------------------------------------
# json

JSON_FILES = ("config.json", "tokenizer_config.json", "generation_config.json",
              "model.safetensors.index.json")


def _json_mutation(rng: np.random.Generator, original: bytes) -> bytes:
    kind = int(rng.integers(0, 7))
    depth = int(rng.choice([10, 1000, 50_000, 200_000]))
    if kind == 0:
        return b"[" * depth + b"]" * depth
    if kind == 1:
        return b'{"a":' * depth + b"1" + b"}" * depth
    if kind == 2:
        return original[: int(rng.integers(0, max(1, len(original))))]
    if kind == 3:
        return b"\xff\xfe" + original
    if kind == 4:  # a field of the right name with a value of the wrong kind
        data = json.loads(original) if original.strip() else {}
        odd = [10**400, -1, 0.5, [], {}, None, "x" * 300, True]
        if isinstance(data, dict) and data:
            data[str(rng.choice(sorted(data)))] = odd[int(rng.integers(0, len(odd)))]
        return json.dumps(data).encode()
    if kind == 5:
        return b'{"x": ' + b"[" * depth + b"]" * depth + b"}"
    return bytes(rng.integers(0, 256, int(rng.integers(1, 200)), dtype=np.uint8))


def json_campaign(report: Any, count: int, seed: int, workdir: Path) -> None:
    from nanocompile import api
    from nanocompile.inference.sampling import from_generation_config

    good = _tiny_snapshot(workdir)
    for i in range(count):
        rng = _rng(seed, i, 16)
        name = str(rng.choice(JSON_FILES))
        snap = workdir / "json-case"
        shutil.rmtree(snap, ignore_errors=True)
        shutil.copytree(good, snap, symlinks=True)
        original = (snap / name).read_bytes() if (snap / name).exists() else b"{}"
        (snap / name).write_bytes(_json_mutation(rng, original))
        report.count += 1
        try:
            api.load(snap, backend="interpreter")
            from_generation_config(snap, seed=0)
            report.outcomes["opened"] += 1
        except (ValueError, OSError) as e:
            lines = [ln for ln in str(e).splitlines() if ln.strip()]
            report.outcomes["one-line-error" if len(lines) == 1 else "multi-line-error"] += 1
            if len(lines) != 1:
                report.find("json-message", input=i, file=name, detail=str(e)[:300])
        except BaseException as e:  # a traceback a user would see
            report.outcomes["escaped"] += 1
            report.find("json-escaped", input=i, file=name,
                        detail=f"{type(e).__name__}: {e}"[:300])


# --------------------------------------------------------------------------
# chains

BINARY = ("add", "sub", "mul")
UNFUSED_MAX = 400  # longest chain also compiled unfused


def chains_campaign(report: Any, count: int, seed: int, workdir: Path) -> None:
    from nanocompile.compiler import compile_program
    from nanocompile.frontend import GraphBuilder
    from nanocompile.interpreter import run_graph

    for i in range(count):
        rng = _rng(seed, i, 17)
        length = int(rng.integers(200, 3001))
        gb = GraphBuilder("chain")
        x = gb.input("x", "f32", [64])
        y = gb.input("y", "f32", [64])
        value = x
        for _ in range(length):
            op = str(rng.choice((*BINARY, "neg")))
            if op == "neg":
                value = -value
            elif op == "add":
                value = value + y
            elif op == "sub":
                value = value - y
            else:
                value = value * y
        gb.output("out", value)
        graph = gb.finish_module()
        data = {"x": rng.standard_normal(64).astype(np.float32),
                "y": (1 + rng.random(64) * 1e-3).astype(np.float32)}
        report.count += 1
        try:
            want = run_graph(graph, data, {})["out"]
            # unfused, every op is a kernel gcc compiles separately (a 3,000-op chain
            # takes gcc minutes): only the shorter chains run unfused too
            for fuse in (True, False) if length <= UNFUSED_MAX else (True,):
                got = compile_program(graph, {}, fuse=fuse).run(data)["out"]
                if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                    report.outcomes["mismatch"] += 1
                    report.find("chain-mismatch", input=i, length=length, fuse=fuse)
                    break
            else:
                report.outcomes["bitwise"] += 1
        except RecursionError as e:
            report.outcomes["recursion"] += 1
            report.find("chain-recursion", "test/py/passes/test_long_chains.py", input=i,
                        length=length, detail=str(e)[:200])
        except Exception as e:
            report.outcomes["error"] += 1
            report.find("chain-error", input=i, length=length,
                        detail=f"{type(e).__name__}: {e}"[:300])
        report.extra["longest"] = max(report.extra.get("longest", 0), length)


CAMPAIGNS: dict[str, Callable[[Any, int, int, Path], None]] = {
    "threads": threads_campaign,
    "cache": cache_campaign,
    "json": json_campaign,
    "chains": chains_campaign,
}


def run(report: Any, campaign: str, count: int, seed: int) -> None:
    """Run ``campaign`` into ``report`` (tools/fuzz.py's Report), in a fresh work
    directory with its own kernel cache."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{campaign}-") as tmp:
        work = Path(tmp)
        os.environ["NANOCOMPILE_CACHE_DIR"] = str(work / "kernels")
        CAMPAIGNS[campaign](report, count, seed, work)
    report.seconds = time.perf_counter() - start

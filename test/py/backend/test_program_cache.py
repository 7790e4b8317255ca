"""The program cache (``backend.program_cache``): a warm ``compile_program`` runs
no stage of the pipeline and gives the cold compile's program, bit for bit; a
damaged entry is a miss (the pipeline runs, the entry is replaced), never a
crash or a wrong program; and any change to what the program depends on (the
graph, the options, the arch, the compiler) is a different key."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from nanocompile import compiler
from nanocompile.backend import program_cache
from nanocompile.backend.runtime import CompiledBackend, CompiledProgram, KernelError
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import CompileTimes, Pipeline, compile_program
from nanocompile.inference.engine import Engine, F32Weights, SnapshotWeights
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.targets.arch import host_arch

PROMPT = [151644, 872, 198, 9707, 11, 1879, 0, 151645]
STEPS = [9707, 11, 1879]  # the cached steps after the prompt
LONG_AGO = 1_000_000_000.0  # a modification time in 2001


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: the libraries are built once; each test starts
    with no program entries (``fresh``)."""
    return tmp_path_factory.mktemp("program-cache")


@pytest.fixture
def fresh(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NANOCOMPILE_CACHE_DIR", str(cache))
    monkeypatch.delenv("NANOCOMPILE_SANITIZE", raising=False)
    for entry in cache.glob(f"??/*{program_cache.SUFFIX}"):
        entry.unlink()
    return cache


@pytest.fixture(scope="module")
def tiny(tiny_snapshot: Path) -> dict[str, object]:
    """The tiny model as the API compiles it: bf16 weights, last-position logits."""
    snap = Snapshot.open(tiny_snapshot)
    return {"cfg": snap.config, "snap": snap, "weights": SnapshotWeights(snap, "bf16"),
            "options": Qwen2GraphOptions(last_only=True, weights="bf16")}


def graph_of(tiny: dict, **changes: object) -> ModuleOp:
    return build_qwen2(tiny["cfg"], dataclasses.replace(tiny["options"], **changes))


def stages_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pipeline stages run from now on, in order."""
    ran: list[str] = []
    real = Pipeline._run

    def counted(self: Pipeline, stage: str) -> object:
        ran.append(stage)
        return real(self, stage)

    monkeypatch.setattr(Pipeline, "_run", counted)
    return ran


def generate(program: CompiledProgram, cfg: object) -> list[np.ndarray]:
    """The logits of the prompt and of each cached step, then the cache's keys and values."""
    engine = Engine(cfg, CompiledBackend(program), chunk=None)  # type: ignore[arg-type]
    kv = engine.new_cache(len(PROMPT) + len(STEPS))
    out = [engine.forward(PROMPT, kv)]
    out += [engine.forward([token], kv) for token in STEPS]
    return [*out, *kv.past()]


def same_bits(got: list[np.ndarray], want: list[np.ndarray]) -> bool:
    return len(got) == len(want) and all(
        g.shape == w.shape and np.array_equal(g.view(np.uint8), w.view(np.uint8))
        for g, w in zip(got, want, strict=True))


def compile_tiny(tiny: dict, graph: ModuleOp | None = None, **kwargs: Any
                 ) -> tuple[CompiledProgram, CompileTimes]:
    times = CompileTimes()
    program = compile_program(graph_of(tiny) if graph is None else graph,
                              tiny["weights"], schedule=True, times=times, **kwargs)
    return program, times


def the_entry(cache: Path) -> Path:
    entries = list(cache.glob(f"??/*{program_cache.SUFFIX}"))
    assert len(entries) == 1, entries
    return entries[0]


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_warm_compile_takes_the_cached_path_with_the_same_bits(
        fresh: Path, tiny: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cold: every stage runs and an entry is stored. Warm (a new graph built the
    same way): no stage runs, the C is the pipeline's C byte for byte, the same
    library is loaded, and the prompt, the cached steps and the cache come out
    with the bits of the cold program and of one compiled without the cache."""
    ran = stages_run(monkeypatch)
    cold, cold_times = compile_tiny(tiny)
    assert ran == ["fused", "loop", "scheduled", "c"]
    assert not cold_times.program_cache_hit
    assert cold_times.lower > 0
    entry = the_entry(fresh)
    for path in (entry, cold.library.path):  # last used in 2001 (cache_usage)
        os.utime(path, (LONG_AGO, LONG_AGO))
    ran.clear()
    warm, warm_times = compile_tiny(tiny)
    assert ran == [], "a warm compile ran the pipeline"
    for path in (entry, warm.library.path):  # a hit marks both used (gcc.mark_used)
        assert path.stat().st_mtime > LONG_AGO, path
    assert warm_times.program_cache_hit
    assert warm_times.lower == warm_times.schedule == warm_times.emit == 0
    assert warm_times.cache_hit
    assert warm_times.gcc == 0
    assert warm_times.total == pytest.approx(sum(warm_times.stages().values()))
    reference = Pipeline(graph_of(tiny), compiler.CompileOptions(schedule=True)).text("c")
    assert warm.source == cold.source == reference
    assert warm.library.path == cold.library.path
    assert warm.spec == cold.spec
    assert warm.launches == cold.launches == len(cold.program.launches())
    ran.clear()
    uncached, uncached_times = compile_tiny(tiny, cache=False)
    assert ran == ["fused", "loop", "scheduled", "c"]
    assert not uncached_times.program_cache_hit
    want = generate(uncached, tiny["cfg"])
    assert same_bits(generate(cold, tiny["cfg"]), want)
    assert same_bits(generate(warm, tiny["cfg"]), want)
    # the Loop IR, asked for, is rebuilt by the pipeline: the cold program's
    ran.clear()
    assert str(warm.program.parent_op()) == str(cold.program.parent_op())
    assert ran == ["fused", "loop", "scheduled"]


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_warm_program_reports_its_checks_and_requirements(
        fresh: Path, tiny: dict) -> None:
    """What the runtime reads from the Loop IR besides the io (the requirement
    messages, the check messages, the launches' kernels) survives the round trip:
    a bad input gets the cold program's message from the warm one."""
    cold, _ = compile_tiny(tiny)
    warm, times = compile_tiny(tiny)
    assert times.program_cache_hit
    assert warm._requirements == cold._requirements
    assert warm._checks == cold._checks
    assert cold._checks, "the tiny model has loop.check messages (the gather's id range)"
    cfg = tiny["cfg"]
    past = np.zeros((cfg.num_hidden_layers, cfg.num_key_value_heads, 0, cfg.head_dim),
                    np.float32)
    messages = []
    for program in (cold, warm):
        with pytest.raises(KernelError) as caught:
            program.run({"token_ids": np.array([cfg.vocab_size], np.int64),
                         "past_keys": past, "past_values": past})
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert any(m in messages[0] for m in cold._checks.values()), messages[0]


def _rewrite(entry: Path, edit: Callable[[dict], None], *, rehash: bool) -> None:
    document = json.loads(entry.read_text())
    edit(document)
    if rehash:
        document["sha256"] = program_cache._digest(document["payload"])
    entry.write_text(json.dumps(document))


def _directory(entry: Path) -> None:
    entry.unlink()
    entry.mkdir()
    (entry / "x").write_text("x")


def _flip(entry: Path) -> None:
    data = bytearray(entry.read_bytes())
    data[len(data) // 2] ^= 0x01
    entry.write_bytes(bytes(data))


DAMAGES: dict[str, Callable[[Path], object]] = {
    "truncated": lambda e: e.write_bytes(e.read_bytes()[: e.stat().st_size // 2]),
    "empty": lambda e: e.write_bytes(b""),
    "bit-flip": _flip,
    "not-json": lambda e: e.write_bytes(b"\xff\xfe not json"),
    "nested-too-deeply": lambda e: e.write_bytes(b"[" * 200_000),  # a RecursionError in json
    "wrong-hash": lambda e: _rewrite(e, lambda d: d.update(sha256="0" * 64), rehash=False),
    "payload-edited": lambda e: _rewrite(
        e, lambda d: d["payload"].update(launches=d["payload"]["launches"][:-1]), rehash=False),
    "other-key": lambda e: _rewrite(e, lambda d: d.update(key="1" * 64), rehash=False),
    # a well-hashed payload of the wrong shape (the hash is over what was written)
    "bad-shape": lambda e: _rewrite(e, lambda d: d["payload"].update(temps="x"), rehash=True),
    "bad-expr": lambda e: _rewrite(
        e, lambda d: d["payload"]["temps"][0].__setitem__(0, "4 *"), rehash=True),
    "directory": _directory,
}


# two kinds in the quick suite, every kind in the full one (the non-slow suite's 3-minute budget;
# "nested-too-deeply" is parse_json's nesting bomb, which checkpoint/test_jsonfile.py has quickly)
QUICK_DAMAGES = ("truncated", "wrong-hash")


@pytest.mark.parametrize("damage", [
    d if d in QUICK_DAMAGES else pytest.param(d, marks=pytest.mark.slow) for d in sorted(DAMAGES)])
def test_damaged_entry_falls_back_and_is_replaced(
        fresh: Path, tiny: dict, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    """A damaged entry is a miss: the pipeline runs, the program computes the
    bits of a cold one, and a good entry takes its place (the next compile hits)."""
    cold, _ = compile_tiny(tiny)
    want = generate(cold, tiny["cfg"])
    entry = the_entry(fresh)
    good = entry.read_bytes()
    DAMAGES[damage](entry)
    ran = stages_run(monkeypatch)
    program, times = compile_tiny(tiny)
    assert not times.program_cache_hit, f"{damage}: a damaged entry was used"
    assert ran == ["fused", "loop", "scheduled", "c"]
    assert same_bits(generate(program, tiny["cfg"]), want)
    assert entry.is_file()
    assert entry.read_bytes() == good
    _, again = compile_tiny(tiny)
    assert again.program_cache_hit
    assert not list(fresh.glob("??/.tmp-*")), "a temporary directory was left behind"


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_changes_miss_the_cache(fresh: Path, tiny: dict,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each change to what the program depends on is its own entry: the graph
    (all-position logits, or f32 weights), the options (fuse, schedule), the
    arch and the compiler's source. The control: the same compile again hits."""
    _, first = compile_tiny(tiny)
    _, same = compile_tiny(tiny)
    assert not first.program_cache_hit
    assert same.program_cache_hit
    changed = {
        "all-positions": lambda: compile_tiny(tiny, graph_of(tiny, last_only=False)),
        "f32-weights": lambda: compile_program(graph_of(tiny, weights="f32"),
                                               F32Weights(tiny["snap"]), schedule=True),
        "unfused": lambda: compile_tiny(tiny, fuse=False),
        "unscheduled": lambda: compile_program(graph_of(tiny), tiny["weights"]),
    }
    for name, run in changed.items():
        before = set(fresh.glob(f"??/*{program_cache.SUFFIX}"))
        run()
        new = set(fresh.glob(f"??/*{program_cache.SUFFIX}")) - before
        assert len(new) == 1, f"{name}: no new entry (it hit another's)"
    if host_arch().name != "scalar":
        monkeypatch.setenv("NANOCOMPILE_ARCH", "scalar")
        _, other_arch = compile_tiny(tiny)
        assert not other_arch.program_cache_hit
        monkeypatch.delenv("NANOCOMPILE_ARCH")
    monkeypatch.setattr(program_cache, "compiler_source_hash", lambda: "another compiler")
    _, other_compiler = compile_tiny(tiny)
    assert not other_compiler.program_cache_hit


def test_program_key_covers_each_part() -> None:
    """Every argument of the key, and the CPU and the compiler, change it."""
    base = {"graph_text": "g", "fuse": True, "schedule": True, "arch": "a"}
    key = program_cache.program_key(**base)  # type: ignore[arg-type]
    assert key == program_cache.program_key(**base)  # type: ignore[arg-type]
    for name, value in (("graph_text", "h"), ("fuse", False), ("schedule", False),
                        ("arch", "b")):
        assert program_cache.program_key(**{**base, name: value}) != key, name  # type: ignore[arg-type]


def test_program_key_covers_the_xdsl_it_runs_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another xDSL (its passes, printer and parser are the compiler's code too) is
    another key, even with the compiler's own files unchanged."""
    import importlib.metadata

    base = {"graph_text": "g", "fuse": True, "schedule": True, "arch": "a"}
    assert program_cache.ir_library_version() == importlib.metadata.version("xdsl")
    key = program_cache.program_key(**base)  # type: ignore[arg-type]
    monkeypatch.setattr(program_cache, "ir_library_version", lambda: "0.0.1")
    assert program_cache.program_key(**base) != key  # type: ignore[arg-type]


def test_the_compilers_hash_covers_its_c_runtime(tmp_path: Path) -> None:
    """The key's compiler part hashes the C the compiler pastes into its output
    (the thread pool's) besides the ``.py`` files, and no bytecode: a changed
    ``pool.c`` once left the cache serving programs with the pool before it."""
    package = Path(program_cache.__file__).resolve().parent.parent
    names = {str(p.relative_to(package)) for p in program_cache.source_files()}
    assert "targets/c_runtime/pool.c" in names
    assert "backend/program_cache.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    (tmp_path / "runtime").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "runtime" / "pool.c").write_text("int f(void);\n")
    before = program_cache.source_hash(tmp_path)
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert program_cache.source_hash(tmp_path) == before
    (tmp_path / "runtime" / "pool.c").write_text("int g(void);\n")
    changed = program_cache.source_hash(tmp_path)
    assert changed != before
    (tmp_path / "runtime" / "pool.c").rename(tmp_path / "pool.c")  # the same bytes elsewhere
    assert program_cache.source_hash(tmp_path) not in (before, changed)


def test_unwritable_cache_still_compiles(fresh: Path, tiny: dict,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that fails (a read-only disk) costs only the next warm start."""
    def fail(*args: object, **kwargs: object) -> Path:
        raise PermissionError("read-only")

    monkeypatch.setattr(program_cache, "store_entry", fail)
    program, times = compile_tiny(tiny)
    assert not times.program_cache_hit
    assert not list(fresh.glob(f"??/*{program_cache.SUFFIX}"))
    assert program.launches > 0

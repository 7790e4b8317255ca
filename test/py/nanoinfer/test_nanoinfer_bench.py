"""bench/nanoinfer_engine.py: the nanoinfer-f32 and nanoinfer-int8 engines of ``bench run``.

Without a checkout they are skipped with one line; with one (here the test
suite's stand-in, found through ``NANOINFER_PATH``) they are built, run and
generate the interpreter's greedy tokens. The stand-in has no int8 engine, so
``NANOINFER_INT8`` names its f32 constructor: that checks the plumbing of the
entry point, not int8 arithmetic.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _adapter import REPO, STANDIN_ROOT, standin_environ
from _differential import Side

import bench
from bench import engines, nanoinfer_engine
from bench.engines import EngineUnavailable, Shared
from bench.run import timed_generation

pytestmark = pytest.mark.nanoinfer

STANDIN_FACTORY = "nanoinfer.model:Qwen2.from_model_dir"


def test_engines_are_skipped_with_one_line_without_a_checkout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NANOINFER_PATH", str(tmp_path))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = bench.main(["run", "--smoke", "--engines", "nanoinfer-f32,nanoinfer-int8,numpy",
                           "--threads", "1", "--rounds", "1", "--decode-tokens", "2",
                           "--no-record"])
    assert code == 0
    _, reason = nanoinfer_engine.locate_checkout()
    for name in ("nanoinfer-f32", "nanoinfer-int8"):
        lines = [line for line in out.getvalue().splitlines() if name in line]
        assert lines == [f"  skipping {name}: {reason}"]
    assert "\nnumpy " in out.getvalue()


def test_default_run_has_them_only_when_they_can_be_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NANOINFER_PATH", str(tmp_path))
    monkeypatch.setenv("NANOINFER_INT8", STANDIN_FACTORY)
    assert not set(engines.default_engine_names()) & set(engines.NANOINFER_ENGINE_NAMES)
    monkeypatch.setenv("NANOINFER_PATH", str(STANDIN_ROOT))
    untuned = tuple(n for n in engines.ALL_ENGINE_NAMES if n not in engines.TUNED_ENGINE_NAMES)
    assert engines.default_engine_names() == untuned  # the -tuned ones: by name only
    monkeypatch.delenv("NANOINFER_INT8")
    assert engines.default_engine_names() == untuned[:-1]
    assert engines.ALL_ENGINE_NAMES[-1] == "nanoinfer-int8"


def test_int8_needs_its_entry_point(standin: Side, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NANOINFER_INT8", raising=False)
    with pytest.raises(EngineUnavailable) as info:
        nanoinfer_engine.build_model(standin.dir, "int8")
    assert str(info.value) == nanoinfer_engine.INT8_MISSING
    monkeypatch.setenv("NANOINFER_INT8", "nanoinfer.model")
    with pytest.raises(ValueError, match="expected module:attr"):
        nanoinfer_engine.build_model(standin.dir, "int8")


@pytest.mark.parametrize("name", ["nanoinfer-f32", "nanoinfer-int8"])
def test_engine_generates_the_interpreters_tokens(standin: Side, name: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NANOINFER_INT8", STANDIN_FACTORY)
    model = engines.ENGINES[name].build(Shared(standin.interp.snapshot))
    ids = standin.interp.tokenizer.encode("def fibonacci(n):")
    tokens = timed_generation(model, ids, 8).tokens
    assert tokens == standin.interp.engine.greedy(ids, 8)
    details = model.details()  # type: ignore[attr-defined]
    assert details["checkout"] == str(STANDIN_ROOT.resolve())
    assert details["kind"] == name.removeprefix("nanoinfer-")


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[int] = []

    def new_cache(self, capacity: int) -> list[int]:
        return []

    def set_threads(self, n: int) -> None:
        self.calls.append(n)


def test_int8_threads_follow_the_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """``set_threads`` gets ``NANOCOMPILE_THREADS`` (set per slot) when it changes."""
    inner = _Recorder()
    model = nanoinfer_engine.NanoinferModel(inner, "int8", STANDIN_ROOT, inner.set_threads)
    for threads in ("2", "2", "1"):
        monkeypatch.setenv("NANOCOMPILE_THREADS", threads)
        model.new_state(4)
    monkeypatch.delenv("NANOCOMPILE_THREADS")
    model.new_state(4)
    assert inner.calls == [2, 1]


def _run(args: list[str], env: dict[str, str]) -> Any:
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


@pytest.mark.slow  # a fresh `python -m bench run` process (~3 s)
def test_bench_run_with_a_checkout_end_to_end(tmp_path: Path) -> None:
    """``python -m bench run`` in a fresh process that finds the stand-in: both engines
    are in the default engine list, run at 1 and 2 threads, and agree with the
    interpreter."""
    env = standin_environ({k: v for k, v in os.environ.items() if k != "NANOINFER_INT8"})
    env |= {"NANOINFER_INT8": STANDIN_FACTORY, "NANOCOMPILE_HOME": str(tmp_path)}
    listed = _run(["-c", "from bench.engines import ENGINE_NAMES; print(*ENGINE_NAMES)"], env)
    assert listed.stdout.split()[-2:] == ["nanoinfer-f32", "nanoinfer-int8"], listed.stderr
    done = _run(["-m", "bench", "run", "--smoke", "--engines",
                 "interp,nanoinfer-f32,nanoinfer-int8", "--threads", "1,2", "--rounds", "1",
                 "--decode-tokens", "4", "--no-record"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for name in ("nanoinfer-f32", "nanoinfer-int8"):
        work = [line.split() for line in lines
                if line.startswith(name) and line.endswith(" interp")]
        assert len(work) == 2, done.stdout  # one work row per thread count
        assert all(cells[-2] == "4/4" for cells in work), done.stdout

"""backend/gcc.py's precompiled header: the generated C's system headers (and
``<immintrin.h>``) parsed once per cache, not once per library.

Claims: a library built through the precompiled header is the same bytes as
one built from the source as it is (generated C of a plain, a parallel and a
vectorized kernel); the rewritten source keeps every line number; a source
without the generated prefix builds as before; a corrupt precompiled header
falls back to the source as it is (same bytes); a compile error is reported
on the source's own lines; a killed builder's directory is swept.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _schedule_helpers import ROWS_KERNEL, only_kernel, parse_module

from nanocompile.backend import gcc
from nanocompile.dialects import loop, sched
from nanocompile.passes.apply_schedule import apply_directives
from nanocompile.targets.c import CEmitter

_ROWS = ROWS_KERNEL

_ADD = """builtin.module {
  loop.kernel @add(%0: !loop.ptr<f32>, %1: !loop.ptr<f32>, %2: !loop.ptr<f32>)
      syms ["n"] access ["w", "r", "r"]
      footprints [#loop.fp<[n], [1]>, #loop.fp<[n], [1]>, #loop.fp<[n], [1]>] {
    %n = loop.sym "n"
    %c0 = arith.constant 0 : index
    loop.for "d0" %j = %c0 to %n {
      %a = loop.load %1[%j] strides [1] : f32
      %b = loop.load %2[%j] strides [1] : f32
      %y = arith.addf %a, %b : f32
      loop.store %y, %0[%j] strides [1] : f32
    }
  }
}"""

SCHEDULES = {"plain": (_ROWS, []), "parallel": (_ROWS, [sched.Parallel("d0")]),
             "vector": (_ADD, [sched.Vectorize("d0", 8), sched.Parallel("d0")])}


def _generated(schedule: str) -> str:
    text, directives = SCHEDULES[schedule]
    scheduled: loop.KernelOp = apply_directives(only_kernel(parse_module(text)), directives)
    module = parse_module("builtin.module {}")
    module.body.block.add_op(scheduled)
    return CEmitter().emit_module(module)


@pytest.fixture
def no_header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcc, "precompiled_header", lambda *args: None)


def _first_lines_compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first line of every C file gcc is asked to compile, from now on."""
    seen: list[str] = []
    run = gcc._run

    def spy(command: list[str], cwd: Path | None = None):  # type: ignore[no-untyped-def]
        c_files = [a for a in command if a.endswith(".c")]
        if c_files and cwd is not None:
            seen.append((cwd / c_files[0]).read_text().split("\n", 1)[0])
        return run(command, cwd)

    monkeypatch.setattr(gcc, "_run", spy)
    return seen


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_the_header_builds_the_same_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            schedule: str) -> None:
    source = _generated(schedule)
    seen = _first_lines_compiled(monkeypatch)
    with_header = gcc.compile_library(source, cache_dir=tmp_path / "a")
    assert seen == [f'#include "{next((tmp_path / "a" / gcc.PCH_DIR).glob("*/nc_pch.h"))}"']
    assert (with_header.path.with_suffix(".c")).read_text() == source  # the cache keeps it
    monkeypatch.setattr(gcc, "precompiled_header", lambda *args: None)
    plain = gcc.compile_library(source, cache_dir=tmp_path / "b")
    assert seen[-1] == source.split("\n", 1)[0]
    assert with_header.key == plain.key
    assert with_header.path.read_bytes() == plain.path.read_bytes()
    assert not list((tmp_path / "b").glob(f"{gcc.PCH_DIR}/*"))


def test_the_rewritten_source_keeps_every_line_number(tmp_path: Path) -> None:
    source = _generated("vector")
    found = gcc.system_prefix(source)
    assert found is not None
    prefix, n = found
    assert source.startswith(prefix)
    assert "#include <math.h>\n" in prefix
    assert not source.split("\n")[n].startswith("#include")  # the prefix ends at the code
    rewritten = gcc.with_header(source, tmp_path / "h.h")
    old, new = source.split("\n"), rewritten.split("\n")
    assert len(new) == len(old)
    assert new[0] == f'#include "{tmp_path / "h.h"}"'
    assert new[1:n] == [""] * (n - 1)
    assert new[n:] == old[n:]


def test_a_source_without_the_prefix_builds_as_before(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    source = "int add(int a, int b) { return a + b; }\n"
    assert gcc.system_prefix(source) is None
    assert gcc.system_prefix("/* only a comment */\n" + source) is None
    seen = _first_lines_compiled(monkeypatch)
    assert gcc.compile_library(source, cache_dir=tmp_path).load().add(2, 40) == 42
    assert seen == [source.rstrip("\n")]
    assert not (tmp_path / gcc.PCH_DIR).exists()


def test_a_corrupt_header_falls_back_to_the_source(tmp_path: Path, no_header: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    plain = gcc.compile_library(_generated("parallel"), cache_dir=tmp_path / "plain")
    monkeypatch.undo()
    cache = tmp_path / "cache"
    gcc.compile_library(_generated("plain"), cache_dir=cache)
    (built,) = (cache / gcc.PCH_DIR).glob("*/nc_pch.h.gch")
    built.write_bytes(b"not a precompiled header" * 100)
    again = gcc.compile_library(_generated("parallel"), cache_dir=cache)
    assert again.path.read_bytes() == plain.path.read_bytes()


def test_a_compile_error_is_reported_on_the_sources_lines(tmp_path: Path) -> None:
    source = _generated("plain")
    lines = source.split("\n")
    broken = "\n".join([*lines[:-1], "int broken(void) { return missing; }", lines[-1]])
    line = len(lines)
    with pytest.raises(gcc.CompileError) as info:
        gcc.compile_library(broken, name="broken", cache_dir=tmp_path)
    assert f":{line}:" in str(info.value)
    assert f">{line:6d} | int broken(void) {{ return missing; }}" in str(info.value)
    assert info.value.source_path is not None
    assert info.value.source_path.read_text() == broken
    assert not list((tmp_path / gcc.PCH_DIR).glob(f"{gcc.TMP_PREFIX}*"))


def test_a_killed_builders_header_directory_is_swept(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)  # a pid no process has now
    dead = tmp_path / gcc.PCH_DIR / f"{gcc.TMP_PREFIX}pch-{pid}-x1y2"
    live = tmp_path / gcc.PCH_DIR / f"{gcc.TMP_PREFIX}pch-{os.getpid()}-a1b2"
    for d in (dead, live):
        d.mkdir(parents=True)
        (d / gcc.PCH_HEADER).write_text("/* half built */\n")
    monkeypatch.setattr(gcc, "_SWEPT", set())
    gcc.compile_library("int x;\n", cache_dir=tmp_path)
    assert not dead.exists()
    assert live.exists()


def test_a_header_gcc_cannot_build_is_tried_once(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gcc, "PCH_HOISTED", "#include <no_such_header_here.h>\n")
    monkeypatch.setattr(gcc, "_PCH_FAILED", set())
    headers_built: list[list[str]] = []
    run = gcc._run

    def spy(command: list[str], cwd: Path | None = None):  # type: ignore[no-untyped-def]
        if "c-header" in command:
            headers_built.append(command)
        return run(command, cwd)

    monkeypatch.setattr(gcc, "_run", spy)
    for schedule in ("plain", "parallel"):
        lib = gcc.compile_library(_generated(schedule), cache_dir=tmp_path)
        assert lib.load() is not None
    assert len(headers_built) == 1
    assert not list((tmp_path / gcc.PCH_DIR).glob("*/nc_pch.h"))


def test_a_cache_path_an_include_cannot_name_builds_without_the_header(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / 'quote"d'
    seen = _first_lines_compiled(monkeypatch)
    source = _generated("plain")
    gcc.compile_library(source, cache_dir=cache)
    assert seen == [source.split("\n", 1)[0]]

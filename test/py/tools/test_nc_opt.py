"""nc-opt as a user meets it: help, located diagnostics, no tracebacks."""

import subprocess
import sys
from pathlib import Path

import pytest

NC_OPT = [sys.executable, "-c", "from nanocompile.tools.nc_opt import main; main()"]


def _run(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NC_OPT, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_help_lists_passes_and_targets() -> None:
    proc = _run(["--help"])
    assert proc.returncode == 0
    assert "--passes" in proc.stdout or "-p" in proc.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('graph.func @f {\n  %x = graph.input "x" : !graph.tensor<[seq, 896], f32\n}\n',
         "'>' expected"),
        ('graph.func @f {\n  %x = graph.frobnicate "x" : !graph.tensor<[seq], f32>\n}\n',
         "graph.frobnicate is not registered"),
        ('graph.func @f {\n  %x = graph.input "x" : !graph.tensor<[seq], f64>\n}\n',
         "unknown dtype 'f64'"),
        ("this is not mlir\n", "error"),
    ],
)
def test_bad_input_is_located_and_has_no_traceback(tmp_path: Path, text: str,
                                                   message: str) -> None:
    src = tmp_path / "bad.mlir"
    src.write_text(text)
    proc = _run([str(src)])
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert message in proc.stderr
    assert f"{src}:" in proc.stderr  # file:line:col


def test_verifier_error_is_located(tmp_path: Path) -> None:
    src = tmp_path / "bad.mlir"
    src.write_text(
        "graph.func @f {\n"
        '  %x = graph.input "x" : !graph.tensor<[4], i64>\n'
        "  %y = graph.exp %x : !graph.tensor<[4], i64>\n"
        '  graph.return "y" = %y : !graph.tensor<[4], i64>\n'
        "}\n"
    )
    proc = _run([str(src)])
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"{src}:3:3" in proc.stderr
    assert "must be a float tensor" in proc.stderr


def test_unknown_pass_and_missing_file() -> None:
    proc = _run(["-p", "no-such-pass"], stdin="")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "no-such-pass" in proc.stderr
    proc = _run(["/definitely/not/here.mlir"])
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "No such file" in proc.stderr


def test_round_trip_via_stdin() -> None:
    text = ('graph.func @f {\n  %x = graph.input "x" : !graph.tensor<[seq, 896], f32>\n'
            '  graph.return "x" = %x : !graph.tensor<[seq, 896], f32>\n}\n')
    first = _run([], stdin=text)
    assert first.returncode == 0, first.stderr
    second = _run([], stdin=first.stdout)
    assert second.stdout == first.stdout

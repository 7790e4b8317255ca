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


@pytest.mark.parametrize("spec", [",,", "fuse{", "fuse,,dce", "a b"])
def test_malformed_pipeline_is_a_diagnostic(spec: str) -> None:
    """xDSL's ArgSpecParseError derives from BaseException (issue 14, point 7)."""
    proc = _run(["-p", spec], stdin="")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("nc-opt: error: ")
    assert "pass pipeline" in proc.stderr


def test_malformed_target_spec_is_a_diagnostic() -> None:
    proc = _run(["-t", ",,"], stdin="")
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "nc-opt" in proc.stderr


def test_only_the_projects_targets_are_listed() -> None:
    """xDSL's llvm, mps and *-asm targets cannot print Graph or Loop IR (issue 14,
    point 9): nc-opt offers mlir and nanocompile's own targets only."""
    from nanocompile.targets import get_all_targets

    proc = _run(["--help"])
    listed = proc.stdout.split("Available targets are:")[1].split("-o OUTPUT_FILE")[0]
    names = "".join(listed.split()).split(",")
    assert sorted(names) == sorted(["mlir", *get_all_targets()])
    refused = _run(["-t", "llvm"], stdin="")
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr
    assert "invalid choice: 'llvm'" in refused.stderr


def _func(body: str) -> str:
    return "graph.func @f {\n" + body + "}\n"


OUT_OF_RANGE = [
    (_func('  %c = graph.const #graph.elements<i8: [1, 300]> : !graph.tensor<[2], i8>\n'
           '  graph.return "c" = %c : !graph.tensor<[2], i8>\n'),
     "2:", "expected i8 values in [-128, 127], got 300"),
    (_func('  %c = graph.const #graph.elements<i64: [1.0e20]> : !graph.tensor<[1], i64>\n'
           '  graph.return "c" = %c : !graph.tensor<[1], i64>\n'),
     "2:", "expected whole i64 values"),
    (_func('  %c = graph.const #graph.elements<i32: [2.5]> : !graph.tensor<[1], i32>\n'
           '  graph.return "c" = %c : !graph.tensor<[1], i32>\n'),
     "2:", "expected whole i32 values"),
    (_func('  %x = graph.input "x" : !graph.tensor<[9223372036854775808], f32>\n'
           '  graph.return "x" = %x : !graph.tensor<[9223372036854775808], f32>\n'),
     "2:", "expected shape coefficients below 2**63 in magnitude"),
    (_func('  %x = graph.input "x" : !graph.tensor<[-1], f32>\n'
           '  graph.return "x" = %x : !graph.tensor<[-1], f32>\n'),
     "2:", "expected dims that can be non-negative, got -1"),
    (_func('  %x = graph.input "x" : !graph.tensor<[seq], i64>\n'
           '  %y = graph.fused "elementwise" (%x) : (!graph.tensor<[seq], i64>) -> '
           '!graph.tensor<[seq], i64> {\n'
           '  ^bb0(%a: !graph.tensor<[seq], i64>):\n'
           '    %n = graph.dim past : !graph.tensor<[], i64>\n'
           '    %r = graph.reshape %n : !graph.tensor<[], i64> -> !graph.tensor<[1], i64>\n'
           '    %b = graph.broadcast %r : !graph.tensor<[1], i64> -> !graph.tensor<[seq], i64>\n'
           '    %e = graph.add %a, %b : !graph.tensor<[seq], i64>\n'
           '    graph.yield %e : !graph.tensor<[seq], i64>\n'
           '  }\n'
           '  graph.return "y" = %y : !graph.tensor<[seq], i64>\n'),
     "5:5", "graph.dim: symbol 'past'"),
]


# the non-slow suite's 3-minute budget; the full suite runs it: the whole-i64 and
# whole-i32 constants (the i8 one stays: the same path; test_graph_dialect.py's
# test_const_values_must_fit_their_dtype checks every dtype's message in-process)
SLOW_OUT_OF_RANGE = ("expected whole i64 values", "expected whole i32 values")


@pytest.mark.parametrize(("text", "where", "message"), [
    pytest.param(*case, marks=pytest.mark.slow) if case[2] in SLOW_OUT_OF_RANGE else case
    for case in OUT_OF_RANGE])
def test_values_dims_and_symbols_the_c_cannot_hold_are_rejected(tmp_path: Path, text: str,
                                                                where: str,
                                                                message: str) -> None:
    """Issue 14, point 9: these reached NumPy's OverflowError ("internal error"),
    INT64_C(9223372036854775808) in the C, or a Loop-IR error after lowering."""
    src = tmp_path / "bad.mlir"
    src.write_text(text)
    for passes in ([], ["-p", "fold-constants,fuse,lower-graph-to-loop", "-t", "c"]):
        proc = _run([str(src), *passes])
        assert proc.returncode == 1, proc.stdout[-300:]
        assert "Traceback" not in proc.stderr
        assert "internal error" not in proc.stderr
        assert message in proc.stderr
        assert f"{src}:{where}" in proc.stderr or not where

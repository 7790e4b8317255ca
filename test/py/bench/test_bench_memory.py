"""``python -m bench memory``: the command line, the record, and the peak-RSS reading.

The command's child (``nanocompile generate`` on the full-size model) takes
seconds and gigabytes, so these tests stub it (``memory.run_child``) and
check what is built around it: the command line, the checkpoint and f32 sizes
(against the safetensors package's own reading of the files), the record.
How a peak is read is checked on a real child that holds a known amount of
memory. No speed and no size of nanocompile is asserted.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]

import bench  # noqa: E402
from bench import memory, results  # noqa: E402

GIB = 2**30


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from nanocompile.checkpoint.synth import write_synthetic_snapshot

    return write_synthetic_snapshot(tmp_path_factory.mktemp("model") / "tiny", tiny=True,
                                    seed=0, tokenizer=False)


class FakeChild:
    """Stands in for ``memory.run_child``: records the command, returns set figures."""

    def __init__(self, **overrides: Any) -> None:
        self.commands: list[list[str]] = []
        self.fields: dict[str, Any] = {
            "returncode": 0, "seconds": 1.5, "maxrss_kib": 3 * 2**20,
            "maxrss_kib_before": 0, "time_maxrss_kib": 3 * 2**20 - 8, "stdout": "text",
            "stderr": "nanocompile: widening...\nnanocompile: 3 tokens generated\n"} | overrides

    def __call__(self, cmd: list[str]) -> memory.Child:
        self.commands.append(cmd)
        return memory.Child(**self.fields)


def _main(argv: list[str], monkeypatch: pytest.MonkeyPatch, child: FakeChild) -> int:
    monkeypatch.setattr(memory, "run_child", child)
    return bench.main(["memory", *argv])


def test_record_shape_and_sizes(tiny: Path, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    from safetensors import safe_open

    child = FakeChild()
    path = tmp_path / "r.jsonl"
    code = _main(["--model", str(tiny), "--tokens", "3", "--prompt", "-dash first",
                  "--results", str(path)], monkeypatch, child)
    out = capsys.readouterr().out
    assert code == 0
    [cmd] = child.commands
    assert Path(cmd[0]).name == "nanocompile"
    assert cmd[1] == "generate"
    assert cmd[cmd.index("--max-tokens") + 1] == "3"
    assert cmd[cmd.index("--model") + 1] == str(tiny)
    assert {"--greedy", "--ignore-eos"} <= set(cmd)
    assert cmd[-2:] == ["--", "-dash first"]  # a prompt starting with '-' stays the prompt

    [record] = results.load_records(path)
    assert record["kind"] == "memory"
    assert record["machine"]["kind"] in {"avx512", "avx2-only", "no-avx2"}
    payload = record["payload"]
    files = sorted(tiny.glob("*.safetensors"))
    parameters = 0
    for f in files:
        with safe_open(str(f), framework="numpy") as st:
            parameters += sum(math.prod(st.get_slice(k).get_shape()) for k in st.keys())
    model = payload["model"]
    assert model["checkpoint_bytes"] == sum(f.stat().st_size for f in files)
    assert model["parameters"] == parameters
    assert model["f32_weights_bytes"] == 4 * parameters
    assert payload["peak_rss_bytes"] == 3 * GIB  # KiB from getrusage, as bytes
    assert payload["time_peak_rss_bytes"] == 3 * GIB - 8 * 1024
    assert payload["peak_beyond_checkpoint_and_f32_bytes"] == (
        3 * GIB - model["checkpoint_bytes"] - 4 * parameters)
    assert payload["stderr_tail"][-1] == "nanocompile: 3 tokens generated"
    assert payload["measurements"] == [{
        "engine": "nanocompile-generate", "metric": "peak_rss_bytes", "unit": "bytes",
        "threads": None, "median": 3 * GIB, "min": 3 * GIB, "n": 1, "values": [3 * GIB]}]
    assert "peak RSS of generate:        3.221 GB (3.00 GiB)" in out
    assert f"appended a memory record to {path}" in out


def test_no_record_appends_nothing(tiny: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    child = FakeChild(time_maxrss_kib=None)
    path = tmp_path / "r.jsonl"
    assert _main(["--model", str(tiny), "--results", str(path), "--no-record"],
                 monkeypatch, child) == 0
    out = capsys.readouterr().out
    assert not path.exists()
    assert "not present" in out  # no /usr/bin/time figure: said, not invented
    [cmd] = child.commands
    assert cmd[cmd.index("--max-tokens") + 1] == str(memory.DEFAULT_TOKENS)
    assert cmd[-1] == memory.DEFAULT_PROMPT


@pytest.mark.parametrize(("fields", "message"), [
    ({"returncode": 1, "stderr": "a\nnanocompile: error: no such thing\n"},
     "nanocompile generate exited with 1: nanocompile: error: no such thing"),
    ({"maxrss_kib": 100, "maxrss_kib_before": 100}, "an earlier child of this process"),
])
def test_a_failed_or_unreadable_child_is_one_line(fields: dict[str, Any], message: str,
                                                  tiny: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.jsonl"
    assert _main(["--model", str(tiny), "--results", str(path)], monkeypatch,
                 FakeChild(**fields)) == 1
    err = capsys.readouterr().err
    assert err.startswith("bench memory: error:")
    assert message in err
    assert err.count("\n") == 1
    assert not path.exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--tokens", "0"], "--tokens must be in 1..4096"),
    (["--tokens", "5000"], "--tokens must be in 1..4096"),
    (["--prompt", "  "], "--prompt must not be empty"),
    (["--model", "/nonexistent/dir"], "not a directory"),
])
def test_bad_arguments_are_one_line(argv: list[str], message: str,
                                    monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    child = FakeChild()
    assert _main([*argv, "--no-record"], monkeypatch, child) == 1
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1
    assert child.commands == []  # refused before anything ran


def test_gnu_time_output_is_read_from_its_last_line(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_text("Command exited with non-zero status 1\n12345\n")
    assert memory._time_maxrss(path) == 12345
    path.write_text("garbage\n")
    assert memory._time_maxrss(path) is None
    assert memory._time_maxrss(tmp_path / "missing") is None


def test_run_child_reads_the_peak_of_a_child_holding_known_memory() -> None:
    """A child that holds 256 MiB of written bytes peaks at >= 256 MiB (and not at
    gigabytes). Run in a fresh interpreter: RUSAGE_CHILDREN is a maximum over every
    child the process ever waited for, and a pytest worker has had others."""
    hold = "import sys; b = b'x' * (256 << 20); sys.exit(0)"
    script = ("import json, sys; from bench import memory; "
              f"c = memory.run_child([sys.executable, '-c', {hold!r}]); "
              "print(json.dumps([c.returncode, c.maxrss_kib, c.maxrss_kib_before, "
              "c.time_maxrss_kib]))")
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=120, check=True)
    code, peak, before, time_peak = json.loads(out.stdout)
    assert code == 0
    assert before < 256 * 1024 <= peak < 1024 * 1024  # KiB
    if memory.GNU_TIME.is_file():
        assert 256 * 1024 <= time_peak < 1024 * 1024
    else:
        assert time_peak is None

"""The command line for scripts (issue 21): ``--json``, prompts from a file or stdin,
``--stop``, ``--threads``, the snapshot's sampling defaults, the context check
before the load, and the small fixes (the subcommand's help, "1 token").

Most runs call ``nanocompile.cli.main`` in this process (the tiny model on the
interpreter: a subprocess per run would cost a Python start and the imports
each time); what needs a fresh process (the kernel pool reads its thread
count once per process) runs as one. The expected texts come from the Python
API with the sampling written out here.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from nanocompile.api import Model, load
from nanocompile.cli import main
from nanocompile.inference.sampling import SamplingParams

PROMPT = "The capital of France is"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """``cli(*argv, stdin=b"")``: run the command line here and collect its output."""
    monkeypatch.delenv("NANOCOMPILE_TRACEBACK", raising=False)

    def run(*argv: str | Path, stdin: bytes = b"") -> Run:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        with pytest.raises(SystemExit) as exit_info:
            main([str(a) for a in argv])
        out = capsys.readouterr()
        code = exit_info.value.code
        if isinstance(code, str):  # sys.exit("message"): printed on stderr, status 1
            return Run(1, out.out, out.err + code + "\n")
        return Run(code or 0, out.out, out.err)

    return run


@pytest.fixture(scope="module")
def model(tiny_snapshot: Path) -> Model:
    return load(tiny_snapshot, backend="interpreter")


def tiny(tiny_snapshot: Path, *argv: str) -> list[str]:
    return [*argv, "--model", str(tiny_snapshot), "--backend", "interpreter"]


def closing(run: Run) -> str:
    return run.stderr.splitlines()[-1]


# --------------------------------------------------------------------------
# --json


def test_json_is_one_object(cli, tiny_snapshot: Path, model: Model) -> None:  # type: ignore[no-untyped-def]
    run = cli(*tiny(tiny_snapshot, "generate", PROMPT, "--json", "--greedy", "--max-tokens", "5"))
    assert run.code == 0, run.stderr
    assert run.stdout.count("\n") == 1
    body = json.loads(run.stdout)
    want = model.generate(PROMPT, max_tokens=5)
    assert body["text"] == want.text
    assert body["token_ids"] == want.token_ids
    assert body["prompt_tokens"] == want.prompt_tokens == len(model.tokenizer.encode(PROMPT))
    assert body["stop_reason"] == "max_tokens"
    assert set(body["timings"]) == {"prefill_seconds", "decode_seconds", "decode_steps",
                                    "decode_tok_per_s"}
    assert body["timings"]["decode_steps"] == 4
    assert body["sampling"]["greedy"] is True
    assert body["backend"] == "interpreter"
    assert body["threads"] is None  # the interpreter has no kernel pool
    assert run.stderr == ""  # no closing line, no progress: the object says it all


@pytest.mark.slow  # ~2 s: loads the compiled program
def test_compile_json(cli, tiny_snapshot: Path, model: Model) -> None:  # type: ignore[no-untyped-def]
    run = cli("compile", "--model", tiny_snapshot, "--json")
    assert run.code == 0, run.stderr
    report = json.loads(run.stdout)
    want = model.compile_report()
    for key in ("launches_per_step", "distinct_kernels", "bytes_per_step",
                "bytes_per_decode_step", "weights"):
        assert report[key] == want[key], key
    assert Path(report["library"]).is_file()


# --------------------------------------------------------------------------
# the prompt from a file or stdin


@pytest.mark.slow  # ~3 s: three runs on the interpreter
def test_prompt_from_a_file_exactly_as_it_is(cli, tiny_snapshot: Path, model: Model,  # type: ignore[no-untyped-def]
                                             tmp_path: Path) -> None:
    text = "line one\nline two\n"
    path = tmp_path / "prompt.txt"
    path.write_text(text, encoding="utf-8")
    want = model.generate(text, max_tokens=3)
    for argv, stdin in ((["-f", str(path)], b""), (["-f", "-"], text.encode()),
                        (["-"], text.encode())):
        run = cli(*tiny(tiny_snapshot, "generate", *argv, "--json", "--greedy",
                        "--max-tokens", "3"), stdin=stdin)
        assert run.code == 0, (argv, run.stderr)
        body = json.loads(run.stdout)
        assert body["prompt_tokens"] == want.prompt_tokens, argv
        assert body["text"] == want.text, argv


@pytest.mark.slow  # ~1 s, and the fast suite has no second to spare: its 3 minutes are full
def test_prompt_file_bytes_that_are_not_utf8(cli, tiny_snapshot: Path, model: Model,  # type: ignore[no-untyped-def]
                                             tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("café".encode("latin-1"))
    run = cli(*tiny(tiny_snapshot, "generate", "-f", str(path), "--json", "--greedy",
                    "--max-tokens", "2"))
    assert run.code == 0, run.stderr
    assert (f"nanocompile: note: {path} is not valid UTF-8: 1 undecodable byte replaced by "
            "U+FFFD") in run.stderr.splitlines()
    assert json.loads(run.stdout)["text"] == model.generate("caf\ufffd", max_tokens=2).text


@pytest.mark.parametrize(("argv", "message"), [
    (["generate", "hi", "-f", "x.txt"], "give PROMPT or -f FILE, not both"),
    (["generate"], "no prompt: give PROMPT, - (read stdin) or -f FILE"),
    (["generate", "-f", "{tmp}/absent.txt"], "absent.txt: no such file"),
    (["generate", "hi", "--stop", ""], "stop strings must be non-empty strings"),
    (["generate", "hi", "--threads", "0"], "expected a positive integer, got 0"),
    (["generate", "hi", "--threads", "300"], "expected a thread count in 1..256, got 300"),
    (["generate", "hi", "--context", "40000"],
     "--context must be in [2, 32768] (max_position_embeddings), got 40000"),
    (["serve", "--port", "70000"], "expected a port in 0..65535, got 70000"),
])
def test_script_errors_are_one_line(cli, tiny_snapshot: Path, tmp_path: Path,  # type: ignore[no-untyped-def]
                                    argv: list[str], message: str) -> None:
    run = cli(*[a.format(tmp=tmp_path) for a in argv], "--model", tiny_snapshot)
    assert run.code != 0
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("nanocompile: error: ")
    assert message in lines[0]
    assert run.stdout == ""


# --------------------------------------------------------------------------
# --stop


@pytest.mark.slow  # ~1.5 s: two generations (the fast suite's 3 minutes are full)
def test_stop_strings_cut_the_output(cli, tiny_snapshot: Path, model: Model) -> None:  # type: ignore[no-untyped-def]
    full = model.generate(PROMPT, max_tokens=12).text
    stop = full[len(full) // 2:len(full) // 2 + 2]
    assert stop.strip(), full
    run = cli(*tiny(tiny_snapshot, "generate", PROMPT, "--greedy", "--max-tokens", "12",
                    "--stop", "never there", "--stop", stop))
    assert run.code == 0, run.stderr
    assert run.stdout == full[:full.index(stop)] + "\n"
    assert "(stop: stop string)" in closing(run)


# --------------------------------------------------------------------------
# sampling defaults: the snapshot's generation_config.json unless told otherwise


@pytest.mark.slow  # ~3 s: three runs and two API generations on the interpreter
def test_model_defaults_apply_by_default(cli, tiny_snapshot: Path, model: Model) -> None:  # type: ignore[no-untyped-def]
    """transformers applies generation_config.json by default; so does the CLI now (its
    temperature, top-k, top-p; the repetition penalty only when asked: spec §1.4)."""
    config = json.loads((tiny_snapshot / "generation_config.json").read_text())
    run = cli(*tiny(tiny_snapshot, "generate", PROMPT, "--seed", "4", "--max-tokens", "6"))
    assert run.code == 0, run.stderr
    assert closing(run).endswith(f"| T={config['temperature']:g} top-k={config['top_k']} "
                                 f"top-p={config['top_p']:g} seed=4")
    want = model.generate(PROMPT, max_tokens=6, sampling=SamplingParams(
        temperature=config["temperature"], top_k=config["top_k"], top_p=config["top_p"],
        seed=4))
    assert run.stdout == want.text + "\n"

    spec = cli(*tiny(tiny_snapshot, "generate", PROMPT, "--seed", "4", "--max-tokens", "6",
                     "--no-model-defaults"))
    assert closing(spec).endswith("| T=1 top-k=0 top-p=1 seed=4")
    assert spec.stdout == model.generate(PROMPT, max_tokens=6, sampling=SamplingParams(
        seed=4)).text + "\n"

    penalty = cli(*tiny(tiny_snapshot, "generate", PROMPT, "--seed", "4", "--max-tokens", "2",
                        "--model-defaults"))
    assert closing(penalty).endswith(f"repetition-penalty={config['repetition_penalty']:g}")


@pytest.mark.slow  # ~1 s: two loads (the fast suite's 3 minutes are full)
def test_no_generation_config_falls_back_to_spec_defaults(cli, tiny_snapshot: Path,  # type: ignore[no-untyped-def]
                                                          tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in tiny_snapshot.iterdir():
        if f.name != "generation_config.json":
            (bare / f.name).symlink_to(f)
    run = cli("generate", PROMPT, "--model", bare, "--backend", "interpreter", "--seed", "1",
              "--max-tokens", "1")
    assert run.code == 0, run.stderr
    assert closing(run).endswith("| T=1 top-k=0 top-p=1 seed=1")
    asked = cli("generate", PROMPT, "--model", bare, "--backend", "interpreter",
                "--model-defaults")
    assert asked.code == 1
    assert "generation_config.json: no such file" in asked.stderr


# --------------------------------------------------------------------------
# the context check comes before the load; the small fixes


def test_context_check_comes_before_the_load(cli, tiny_snapshot: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 21: the check ran after the (slow) load. Here the weights are broken: an
    error about them would mean they were loaded first."""
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in tiny_snapshot.iterdir():
        if f.name != "model.safetensors":
            (broken / f.name).symlink_to(f)
    (broken / "model.safetensors").write_bytes(b"\0" * 16)
    run = cli("generate", PROMPT, "--model", broken, "--context", "5")
    assert run.code == 1
    assert run.stderr.splitlines() == [
        "nanocompile: error: the prompt has 5 tokens but the context holds 5, so at most 4 "
        "prompt tokens leave room to generate"]
    loaded = cli("generate", PROMPT, "--model", broken, "--context", "50")
    assert "model.safetensors" in loaded.stderr  # the same snapshot does fail at its load


def test_unknown_option_points_at_the_subcommands_help(cli) -> None:  # type: ignore[no-untyped-def]
    run = cli("generate", "x", "-n", "5")
    assert run.code == 2
    assert run.stderr == ("nanocompile: error: unrecognized arguments: -n 5 "
                          "(see 'nanocompile generate --help')\n")
    run = cli("chat", "--bogus")
    assert run.stderr.endswith("(see 'nanocompile chat --help')\n")


def test_one_token_is_singular(cli, tiny_snapshot: Path, model: Model) -> None:  # type: ignore[no-untyped-def]
    assert len(model.tokenizer.encode("Hello")) == 1
    run = cli(*tiny(tiny_snapshot, "generate", "Hello", "--greedy", "--max-tokens", "1"))
    assert re.match(r"nanocompile: 1 token generated \(stop: max tokens\) \| prefill 1 token "
                    r"in [\d.]+ s \| decode n/a \(no decode step\) \| greedy$", closing(run))


# --------------------------------------------------------------------------
# --threads (the pool reads it once per process: a child process)


@pytest.mark.slow  # ~2.5 s: a child process loading the compiled program
def test_threads_flag_sets_the_kernel_pool(tiny_snapshot: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NANOCOMPILE_THREADS", "NANOCOMPILE_TRACEBACK")}
    proc = subprocess.run(
        [sys.executable, "-m", "nanocompile.cli", "generate", PROMPT, "--model",
         str(tiny_snapshot), "--threads", "3", "--json", "--greedy", "--max-tokens", "2"],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["threads"] == 3


def test_serve_on_a_taken_port_is_one_line(cli, tiny_snapshot: Path) -> None:  # type: ignore[no-untyped-def]
    """Before the slow load: the port is bound first."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        run = cli("serve", "--model", tiny_snapshot, "--port", str(port))
    assert run.code == 1
    assert run.stderr.splitlines() == [
        f"nanocompile: error: cannot listen on 127.0.0.1:{port}: Address already in use"]

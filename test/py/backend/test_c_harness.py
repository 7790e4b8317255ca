"""The C step harness (issue 19, "Must show" item 3): a plain C program
(``test/c/step_harness.c``, built here by gcc with -Wall -Wextra -Werror) that
dlopens the compiled model's library, maps the weights from one blob and runs
a prefill and greedy decode steps with no Python (an empty environment, no
interpreter in the process) gets the same tokens and the same logits, bit for
bit, as the Python engine on the program's ``StepRunner``:

* the tiny model, weight formats f32, bf16 and int8 (kernel A), at 1 and 2
  threads, the prompt in one call and in chunks of 8, then 8 decode steps;
* its argmax is numpy's (checked on the rows it wrote);
* a prompt past the capacity fails in C with the entry's requirement code
  (the message Python gives for the same call), an out-of-range token id with
  the kernel check Python reports, and a bad manifest with one line naming
  what is wrong; in each case the exit status is non-zero and no output is
  written;
* the full-size model (slow): bf16, 1 thread, a short prompt, 4 decode steps.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

# test/py is on pytest's pythonpath: its folder backend/ (no __init__.py) is a namespace package
from backend._harness import (
    Manifest,
    build_harness,
    gcc_path,
    read_outputs,
    run_harness,
    write_manifest,
)

from nanocompile.api import int8_weights
from nanocompile.backend.runtime import CompiledBackend, CompiledProgram, KernelError, StepRunner
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import compile_program, int8_pass, quantize_graph
from nanocompile.dialects.graph.signature import ArgumentError
from nanocompile.inference.engine import Engine, KVCache, SnapshotWeights, wide_weights
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

pytestmark = pytest.mark.skipif(gcc_path() is None, reason="gcc is not installed: the C "
                                "harness cannot be built")

PROMPT_LEN = 20
DECODE_STEPS = 8


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_harness(tmp_path_factory.mktemp("harness"))


@dataclass
class Model:
    snap: Snapshot
    program: CompiledProgram

    def engine(self, chunk: int | None) -> Engine:
        return Engine(self.snap.config, CompiledBackend(self.program), chunk=chunk, kv="state")


QUANTIZE = {"int8": int8_pass()}  # kernel A (int8-dot, kernel B: the same path, left out for time)


def compile_model(directory: Path, fmt: str, int8_cache: Path | None = None) -> Model:
    """The last-position ``kv = "state"`` program of format ``fmt``, compiled as
    ``api`` does (an int8 format: the bf16 graph quantized, its int8 weights
    from ``int8_cache``)."""
    snap = Snapshot.open(directory)
    graph_format = "f32" if fmt == "f32" else "bf16"
    wide = wide_weights(snap) if graph_format == "bf16" else frozenset()
    graph = build_qwen2(snap.config, Qwen2GraphOptions(kv="state", last_only=True,
                                                       weights=graph_format, wide=wide))
    weights: Mapping[str, np.ndarray] = SnapshotWeights(snap, graph_format)
    quantize = QUANTIZE.get(fmt, "")
    if quantize:
        weights = int8_weights(snap, quantize_graph(graph, quantize), weights,
                               cache_dir=int8_cache)
    return Model(snap, compile_program(graph, weights, schedule=True, quantize=quantize))


# bf16 (the default) in the quick suite; f32 and int8 in the full one (its 3 minutes)
@pytest.fixture(scope="module", params=[pytest.param("f32", marks=pytest.mark.slow), "bf16",
                                        pytest.param("int8", marks=pytest.mark.slow)])
def tiny(request: pytest.FixtureRequest, tiny_snapshot: Path,
         tmp_path_factory: pytest.TempPathFactory) -> Model:
    return compile_model(tiny_snapshot, request.param, tmp_path_factory.mktemp("int8"))


@pytest.fixture(scope="module")
def tiny_f32(tiny_snapshot: Path) -> Model:
    return compile_model(tiny_snapshot, "f32")


def prompt(vocab: int, n: int, seed: int = 19) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(0, vocab, n)]


def python_run(engine: Engine, ids: list[int], steps: int, capacity: int
               ) -> tuple[list[int], np.ndarray, KVCache]:
    """Greedy through the engine: each forward's last row and its argmax."""
    cache = engine.new_cache(capacity)
    rows = [engine.forward(ids, cache)[-1]]
    for _ in range(steps):
        rows.append(engine.forward([int(np.argmax(rows[-1]))], cache)[-1])
    return [int(np.argmax(r)) for r in rows], np.stack(rows), cache


def the_runner(cache: KVCache) -> StepRunner:
    runner, = cache.runners.values()
    assert isinstance(runner, StepRunner)
    return runner


def harness_run(harness: Path, manifest: Manifest) -> tuple[list[int], np.ndarray, str]:
    result = run_harness(harness, manifest.path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    tokens, rows = read_outputs(manifest)
    return tokens, rows, result.stdout


def assert_one_line_error(result_stderr: str, returncode: int, status: int) -> str:
    assert returncode == status, result_stderr
    lines = result_stderr.splitlines()
    assert len(lines) == 1, result_stderr
    assert lines[0].startswith("step_harness: "), result_stderr
    return lines[0]


@pytest.mark.parametrize("threads", [1, pytest.param(2, marks=pytest.mark.slow)])
@pytest.mark.parametrize("chunk", [None, 8])
def test_harness_gives_the_engines_tokens_and_logits(tiny: Model, harness: Path, threads: int,
                                                     chunk: int | None, tmp_path: Path) -> None:
    program = tiny.program
    assert program.set_threads(threads) == threads
    try:
        ids = prompt(tiny.snap.config.vocab_size, PROMPT_LEN)
        capacity = PROMPT_LEN + DECODE_STEPS + 3  # room to spare: capacity is not length
        tokens, rows, cache = python_run(tiny.engine(chunk), ids, DECODE_STEPS, capacity)
        runner = the_runner(cache)
        assert runner.max_seq == (chunk or capacity)
        manifest = write_manifest(runner, tmp_path, ids, DECODE_STEPS, threads=threads)
        got_tokens, got_rows, stdout = harness_run(harness, manifest)
    finally:
        program.set_threads(0)
    calls = -(-PROMPT_LEN // (chunk or capacity)) + DECODE_STEPS
    assert stdout.startswith(f"calls {calls} prefill_tokens {PROMPT_LEN} "), stdout
    assert got_rows.shape == rows.shape == (DECODE_STEPS + 1, tiny.snap.config.vocab_size)
    np.testing.assert_array_equal(got_rows.view(np.uint32), rows.view(np.uint32))
    assert got_tokens == tokens
    assert got_tokens == [int(np.argmax(r)) for r in got_rows]  # the C argmax is numpy's
    # each step saw a new position (the tiny model may repeat its token; its logits move)
    assert all(not np.array_equal(a, b) for a, b in itertools.pairwise(got_rows))
    # the engine's own greedy loop (a fresh cache, its own runner) agrees
    assert tiny.engine(chunk).greedy(ids, DECODE_STEPS + 1) == tokens


def test_harness_reports_a_prompt_past_the_capacity(tiny_f32: Model, harness: Path,
                                                    tmp_path: Path) -> None:
    """Capacity 16, chunks of 8: the third call (past 16, seq 4) fails the entry's
    requirement, in C as through the runner."""
    ids = prompt(tiny_f32.snap.config.vocab_size, PROMPT_LEN)
    engine = tiny_f32.engine(8)
    cache = engine.new_cache(16)
    engine.forward(ids[:16], cache)
    runner = the_runner(cache)
    with pytest.raises(ArgumentError) as python_error:
        runner.step(np.asarray(ids[16:], np.int64), 16)
    manifest = write_manifest(runner, tmp_path, ids, DECODE_STEPS)
    result = run_harness(harness, manifest.path)
    line = assert_one_line_error(result.stderr, result.returncode, 3)
    match = re.fullmatch(r"step_harness: nc_run_qwen2 returned (-\d+) at call 3 \(seq=4, "
                         r"past=16, capacity=16\): requirement (\d+) failed: (.*)", line)
    assert match is not None, line
    rc, k, message = int(match[1]), int(match[2]), match[3]
    assert k == -rc
    assert message == tiny_f32.program.spec.requirements[k - 1][1]
    assert str(python_error.value) == f"@qwen2: {message}"  # the message Python gives
    assert "past the end" in message
    assert not manifest.out_tokens.exists()
    assert not manifest.out_logits.exists()


def test_harness_reports_a_kernel_check(tiny_f32: Model, harness: Path, tmp_path: Path) -> None:
    """A token id past the vocabulary: the embedding's check, in C as through the runner."""
    vocab = tiny_f32.snap.config.vocab_size
    ids = [*prompt(vocab, 5), vocab]
    engine = tiny_f32.engine(8)
    cache = engine.new_cache(16)
    with pytest.raises(KernelError) as python_error:
        engine.forward(ids, cache)
    manifest = write_manifest(the_runner(cache), tmp_path, ids, 2)
    result = run_harness(harness, manifest.path)
    line = assert_one_line_error(result.stderr, result.returncode, 3)
    match = re.fullmatch(r"step_harness: nc_run_qwen2 returned (\d+) at call 1 \(seq=6, past=0, "
                         r"capacity=16\): kernel (@\S+ \(launch \d+\)) failed check (\d+)", line)
    assert match is not None, line
    assert str(python_error.value).startswith(f"kernel {match[2]}: ")
    launch, code = divmod(int(match[1]), 256)
    assert f"(launch {launch})" in match[2]
    assert code == int(match[3]) > 0


BAD_MANIFESTS = {  # what: (regex on the manifest's text, replacement, the error's words)
    "no end line": (r"\nend\n$", "\n", "no 'end' line (a truncated manifest?)"),
    "not the format": (r"^nc-step-harness 1", "nc-step-harness 2", "format version 2 is not 1"),
    "unknown directive": (r"\ndecode ", "\ndecodes ", "unknown directive 'decodes'"),
    "no prompt": (r"\nprompt [^\n]*", "", "no 'prompt' line"),
    "a bad integer": (r"\ndecode \d+", "\ndecode eight", "'decode': expected an integer, "
                      "got 'eight'"),
    "a missing library": (r"\nlibrary [^\n]*", "\nlibrary /nonexistent/libnc.so",
                          "dlopen failed: /nonexistent/libnc.so: cannot open shared object"),
    "a missing entry": (r"\nentry \S+", "\nentry nosuch", "dlsym nc_run_nosuch failed: "),
    "a missing blob": (r"\nblob [^\n]*", "\nblob /nonexistent/weights.bin",
                       "cannot open the weight blob /nonexistent/weights.bin: No such file"),
    "a weight past the blob": (r"(\nio weight model\.norm\.weight \d+) \d+", r"\1 1073741824",
                               "io model.norm.weight: [1073741824, +"),
    "a temp outside the arena": (r"\ntemp (\d+) (\d+)\n", r"\ntemp \1 999999999999\n",
                                 "is outside the arena of"),
    "a wrong input size": (r"\nio input token_ids \d+", "\nio input token_ids 7",
                           "io token_ids: 7 bytes, but max_seq 8 token ids take 64"),
    "a second seq symbol": (r"\nsymbol past past", "\nsymbol past seq",
                            "symbol 'seq': a second symbol of role seq"),
}


@pytest.fixture(scope="module")
def good_manifest(tiny_f32: Model, harness: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, str]:
    """A manifest (and its blob) the harness runs; its outputs removed again."""
    ids = prompt(tiny_f32.snap.config.vocab_size, 4)
    engine = tiny_f32.engine(8)
    cache = engine.new_cache(16)
    engine.forward(ids, cache)
    manifest = write_manifest(the_runner(cache), tmp_path_factory.mktemp("good"), ids, 2)
    assert len(harness_run(harness, manifest)[0]) == 3
    manifest.out_tokens.unlink()
    manifest.out_logits.unlink()
    return manifest, manifest.path.read_text()


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
@pytest.mark.parametrize("what", list(BAD_MANIFESTS))
def test_harness_reports_a_bad_manifest(what: str, good_manifest: tuple[Manifest, str],
                                        harness: Path, tmp_path: Path) -> None:
    pattern, replacement, words = BAD_MANIFESTS[what]
    manifest, text = good_manifest
    bad, count = re.subn(pattern, replacement, text, count=1)
    assert count == 1, what
    path = tmp_path / "manifest.txt"
    path.write_text(bad)
    result = run_harness(harness, path)
    line = assert_one_line_error(result.stderr, result.returncode, 2)
    assert words in line, line
    assert not manifest.out_tokens.exists()
    assert not manifest.out_logits.exists()


def test_harness_usage_and_a_missing_manifest(harness: Path, tmp_path: Path) -> None:
    result = run_harness(harness, tmp_path / "nothing.txt")
    line = assert_one_line_error(result.stderr, result.returncode, 2)
    assert line == (f"step_harness: cannot open the manifest {tmp_path / 'nothing.txt'}: "
                    "No such file or directory")


@pytest.mark.slow
def test_full_size_harness_gives_the_engines_tokens_and_logits(full_snapshot: Path,
                                                               harness: Path,
                                                               tmp_path: Path) -> None:
    model = compile_model(full_snapshot, "bf16")
    assert model.program.set_threads(1) == 1
    try:
        ids = prompt(model.snap.config.vocab_size, 6)
        tokens, rows, cache = python_run(model.engine(None), ids, 4, 16)
        manifest = write_manifest(the_runner(cache), tmp_path, ids, 4, threads=1)
        got_tokens, got_rows, _ = harness_run(harness, manifest)
    finally:
        model.program.set_threads(0)
    np.testing.assert_array_equal(got_rows.view(np.uint32), rows.view(np.uint32))
    assert got_tokens == tokens == [int(np.argmax(r)) for r in got_rows]

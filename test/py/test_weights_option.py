"""The weight format option (issue 17): ``load(..., weights=)`` and the CLI's
``--weights``.

Claims: a bf16 snapshot loads as bf16 by default (nothing widened), f32 on
request (every tensor widened); the two generate the same tokens and give
the same logits bit for bit; the compile report and ``nanocompile compile``
state the format, the widened copies and the bytes per step (the bf16 step's
weights at 2 bytes per element: the report's polynomial is ``count_work`` of
a separately built bf16 graph); a snapshot with no bf16 tensor defaults to
f32 and refuses bf16; bad values are one-line errors, no traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nanocompile.analysis.work import count_work
from nanocompile.api import Model, load
from nanocompile.checkpoint.safetensors import write_safetensors
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import lower_to_loop, optimize_graph
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("weights-env")
    out = dict(os.environ)
    out.update(NANOCOMPILE_CACHE_DIR=str(root / "kernels"), NANOCOMPILE_HOME=str(root / "home"))
    out.pop("NANOCOMPILE_TRACEBACK", None)
    return out


def run(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nanocompile.cli", *map(str, args)],
                          capture_output=True, text=True, encoding="utf-8", env=env,
                          timeout=600)


@pytest.fixture(scope="module")
def f32_snapshot(tiny_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny snapshot with every tensor stored as F32 (widened exactly)."""
    out = tmp_path_factory.mktemp("f32-snapshot") / "snap"
    shutil.copytree(tiny_snapshot, out)
    with Snapshot.open(out) as snap:
        tensors = {name: ("F32", np.array(snap.f32(name))) for name in snap.names}
    write_safetensors(out / "model.safetensors", tensors)
    return out


@pytest.fixture(scope="module")
def models(tiny_snapshot: Path) -> tuple[Model, Model]:
    return load(tiny_snapshot), load(tiny_snapshot, weights="f32")


def test_default_is_bf16_and_both_formats_agree(models: tuple[Model, Model]) -> None:
    bf16, f32 = models
    assert (bf16.weights, f32.weights) == ("bf16", "f32")
    assert "weights='bf16'" in repr(bf16)
    ids = bf16.tokenizer.encode("The capital of France is")
    np.testing.assert_array_equal(bf16.logits(ids).view(np.uint32),
                                  f32.logits(ids).view(np.uint32))
    assert bf16.generate("def fibonacci(n):", max_tokens=6).text == \
        f32.generate("def fibonacci(n):", max_tokens=6).text


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_compile_report_states_the_format(models: tuple[Model, Model],
                                          tiny_snapshot: Path) -> None:
    bf16, f32 = models
    r16, r32 = bf16.compile_report(), f32.compile_report()
    assert (r16["weights"], r32["weights"]) == ("bf16", "f32")
    snap = Snapshot.open(tiny_snapshot)
    n_tensors = len(snap.expected_tensors())
    params = sum(int(np.prod(s)) for s in snap.expected_tensors().values())
    assert (r16["widened_weights"], r16["widened_weight_bytes"]) == (0, 0)
    assert (r32["widened_weights"], r32["widened_weight_bytes"]) == (n_tensors, 4 * params)
    graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=True, weights="bf16", kv="state"))
    work = count_work(lower_to_loop(optimize_graph(graph)))
    assert r16["bytes_per_step"] == str(work.bytes_moved)
    # the weights are read once per step (the gather's row of the embedding per token)
    hidden = snap.config.hidden_size
    assert r32["bytes_per_decode_step"] - r16["bytes_per_decode_step"] == \
        2 * params + 2 * hidden


def test_f32_snapshot_defaults_to_f32_and_refuses_bf16(f32_snapshot: Path) -> None:
    model = load(f32_snapshot, backend="interpreter")
    assert model.weights == "f32"
    report = model.compile_report()  # F32 tensors are their mapped views: nothing widened
    assert (report["widened_weights"], report["widened_weight_bytes"]) == (0, 0)
    with pytest.raises(ValueError, match=r"weights='bf16': .* stores no tensor in bf16 "
                                         r"\(use weights='f32'\)"):
        load(f32_snapshot, weights="bf16")


@pytest.mark.parametrize("bad", ["f16", "BF16", "", 16])
def test_bad_weights_value_is_a_value_error(tiny_snapshot: Path, bad: object) -> None:
    with pytest.raises(ValueError, match=r"weights must be one of f32, bf16, int8, int8-dot "
                                         r"\(or None: the snapshot's\), got "):
        load(tiny_snapshot, weights=bad)  # type: ignore[arg-type]


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_cli_compile_prints_format_and_bytes(env: dict[str, str], tiny_snapshot: Path,
                                             models: tuple[Model, Model]) -> None:
    for flag, model in (([], models[0]), (["--weights", "f32"], models[1])):
        proc = run(env, "compile", "--model", tiny_snapshot, *flag)
        assert proc.returncode == 0, proc.stderr
        r = model.compile_report()
        mib = r["widened_weight_bytes"] / 2**20
        assert re.search(rf"^weights\s+{r['weights']} \({r['widened_weights']} widened to "
                         rf"f32, {mib:.1f} MiB\)$", proc.stdout, re.M), proc.stdout
        assert r["bytes_per_step"] in proc.stdout
        assert f"{r['bytes_per_decode_step']:,}" in proc.stdout


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_cli_generate_with_f32_weights(env: dict[str, str], tiny_snapshot: Path,
                                       models: tuple[Model, Model]) -> None:
    # --greedy: the CLI samples at temperature 1 with a random seed by default
    proc = run(env, "generate", "Hello", "--model", tiny_snapshot, "--weights", "f32",
               "--max-tokens", "5", "--ignore-eos", "--greedy")
    assert proc.returncode == 0, proc.stderr
    want = models[0].generate("Hello", max_tokens=5, stop_at_eos=False).text
    assert proc.stdout == want + "\n"


@pytest.mark.parametrize(("args", "message"), [
    (["--weights", "int4"], "argument --weights: invalid choice: 'int4'"),
    (["--weights"], "argument --weights: expected one argument"),
])
def test_cli_bad_weights_flag_is_one_line(env: dict[str, str], tiny_snapshot: Path,
                                          args: list[str], message: str) -> None:
    proc = run(env, "compile", "--model", tiny_snapshot, *args)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("nanocompile: error: ")
    assert message in lines[0]


def test_cli_bf16_on_an_f32_snapshot_is_one_line(env: dict[str, str],
                                                 f32_snapshot: Path) -> None:
    proc = run(env, "compile", "--model", f32_snapshot, "--weights", "bf16")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert re.fullmatch(r"nanocompile: error: weights='bf16': .* stores no tensor in bf16 "
                        r"\(use weights='f32'\)", lines[0]), lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_dump_bf16_program(env: dict[str, str]) -> None:
    """``dump --weights bf16``: the graph declares bf16 weights widened by casts,
    the C binds them as uint16; the default stays the f32 program."""
    graph = run(env, "dump", "--layers", "1", "--weights", "bf16")
    assert graph.returncode == 0, graph.stderr
    assert re.search(r'graph.weight "model.layers.0.mlp.up_proj.weight" : '
                     r"!graph.tensor<\[4864, 896\], bf16>", graph.stdout)
    assert "graph.cast" in graph.stdout
    default = run(env, "dump", "--layers", "1")
    assert ", bf16>" not in default.stdout

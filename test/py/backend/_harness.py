"""The C step harness (``test/c/step_harness.c``) from the tests: build it, write
its manifest and weight blob from a ``StepRunner``, run it, read what it wrote.

The manifest describes exactly what the runner hands the C entry: the symbols
in ``program.spec.symbols`` order (roles seq, past, capacity), the io slots in
``program.spec.io`` order, the runner's arena size and its static plan's
offsets. Weights and packed copies go into one blob, each at a multiple of
64 bytes, in io order.

Private reads, documented (the runner has no public accessor for them):
``program._weights`` and ``program._packed`` (the arrays the runtime binds to
the weight and packed slots: the blob copies their bytes), the
runner's plan is its public ``bindings`` and ``plan`` (checked against
``program.plan`` at those bindings and the runner's ``arena_bytes``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nanocompile.backend.runtime import StepRunner
from nanocompile.ir.dtypes import ITEMSIZE
from nanocompile.ir.symbolic import Expr

HARNESS_C = Path(__file__).resolve().parents[2] / "c" / "step_harness.c"
GCC_FLAGS = ("-std=c11", "-O2", "-Wall", "-Wextra", "-Werror")
ALIGN = 64


def gcc_path() -> str | None:
    return shutil.which("gcc")


def build_harness(directory: Path) -> Path:
    """The harness binary, compiled by gcc into ``directory`` (a warning fails it)."""
    gcc = gcc_path()
    assert gcc is not None
    binary = directory / "step_harness"
    done = subprocess.run([gcc, *GCC_FLAGS, "-o", str(binary), str(HARNESS_C), "-ldl"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # -Werror: not even a note
    return binary


@dataclass(frozen=True)
class Manifest:
    path: Path
    out_tokens: Path
    out_logits: Path
    vocab: int


def write_manifest(runner: StepRunner, directory: Path, prompt: Sequence[int], decode: int, *,
                   threads: int | None = None, logits: str = "logits",
                   library: Path | None = None, entry: str | None = None) -> Manifest:
    """Write ``directory/manifest.txt`` and ``directory/weights.bin`` for running
    ``prompt`` then ``decode`` greedy steps through ``runner``'s program with the
    runner's capacity, ``max_seq`` and arena plan. ``library`` and ``entry``
    override the program's (to test the harness's errors)."""
    program = runner.program
    spec = program.spec
    sig = program.signature
    bindings = runner.bindings
    plan = runner.plan
    assert program.plan(bindings) == plan
    assert plan.size == runner.arena_bytes
    roles = {runner.seq_symbol: "seq", "past": "past", "capacity": "capacity"}
    lines = ["nc-step-harness 1",
             f"library {library or program.library.path}",
             f"entry {entry or spec.name}",
             f"blob {directory / 'weights.bin'}",
             f"capacity {runner.capacity}",
             f"max_seq {runner.max_seq}"]
    if threads is not None:
        lines.append(f"threads {threads}")
    lines += [f"symbol {s} {roles[s]}" for s in spec.symbols]
    blob: list[bytes] = []
    size = 0
    in_spec = dict(sig.inputs)[runner.input_name]
    for kind, name, tile in spec.io:
        if kind in ("weight", "packed"):
            array = program._weights[name] if kind == "weight" else program._packed[(name, tile)]
            data = np.ascontiguousarray(array).tobytes()
            pad = -size % ALIGN
            blob += [b"\0" * pad, data]
            size += pad
            label = name if tile is None else f"{name}@tile{tile}"
            lines.append(f"io {kind} {label} {len(data)} {size}")
            size += len(data)
        elif kind == "input":
            assert name == runner.input_name
            lines.append(f"io input {name} {runner.max_seq * ITEMSIZE[in_spec.dtype]}")
        elif kind == "state":
            lines.append(f"io state {name} {runner.states[name].nbytes}")
        else:
            assert kind == "output"
            lines.append(f"io output {name} {runner.outputs[name].nbytes}")
    out_spec = dict(sig.outputs)[logits]
    vocab = int(out_spec.shape[-1].evaluate({}))
    form = "seq" if out_spec.shape[0] == Expr.sym(runner.seq_symbol) else "last"
    lines.append(f"logits {logits} {vocab} {form}")
    lines.append(f"arena {plan.size}")
    lines += [f"temp {offset} {temp.size.evaluate(bindings)}"
              for offset, temp in zip(plan.offsets, spec.temps, strict=True)]
    lines += [f"requirement {message}" for _, message in spec.requirements]
    lines += [f"launch {kernel}" for kernel in spec.launches]
    lines.append("prompt " + " ".join(str(int(t)) for t in prompt))
    lines.append(f"decode {decode}")
    manifest = Manifest(directory / "manifest.txt", directory / "tokens.txt",
                        directory / "logits.f32", vocab)
    lines += [f"out_tokens {manifest.out_tokens}", f"out_logits {manifest.out_logits}", "end"]
    (directory / "weights.bin").write_bytes(b"".join(blob))
    manifest.path.write_text("\n".join(lines) + "\n")
    return manifest


@dataclass(frozen=True)
class HarnessResult:
    returncode: int
    stdout: str
    stderr: str


def run_harness(binary: Path, manifest: Path, timeout: float = 300) -> HarnessResult:
    """Run the harness with an empty environment (no Python anywhere near it)."""
    done = subprocess.run([str(binary), str(manifest)], env={}, capture_output=True, text=True,
                          timeout=timeout, check=False)
    return HarnessResult(done.returncode, done.stdout, done.stderr)


def read_outputs(manifest: Manifest) -> tuple[list[int], np.ndarray]:
    """The tokens and the logits rows ``[steps, vocab]`` the harness wrote."""
    tokens = [int(line) for line in manifest.out_tokens.read_text().split()]
    rows = np.fromfile(manifest.out_logits, dtype=np.float32)
    assert rows.size == len(tokens) * manifest.vocab, (rows.size, len(tokens))
    return tokens, rows.reshape(len(tokens), manifest.vocab)

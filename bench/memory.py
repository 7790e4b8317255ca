"""``python -m bench memory``: peak resident memory of ``nanocompile generate``.

Issue 16, "Must show" item 5: the packed weight copies doubled the f32
weights' memory, and taking them away must show as a drop in the peak RSS of
the README's main command. This runs that command in a child process::

    nanocompile generate --max-tokens N --greedy --ignore-eos --seed 0 PROMPT

on the default model (or ``--model DIR``) and reports

* its peak resident set: ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``
  after the child is waited for (the largest RSS of any waited-for
  descendant; KiB on Linux), and, when ``/usr/bin/time`` exists, its ``%M``
  (the same process's maximum RSS as GNU time reads it) as a cross-check:
  the child is run under ``/usr/bin/time -f %M -o FILE``;
* the checkpoint's size on disk (its safetensors files) and the f32 size of
  the weights it holds (4 bytes per parameter: what ``F32Weights`` widens
  them to), and the peak's excess over checkpoint + f32 weights (where packed
  copies, the compiler and the runtime show).

The default model is generated (once) in this process before the child runs,
so the child measures ``generate`` and not the generator. Appends one
``"memory"`` record to ``bench/results.jsonl`` (``--results``; ``--no-record``
prints only).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import BenchError, command, results

DEFAULT_TOKENS = 8
DEFAULT_PROMPT = "The capital of France is"
GNU_TIME = Path("/usr/bin/time")
ENGINE = "nanocompile-generate"
METRIC = "peak_rss_bytes"
STDERR_LINES_KEPT = 8


@dataclass(frozen=True)
class Child:
    """One finished ``nanocompile generate``: exit code, peak RSS figures, output."""

    returncode: int
    seconds: float
    maxrss_kib: int  # getrusage(RUSAGE_CHILDREN).ru_maxrss after it was waited for
    maxrss_kib_before: int  # the same before it started (earlier children of this process)
    time_maxrss_kib: int | None  # /usr/bin/time's %M, None without /usr/bin/time
    stdout: str
    stderr: str


def nanocompile_script() -> Path:
    """The ``nanocompile`` console script: beside this Python, else on PATH."""
    beside = Path(sys.executable).with_name("nanocompile")
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("nanocompile")
    if found is None:
        raise BenchError("the nanocompile command is not installed (pip install -e .)")
    return Path(found)


def generate_command(tokens: int, prompt: str, model: Path | None) -> list[str]:
    """The measured command line (without the /usr/bin/time wrapper)."""
    cmd = [str(nanocompile_script()), "generate", "--max-tokens", str(tokens), "--greedy",
           "--ignore-eos", "--seed", "0"]
    if model is not None:
        cmd += ["--model", str(model)]
    return [*cmd, "--", prompt]


def run_child(cmd: list[str]) -> Child:
    """Run ``cmd`` (under ``/usr/bin/time -f %M`` when present) and read its peak RSS."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with tempfile.TemporaryDirectory(prefix="nanocompile-memory-") as scratch:
        time_file = Path(scratch) / "maxrss"
        wrapped = ([str(GNU_TIME), "-f", "%M", "-o", str(time_file), *cmd]
                   if GNU_TIME.is_file() else cmd)
        start = time.perf_counter()
        proc = subprocess.run(wrapped, capture_output=True, text=True, errors="replace")
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        time_kib = _time_maxrss(time_file) if GNU_TIME.is_file() else None
    return Child(proc.returncode, seconds, after, before, time_kib, proc.stdout, proc.stderr)


def _time_maxrss(path: Path) -> int | None:
    """The last line of GNU time's ``-o`` file as KiB (None if it is not a number)."""
    try:
        lines = path.read_text().split()
    except OSError:
        return None
    return int(lines[-1]) if lines and lines[-1].isdigit() else None


def model_sizes(directory: Path) -> dict[str, Any]:
    """Checkpoint bytes on disk, parameter count and their f32 bytes."""
    from nanocompile.checkpoint.snapshot import Snapshot

    with Snapshot.open(directory) as snap:
        parameters = sum(math.prod(shape) for shape in snap.expected_tensors().values())
        return {"directory": str(directory), "checkpoint_bytes": snap.nbytes(),
                "parameters": parameters, "f32_weights_bytes": 4 * parameters}


def measure(tokens: int, prompt: str, model: Path | None) -> dict[str, Any]:
    """Run the command once and return the record's payload (see the module doc)."""
    import nanocompile

    if model is None:
        from nanocompile.api import ensure_default_snapshot

        directory, label = ensure_default_snapshot(), "default (synthetic Qwen2.5-0.5B)"
    else:
        directory, label = model, f"snapshot {model.name}"
    sizes = model_sizes(directory)
    cmd = generate_command(tokens, prompt, model)
    child = run_child(cmd)
    tail = child.stderr.strip().splitlines()[-STDERR_LINES_KEPT:]
    if child.returncode != 0:
        raise BenchError(f"nanocompile generate exited with {child.returncode}: "
                         f"{tail[-1] if tail else '(no output)'}")
    if child.maxrss_kib <= child.maxrss_kib_before:
        raise BenchError("an earlier child of this process peaked higher than nanocompile "
                         "generate, so its peak cannot be read: run python -m bench memory "
                         "on its own")
    peak = child.maxrss_kib * 1024
    time_peak = child.time_maxrss_kib * 1024 if child.time_maxrss_kib is not None else None
    beyond = peak - sizes["checkpoint_bytes"] - sizes["f32_weights_bytes"]
    return {
        "command": cmd, "tokens": tokens, "prompt": prompt,
        "model": sizes | {"label": label},
        "peak_rss_bytes": peak,
        "peak_rss_source": "resource.getrusage(RUSAGE_CHILDREN).ru_maxrss",
        "time_peak_rss_bytes": time_peak,
        "time_source": f"{GNU_TIME} -f %M" if time_peak is not None else None,
        "peak_over_f32_weights": peak / sizes["f32_weights_bytes"],
        "peak_beyond_checkpoint_and_f32_bytes": beyond,
        "seconds": child.seconds, "stderr_tail": tail,
        "threads_env": os.environ.get("NANOCOMPILE_THREADS"),
        # which nanocompile the child imported (it inherits this environment)
        "nanocompile_package": str(Path(nanocompile.__file__).parent),
        "pythonpath": os.environ.get("PYTHONPATH"),
        "measurements": [{"engine": ENGINE, "metric": METRIC, "unit": "bytes",
                          "threads": None, "median": peak, "min": peak, "n": 1,
                          "values": [peak]}],
    }


def format_report(payload: dict[str, Any]) -> str:
    """The figures, one per line, in GB (1e9) and GiB."""

    def size(n: int) -> str:
        return f"{n / 1e9:.3f} GB ({n / 2**30:.2f} GiB)"

    m = payload["model"]
    lines = [
        f"model: {m['label']} ({m['directory']}); {m['parameters']:,} parameters",
        f"checkpoint on disk:          {size(m['checkpoint_bytes'])}",
        f"weights as f32 (4 B/param):  {size(m['f32_weights_bytes'])}",
        f"peak RSS of generate:        {size(payload['peak_rss_bytes'])}  "
        f"[{payload['peak_rss_source']}]",
    ]
    if payload["time_peak_rss_bytes"] is not None:
        lines.append(f"  cross-check:               {size(payload['time_peak_rss_bytes'])}  "
                     f"[{payload['time_source']}]")
    else:
        lines.append(f"  cross-check:               {GNU_TIME} not present")
    lines += [
        f"peak / f32 weights:          {payload['peak_over_f32_weights']:.2f}x",
        f"peak - checkpoint - f32:     {size(payload['peak_beyond_checkpoint_and_f32_bytes'])}",
        f"command ({payload['seconds']:.1f} s): {' '.join(payload['command'])}",
    ]
    return "\n".join(lines)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=int, default=DEFAULT_TOKENS,
                        help="tokens to generate (default %(default)s)")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT,
                        help="the prompt (default: %(default)r)")
    parser.add_argument("--model", type=Path, default=None,
                        help="snapshot directory (default: the embedded synthetic model)")
    parser.add_argument("--results", type=Path, default=results.RESULTS_PATH,
                        help="results file to append to (default: %(default)s)")
    parser.add_argument("--no-record", action="store_true", help="print only, append nothing")


def settings_from(args: argparse.Namespace) -> tuple[int, str, Path | None]:
    """Validated ``(tokens, prompt, model)``."""
    if not 1 <= args.tokens <= 4096:
        raise BenchError(f"--tokens must be in 1..4096, got {args.tokens}")
    if not args.prompt.strip():
        raise BenchError("--prompt must not be empty")
    if args.model is not None and not args.model.is_dir():
        raise BenchError(f"--model {args.model}: not a directory")
    return args.tokens, args.prompt, args.model


@command("memory", help="peak resident memory of nanocompile generate; append a memory record",
         arguments=_arguments)
def memory_command(args: argparse.Namespace) -> int:
    """Measure, print, and (unless ``--no-record``) append one ``"memory"`` record."""
    tokens, prompt, model = settings_from(args)
    payload = measure(tokens, prompt, model)
    print(format_report(payload))
    if args.no_record:
        print("not recorded (--no-record)")
        return 0
    results.append_record(results.make_record("memory", payload), args.results)
    print(f"appended a memory record to {args.results}")
    return 0

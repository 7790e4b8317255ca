#!/usr/bin/env python
"""Seeded fuzz campaigns against nanocompile's input boundaries.

    python tools/fuzz.py nc-opt      --count 10000 --seed 0 [--subprocess 300]
    python tools/fuzz.py safetensors --count 10000 --seed 0
    python tools/fuzz.py graphs      --count 1000  --seed 0 [--batch 8]
    python tools/fuzz.py threads|cache|json|chains --count N --seed 0   (tools/fuzz_runtime.py)

Each campaign prints one JSON report (inputs tried, outcomes by kind, findings
with what reproduces them, seconds) and exits 1 if it found anything. A
finding that looks like a bug found before names that bug's regression test
(``REGRESSION_TESTS``).
Input ``i`` of a campaign depends only on ``(seed, i)``: ``--replay I`` reruns
just that input and prints it (for ``graphs``, ``--replay`` takes a graph seed
and prints the graph).

* ``nc-opt``: every ``.mlir`` file under ``test/lit``, split at ``// -----``,
  with the options of its RUN lines and the pass pipelines, mutated at line,
  token and byte level. Inputs run in-process through
  ``nanocompile.tools.nc_opt.main(argv)`` (with ``NANOCOMPILE_TRACEBACK=1``, so
  an internal error escapes as an exception instead of being reworded) under a
  SIGALRM timeout; ``--subprocess N`` also runs the first N inputs as real
  ``nc-opt`` processes to prove none crashes the interpreter (negative exit
  code) or prints a traceback. Acceptable outcomes: exit 0, or a non-zero exit
  with a diagnostic that is located (``file:line:col``) or starts with a known
  ``nc-opt:`` prefix.
* ``safetensors``: small valid files written by the project's writer, then
  mutated headers (JSON-aware: dtypes, shapes, offsets, metadata, nesting;
  and raw bytes), header-length fields and truncated or extended files.
  Acceptable: ``SafetensorsError``, or a load whose every tensor has the
  header's dtype and shape, lies inside the file's mapping, and holds exactly
  the file's bytes (``f32()`` widening checked independently).
* ``graphs``: ``nanocompile.testing.random_graphs`` (random valid graphs, unfused,
  fused and scheduled, guarded arenas, against the interpreter).

``--engine atheris`` runs the nc-opt or safetensors check under atheris
(libFuzzer's coverage-guided mutation, ``-seed`` and ``-runs`` from the
arguments), seeded with the same corpus.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
LIT = ROOT / "test" / "lit"
MAX_FINDINGS = 50  # findings kept in a report (all are counted)
PER_KIND = 3  # findings kept per kind


@dataclass
class Report:
    """What a campaign tried and what came out."""

    campaign: str
    seed: int
    count: int = 0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    findings: list[dict[str, Any]] = field(default_factory=list)
    bugs: collections.Counter[str] = field(default_factory=collections.Counter)
    extra: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def find(self, kind: str, regression_test: str | None = None, **details: Any) -> None:
        self.bugs[kind] += 1
        if self.bugs[kind] <= PER_KIND and len(self.findings) < MAX_FINDINGS:
            self.findings.append({"kind": kind, "regression_test": regression_test, **details})

    @property
    def new_bugs(self) -> int:
        return sum(self.bugs.values())

    def to_json(self) -> dict[str, Any]:
        return {"campaign": self.campaign, "seed": self.seed, "inputs": self.count,
                "seconds": round(self.seconds, 1), "outcomes": dict(sorted(self.outcomes.items())),
                "bugs": dict(self.bugs),
                **self.extra, "findings": self.findings}


def _rng(seed: int, index: int, salt: int) -> np.random.Generator:
    return np.random.default_rng([salt, seed, index])


# --------------------------------------------------------------------------
# text mutation (nc-opt)
# --------------------------------------------------------------------------

TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%@^#!]?[\w.$-]+|->|\s+|.', re.S)
INTERESTING_NUMBERS = ("0", "-1", "1", "2", "-0.0", "65536", "2147483647", "2147483648",
                       "4294967296", "9223372036854775807", "9223372036854775808",
                       "18446744073709551616", "99999999999999999999999999", "1e39", "nan",
                       "inf", "0x7f", "1.5", "-9223372036854775808")
INTERESTING_BYTES = ("\x00", "\xff", "\ufeff", "\u00e9", "\\", '"', "{", "}", "[", "]", "<",
                     ">", "(", ")", ":", ",", "=", "%", "@", "#", "!", "\n", "\t", "//")


@dataclass(frozen=True)
class MlirSeed:
    name: str
    text: str
    options: tuple[tuple[str, ...], ...]


PIPELINES: tuple[tuple[str, ...], ...] = (
    (), ("-p", "cse"), ("-p", "dce"), ("-p", "fold-constants,dce"), ("-p", "fuse"),
    ("-p", "lower-graph-to-loop"), ("-p", "cse,fold-constants,dce,fuse,lower-graph-to-loop"),
    ("-t", "c"), ("-p", "fuse,lower-graph-to-loop", "-t", "c"), ("--print-op-generic",),
    ("-p", "apply-schedule"), ("-p", "apply-schedule", "-t", "c"),
    ("-p", "lower-graph-to-loop,apply-schedule", "-t", "c"),
)


def _run_options(text: str) -> list[tuple[str, ...]]:
    """The nc-opt options of a file's RUN lines (up to the first pipe or redirect)."""
    out = []
    for line in text.splitlines():
        match = re.match(r"\s*//\s*RUN:\s*(?:not\s+)?nc-opt\s+%s(.*)", line)
        if not match:
            continue
        args = []
        for arg in match.group(1).split():
            if arg == "|" or re.match(r"\d*[<>]", arg):  # a pipe or a redirect (2>&1)
                break
            if arg != "--split-input-file":
                args.append(arg)
        out.append(tuple(args))
    return out


def mlir_seeds() -> list[MlirSeed]:
    """Every chunk of every lit input, with its RUN options and the pass pipelines."""
    seeds = []
    for path in sorted(LIT.rglob("*.mlir")):
        if "Output" in path.parts:
            continue
        text = path.read_text()
        options = tuple(dict.fromkeys([*_run_options(text), *PIPELINES]))
        chunks = re.split(r"^// -----\s*$", text, flags=re.M)
        for k, chunk in enumerate(chunks):
            seeds.append(MlirSeed(f"{path.relative_to(LIT)}#{k}", chunk, options))
    return seeds


def _tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def mutate_text(text: str, rng: np.random.Generator, pool: Sequence[str],
                donors: Sequence[str]) -> tuple[str, list[str]]:
    """1-4 random line/token/byte mutations; returns the text and their names."""
    applied = []
    for _ in range(int(rng.integers(1, 5))):
        op = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
        text = op(text, rng, pool, donors)
        applied.append(op.__name__.removeprefix("_m_"))
    return text, applied


def _m_delete_line(text: str, rng: np.random.Generator, *_: Any) -> str:
    lines = text.splitlines(keepends=True)
    if lines:
        del lines[int(rng.integers(len(lines)))]
    return "".join(lines)


def _m_duplicate_line(text: str, rng: np.random.Generator, *_: Any) -> str:
    lines = text.splitlines(keepends=True)
    if lines:
        i = int(rng.integers(len(lines)))
        lines.insert(int(rng.integers(len(lines) + 1)), lines[i])
    return "".join(lines)


def _m_swap_lines(text: str, rng: np.random.Generator, *_: Any) -> str:
    lines = text.splitlines(keepends=True)
    if len(lines) >= 2:
        i, j = rng.choice(len(lines), 2, replace=False)
        lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def _m_splice_line(text: str, rng: np.random.Generator, pool: Any, donors: Sequence[str]) -> str:
    lines = text.splitlines(keepends=True)
    donor = donors[int(rng.integers(len(donors)))].splitlines(keepends=True)
    if donor:
        lines.insert(int(rng.integers(len(lines) + 1)), donor[int(rng.integers(len(donor)))])
    return "".join(lines)


def _solid(tokens: list[str]) -> list[int]:
    return [i for i, t in enumerate(tokens) if not t.isspace()]


def _m_delete_token(text: str, rng: np.random.Generator, *_: Any) -> str:
    tokens = _tokens(text)
    solid = _solid(tokens)
    if solid:
        del tokens[solid[int(rng.integers(len(solid)))]]
    return "".join(tokens)


def _m_duplicate_token(text: str, rng: np.random.Generator, *_: Any) -> str:
    tokens = _tokens(text)
    solid = _solid(tokens)
    if solid:
        i = solid[int(rng.integers(len(solid)))]
        tokens.insert(i, tokens[i] + (" " if rng.random() < 0.5 else ""))
    return "".join(tokens)


def _m_swap_tokens(text: str, rng: np.random.Generator, *_: Any) -> str:
    tokens = _tokens(text)
    solid = _solid(tokens)
    if len(solid) >= 2:
        i, j = rng.choice(solid, 2, replace=False)
        tokens[i], tokens[j] = tokens[j], tokens[i]
    return "".join(tokens)


def _m_replace_token(text: str, rng: np.random.Generator, pool: Sequence[str], *_: Any) -> str:
    """A token becomes another of the corpus (same class when it is a number)."""
    tokens = _tokens(text)
    solid = _solid(tokens)
    if not solid:
        return text
    i = solid[int(rng.integers(len(solid)))]
    if re.fullmatch(r"-?\d[\w.]*", tokens[i]) or rng.random() < 0.25:
        tokens[i] = INTERESTING_NUMBERS[int(rng.integers(len(INTERESTING_NUMBERS)))]
    else:
        tokens[i] = pool[int(rng.integers(len(pool)))]
    return "".join(tokens)


def _m_insert_token(text: str, rng: np.random.Generator, pool: Sequence[str], *_: Any) -> str:
    tokens = _tokens(text)
    at = int(rng.integers(len(tokens) + 1))
    tokens.insert(at, pool[int(rng.integers(len(pool)))])
    return "".join(tokens)


def _m_flip_char(text: str, rng: np.random.Generator, *_: Any) -> str:
    if not text:
        return text
    i = int(rng.integers(len(text)))
    if rng.random() < 0.5:
        new = INTERESTING_BYTES[int(rng.integers(len(INTERESTING_BYTES)))]
    else:
        new = chr(int(rng.integers(1, 0x250)))
    return text[:i] + new + text[i + 1:]


def _m_truncate(text: str, rng: np.random.Generator, *_: Any) -> str:
    return text[: int(rng.integers(len(text) + 1))]


def _m_nest(text: str, rng: np.random.Generator, *_: Any) -> str:
    """Deep nesting at a random point: brackets, parentheses or a type."""
    depth = int(rng.choice([10, 100, 1000, 5000]))
    opener, closer = [("[", "]"), ("(", ")"), ("!graph.tensor<", ">"), ("{", "}")][
        int(rng.integers(4))]
    i = int(rng.integers(len(text) + 1))
    return text[:i] + opener * depth + closer * depth + text[i:]


MUTATIONS: tuple[Callable[..., str], ...] = (
    _m_delete_line, _m_duplicate_line, _m_swap_lines, _m_splice_line, _m_delete_token,
    _m_duplicate_token, _m_swap_tokens, _m_replace_token, _m_replace_token, _m_replace_token,
    _m_insert_token, _m_flip_char, _m_flip_char, _m_truncate, _m_nest,
)


# --------------------------------------------------------------------------
# nc-opt campaign
# --------------------------------------------------------------------------

LOCATED = re.compile(r":\d+:\d+")
# Bugs found (and fixed): finding kind -> the regression test that pins it.
NCOPT_REGRESSIONS = {
    "timeout: unterminated string":
        "test/py/testing/test_fuzz.py::test_ncopt_unterminated_string_does_not_hang",
    "exception: AssertionError in lower_graph_to_loop.py":
        "test/py/testing/test_fuzz.py::test_ncopt_graph_op_outside_a_func_is_a_diagnostic",
    "leaked-exception: zip() argument":
        "test/py/testing/test_fuzz.py::test_ncopt_loop_for_iter_count_mismatch_is_located",
}
SAFETENSORS_REGRESSIONS = {
    "exception: RecursionError in open":
        "test/py/testing/test_fuzz.py::test_safetensors_deeply_nested_header_is_an_error",
    "exception: OverflowError in open":
        "test/py/testing/test_fuzz.py::test_safetensors_dim_beyond_int64_is_an_error",
    "exception: ValueError in raw: cannot reshape":
        "test/py/testing/test_fuzz.py::test_safetensors_shape_product_overflow_is_an_error",
    "exception: ValueError in raw: Maximum allowed dimension":
        "test/py/testing/test_fuzz.py::test_safetensors_empty_tensor_with_huge_dims_is_an_error",
    "exception: ValueError in raw: array is too big":
        "test/py/testing/test_fuzz.py::test_safetensors_empty_tensor_with_huge_dims_is_an_error",
}
_UNTERMINATED = re.compile(r'^[^"\n]*(?:"(?:[^"\\\n]|\\.)*"[^"\n]*)*"(?:[^"\\\n]|\\.)*$', re.M)
KNOWN_PREFIXES = ("nc-opt: parse error", "nc-opt: error:", "nc-opt: ")
ARGPARSE_ERROR = re.compile(r"[\w.-]+: error: ")  # "<prog>: error: unrecognized arguments"
# messages of Python's own exceptions: a bug's text shown as if it were a diagnostic
PYTHON_ERROR = re.compile(r"zip\(\) argument|object has no attribute|index out of range|"
                          r"is not subscriptable|unhashable type|'NoneType'|positional argument|"
                          r"referenced before assignment|object is not iterable|"
                          r"unsupported operand type|too many values to unpack|"
                          r"not enough values to unpack")


class _Timeout(BaseException):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


@dataclass
class NcOptInput:
    index: int
    seed_name: str
    text: str
    options: tuple[str, ...]
    mutations: list[str]


def ncopt_inputs(count: int, seed: int, start: int = 0) -> Iterator[NcOptInput]:
    seeds = mlir_seeds()
    donors = [s.text for s in seeds]
    pool = sorted({t for s in seeds for t in _tokens(s.text) if not t.isspace()})
    for index in range(start, start + count):
        rng = _rng(seed, index, 0x4D4C)
        base = seeds[int(rng.integers(len(seeds)))]
        options = base.options[int(rng.integers(len(base.options)))]
        text, applied = mutate_text(base.text, rng, pool, donors)
        yield NcOptInput(index, base.name, text, options, applied)


def classify_ncopt(status: int | None, message: str) -> str:
    """ok | located | unlocated, or a bug: internal-error | leaked-exception (a Python
    error's own message passed off as a diagnostic) | silent-failure."""
    if not status:
        return "ok"
    if "internal error" in message or "Traceback" in message:
        return "internal-error"
    if PYTHON_ERROR.search(message):
        return "leaked-exception"
    if LOCATED.search(message):
        return "located"
    if any(line.startswith(KNOWN_PREFIXES) or ARGPARSE_ERROR.match(line)
           for line in message.splitlines()):
        return "unlocated"
    return "silent-failure"


def run_ncopt_inprocess(path: Path, options: Sequence[str], timeout: float
                        ) -> tuple[str, str]:
    """(outcome, detail) of ``nc-opt path options`` run through ``main(argv)``."""
    from nanocompile.tools.nc_opt import main

    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    status: int | None = 0
    message = ""
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main([str(path), *options])
    except SystemExit as e:
        if isinstance(e.code, str):
            status, message = 1, e.code
        else:
            status = e.code
    except _Timeout:
        return "timeout", f"no result after {timeout} s"
    except BaseException as e:  # an exception escaping main: a bug
        if isinstance(e, KeyboardInterrupt):
            raise
        frames = traceback.extract_tb(e.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames)
                      if "nanocompile" in f.filename), f"{Path(frames[-1].filename).name}")
        return "exception", f"{type(e).__name__}: {str(e)[:300]} at {where}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    message = message or err.getvalue()
    return classify_ncopt(status, message), message[:300]


def run_ncopt_subprocess(path: Path, options: Sequence[str], timeout: float
                         ) -> tuple[str, str]:
    cmd = [sys.executable, "-m", "nanocompile.tools.nc_opt", str(path), *options]
    env = {k: v for k, v in os.environ.items() if k != "NANOCOMPILE_TRACEBACK"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              errors="replace")
    except subprocess.TimeoutExpired:
        return "timeout", f"no result after {timeout} s"
    if proc.returncode < 0:
        return "crash", f"killed by signal {-proc.returncode}: {proc.stderr[-300:]}"
    return classify_ncopt(proc.returncode, proc.stderr), proc.stderr[:300]


NCOPT_BUGS = ("internal-error", "leaked-exception", "silent-failure", "exception", "timeout",
              "crash")


def ncopt_campaign(count: int, seed: int, *, subprocess_sample: int = 0,
                   timeout: float = 5.0, workdir: Path | None = None,
                   save_dir: Path | None = None) -> Report:
    report = Report("nc-opt", seed)
    start = time.perf_counter()
    unlocated: collections.Counter[str] = collections.Counter()
    mutations: collections.Counter[str] = collections.Counter()
    old_tb = os.environ.get("NANOCOMPILE_TRACEBACK")
    os.environ["NANOCOMPILE_TRACEBACK"] = "1"
    sample = 0
    try:
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            for item in ncopt_inputs(count, seed):
                path = Path(tmp) / f"input{item.index}.mlir"
                path.write_text(item.text, errors="surrogateescape")
                mutations.update(item.mutations)
                outcome, detail = run_ncopt_inprocess(path, item.options, timeout)
                report.count += 1
                report.outcomes[outcome] += 1
                if outcome == "unlocated":
                    unlocated[re.sub(r"\d+|'[^']*'|\"[^\"]*\"", "_", detail.splitlines()[0]
                                     if detail else "")[:80]] += 1
                if outcome in NCOPT_BUGS:
                    _record_ncopt(report, item, outcome, detail, "in-process", save_dir)
                if sample < subprocess_sample:
                    sample += 1
                    outcome, detail = run_ncopt_subprocess(path, item.options, 3 * timeout + 15)
                    report.outcomes[f"subprocess:{outcome}"] += 1
                    if outcome in NCOPT_BUGS:
                        _record_ncopt(report, item, outcome, detail, "subprocess", save_dir)
                path.unlink()
    finally:
        if old_tb is None:
            os.environ.pop("NANOCOMPILE_TRACEBACK", None)
        else:
            os.environ["NANOCOMPILE_TRACEBACK"] = old_tb
    report.seconds = time.perf_counter() - start
    report.extra["subprocess_inputs"] = sample
    report.extra["mutations"] = dict(sorted(mutations.items()))
    report.extra["unlocated_messages"] = dict(unlocated.most_common(15))
    return report


def ncopt_kind(outcome: str, text: str, detail: str = "") -> str:
    """The finding kind: a timeout on a line with an unterminated string literal is
    the lexer blow-up found before (``NCOPT_REGRESSIONS``); an escaping exception
    is named by its type and the nanocompile file it escaped from."""
    if outcome == "timeout" and _UNTERMINATED.search(text):
        return "timeout: unterminated string"
    match = re.match(r"(\w+): .* at (\w+\.py):\d+$", detail, re.S)
    if outcome == "exception" and match:
        return f"exception: {match[1]} in {match[2]}"
    leaked = PYTHON_ERROR.search(detail)
    if outcome == "leaked-exception" and leaked:
        return f"leaked-exception: {leaked[0]}"
    return outcome


def _record_ncopt(report: Report, item: NcOptInput, outcome: str, detail: str, how: str,
                  save_dir: Path | None) -> None:
    saved = None
    if save_dir is not None:
        save_dir.mkdir(parents=True, exist_ok=True)
        saved = save_dir / f"nc-opt-{report.seed}-{item.index}.mlir"
        saved.write_text(item.text, errors="surrogateescape")
    kind = ncopt_kind(outcome, item.text, detail)
    report.find(kind, NCOPT_REGRESSIONS.get(kind), index=item.index, seed_file=item.seed_name,
                options=list(item.options),
                mutations=item.mutations, how=how, detail=detail,
                saved=str(saved) if saved else None)


# --------------------------------------------------------------------------
# safetensors campaign
# --------------------------------------------------------------------------

INTERESTING_INTS = (0, 1, -1, 2, 3, 7, 8, 255, 256, 2**16, 2**31 - 1, 2**31, 2**32, 2**53 + 1,
                    2**62, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**100, -(2**63), -(2**64))
ODD_VALUES: tuple[Any, ...] = (None, True, False, 1.0, 1.5, -0.0, "3", "F32", [], [1], {},
                               {"a": 1}, [[1]], "", 1e308, float("nan"), float("inf"))


def safetensors_seeds() -> list[bytes]:
    """Small valid files: every dtype, empty and 0-d tensors, metadata, gaps."""
    from nanocompile.checkpoint.safetensors import DTYPES, write_safetensors

    rng = np.random.default_rng(0x5EED)
    files = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seed.safetensors"
        layouts: list[dict[str, tuple[str, tuple[int, ...]]]] = [
            {"w": ("F32", (2, 3)), "b": ("BF16", (4,)), "i": ("I64", ())},
            {"e": ("F32", (0,)), "z": ("F16", (0, 3)), "u": ("U8", (5,))},
            {name.lower(): (name, (2,)) for name in DTYPES},
            {"embed.weight": ("BF16", (7, 4)), "norm": ("F32", (4,))},
            {},
        ]
        for k, layout in enumerate(layouts):
            tensors = {}
            for name, (dtype, shape) in layout.items():
                dt = DTYPES[dtype]
                raw = rng.integers(0, 256, int(np.prod(shape, dtype=np.int64)) * dt.itemsize,
                                   dtype=np.uint8)
                tensors[name] = (dtype, raw.view(dt).reshape(shape))
            write_safetensors(path, tensors, {"format": "pt", "n": str(k)} if k % 2 else None)
            files.append(path.read_bytes())
    # a hand-written file: unsorted offsets, a gap, trailing bytes, unpadded header
    header = json.dumps({"b": {"dtype": "I8", "shape": [3], "data_offsets": [8, 11]},
                         "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    files.append(struct.pack("<Q", len(header)) + header + bytes(range(16)) + b"tail")
    return files


def _split(data: bytes) -> tuple[int, bytes, bytes] | None:
    if len(data) < 8:
        return None
    n = int.from_bytes(data[:8], "little")
    if 8 + n > len(data):
        return None
    return n, data[8:8 + n], data[8 + n:]


def _join(header: bytes, body: bytes) -> bytes:
    return struct.pack("<Q", len(header)) + header + body


def _odd(rng: np.random.Generator) -> Any:
    if rng.random() < 0.6:
        return INTERESTING_INTS[int(rng.integers(len(INTERESTING_INTS)))]
    return ODD_VALUES[int(rng.integers(len(ODD_VALUES)))]


def _mutate_entry(entry: Any, rng: np.random.Generator, names: Sequence[str]) -> Any:
    if not isinstance(entry, dict):
        return _odd(rng)
    entry = dict(entry)
    what = int(rng.integers(9))
    key = ("dtype", "shape", "data_offsets")[int(rng.integers(3))]
    if what == 0:
        entry.pop(key, None)
    elif what == 1:
        entry[key] = _odd(rng)
    elif what == 2:
        entry["dtype"] = str(rng.choice(["F32", "BF16", "F16", "I64", "I8", "U8", "BOOL", "F64",
                                         "f32", "F8_E4M3", "", "I128"]))
    elif what in (3, 4) and isinstance(entry.get("shape"), list):
        entry["shape"] = _mutate_shape(list(entry["shape"]), rng)
    elif what in (5, 6) and isinstance(entry.get("data_offsets"), list):
        entry["data_offsets"] = _mutate_offsets(list(entry["data_offsets"]), rng)
    elif what == 7:
        entry[str(rng.choice(["extra", "dtype ", "__metadata__"]))] = _odd(rng)
    else:
        depth = int(rng.choice([2, 50, 5000, 50000]))
        entry[key] = json.loads("[" * min(depth, 500) + "]" * min(depth, 500)) if depth <= 500 \
            else _Raw("[" * depth + "]" * depth)
    return entry


def _mutate_shape(shape: list[Any], rng: np.random.Generator) -> list[Any]:
    op = int(rng.integers(4))
    if op == 0 or not shape:
        shape.insert(int(rng.integers(len(shape) + 1)), _odd(rng))
    elif op == 1:
        shape.pop(int(rng.integers(len(shape))))
    elif op == 2:
        shape[int(rng.integers(len(shape)))] = _odd(rng)
    else:
        shape = [int(rng.choice([2**32, 2**31, 2**62, 2**63 - 1])), *shape]
    return shape


def _mutate_offsets(offsets: list[Any], rng: np.random.Generator) -> list[Any]:
    op = int(rng.integers(4))
    if op == 0 and len(offsets) == 2:
        offsets.reverse()
    elif op == 1 and offsets:
        i = int(rng.integers(len(offsets)))
        offsets[i] = offsets[i] + int(rng.integers(-9, 10)) if isinstance(
            offsets[i], int) else _odd(rng)
    elif op == 2 and offsets:
        offsets[int(rng.integers(len(offsets)))] = _odd(rng)
    else:
        offsets.append(_odd(rng))
    return offsets


class _Raw(str):
    """JSON text to splice in verbatim (too deep to build as Python objects)."""


def _dump(obj: Any) -> bytes:
    raws: list[str] = []

    def default(o: Any) -> Any:
        raise TypeError

    def walk(o: Any) -> Any:
        if isinstance(o, _Raw):
            raws.append(str(o))
            return f"\x00RAW{len(raws) - 1}\x00"
        if isinstance(o, dict):
            return {k: walk(v) for k, v in o.items()}
        if isinstance(o, list):
            return [walk(v) for v in o]
        return o

    text = json.dumps(walk(obj), default=default)
    for k, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00RAW{k}\x00"), raw)
    return text.encode()


def _mutate_header_json(data: bytes, rng: np.random.Generator) -> bytes:
    parts = _split(data)
    if parts is None:
        return data
    _, header, body = parts
    try:
        obj = json.loads(header)
    except (ValueError, RecursionError):
        return data
    if not isinstance(obj, dict):
        return data
    names = list(obj)
    op = int(rng.integers(6))
    if op <= 2 and names:  # mutate one entry (the most common and most useful case)
        name = names[int(rng.integers(len(names)))]
        obj[name] = _mutate_entry(obj[name], rng, names)
    elif op == 3 and names:  # duplicate an entry under another name: overlaps
        name = names[int(rng.integers(len(names)))]
        obj[name + "_copy"] = obj[name]
    elif op == 4:
        obj["__metadata__"] = _odd(rng) if rng.random() < 0.5 else {"k": _odd(rng)}
    elif names:
        del obj[names[int(rng.integers(len(names)))]]
    try:
        text = _dump(obj)
    except (TypeError, ValueError):
        return data
    pad = int(rng.integers(0, 9))
    return _join(text + b" " * pad, body)


def _mutate_header_bytes(data: bytes, rng: np.random.Generator) -> bytes:
    parts = _split(data)
    if parts is None or not parts[1]:
        return data
    _, header, body = parts
    h = bytearray(header)
    op = int(rng.integers(5))
    i = int(rng.integers(len(h)))
    if op == 0:
        h[i] = int(rng.integers(256))
    elif op == 1:
        h[i:i] = bytes(rng.choice([b"\xff", b"\xef\xbb\xbf", b"\x00", b"\\u0000", b"\xc3",
                                   b'"', b",", b"}", b"]", b"1e999", b"-"]))
    elif op == 2:
        del h[i]
    elif op == 3:  # a duplicated key, by text
        m = re.search(rb'"([^"]+)":', bytes(h))
        if m:
            h = bytearray(bytes(h).replace(b"{", b"{" + m.group(0) + b"0,", 1))
    else:
        j = int(rng.integers(len(h)))
        h[min(i, j):max(i, j)] = b""
    return _join(bytes(h), body)


def _mutate_length(data: bytes, rng: np.random.Generator) -> bytes:
    size = len(data)
    n = int.from_bytes(data[:8], "little") if size >= 8 else 0
    choices = [0, 1, 2, n - 1, n + 1, n + 8, size - 8, size - 7, size, 2**31, 2**32,
               100 * 1024 * 1024, 100 * 1024 * 1024 + 1, 2**63 - 1, 2**63, 2**64 - 1]
    value = int(choices[int(rng.integers(len(choices)))]) % 2**64
    return struct.pack("<Q", value) + data[8:]


def _mutate_file(data: bytes, rng: np.random.Generator) -> bytes:
    op = int(rng.integers(4))
    if op == 0:
        return data[: int(rng.integers(len(data) + 1))]
    if op == 1:
        return data + bytes(rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8))
    if op == 2 and len(data) > 8:
        i = int(rng.integers(8, len(data)))
        return data[:i] + data[i + int(rng.integers(1, 16)):]
    b = bytearray(data)
    if b:
        b[int(rng.integers(len(b)))] ^= 1 << int(rng.integers(8))
    return bytes(b)


SAFETENSORS_MUTATIONS = {"header-json": _mutate_header_json, "header-bytes": _mutate_header_bytes,
                         "length": _mutate_length, "file": _mutate_file}
SAFETENSORS_WEIGHTS = {"header-json": 6, "header-bytes": 2, "length": 1, "file": 2}


def safetensors_inputs(count: int, seed: int, start: int = 0
                       ) -> Iterator[tuple[int, bytes, list[str]]]:
    seeds = safetensors_seeds()
    names = list(SAFETENSORS_MUTATIONS)
    p = np.array([SAFETENSORS_WEIGHTS[n] for n in names], float)
    p /= p.sum()
    for index in range(start, start + count):
        rng = _rng(seed, index, 0x5AFE)
        data = seeds[int(rng.integers(len(seeds)))]
        applied = []
        for _ in range(int(rng.integers(1, 4))):
            name = names[int(rng.choice(len(names), p=p))]
            data = SAFETENSORS_MUTATIONS[name](data, rng)
            applied.append(name)
        yield index, data, applied


def check_safetensors_load(path: Path, data: bytes) -> tuple[str, str]:
    """(outcome, detail): rejected | loaded | empty, or a bug kind (exception, bad-view,
    wrong-bytes, wrong-f32)."""
    from nanocompile.checkpoint.safetensors import SafetensorsError, SafetensorsFile

    try:
        f = SafetensorsFile.open(path)
    except SafetensorsError as e:
        return "rejected", _message_class(str(e), path)
    except Exception as e:  # RecursionError, OverflowError, ...: a bug
        return "exception", f"{type(e).__name__} in open: {str(e)[:200]}"
    with f:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        mapping = f._mapping  # the file's mapping: every view must lie in it
        assert mapping is not None
        base = np.frombuffer(mapping, np.uint8)
        bounds = (base.ctypes.data, base.ctypes.data + base.size)
        for name in f.names:
            problem = _check_tensor(f, name, header[name], data[8 + n:], bounds)
            if problem is not None:
                return problem
        return ("loaded" if f.names else "empty"), ""


def _check_tensor(f: Any, name: str, entry: dict[str, Any], body: bytes,
                  bounds: tuple[int, int]) -> tuple[str, str] | None:
    """None if ``raw(name)`` and ``f32(name)`` are right or a clean SafetensorsError."""
    from nanocompile.checkpoint.safetensors import DTYPES, EXACT_F32_DTYPES, SafetensorsError

    try:
        arr = f.raw(name)
    except SafetensorsError:
        return None
    except Exception as e:
        return "exception", f"{type(e).__name__} in raw({name!r}): {str(e)[:200]}"
    begin, end = entry["data_offsets"]
    start = arr.__array_interface__["data"][0]
    lo, hi = bounds
    if arr.nbytes and not (lo <= start and start + arr.nbytes <= hi):
        return "bad-view", f"{name!r}: [{start - lo}, +{arr.nbytes}) outside the mapping"
    if (arr.dtype != DTYPES[entry["dtype"]] or list(arr.shape) != entry["shape"]
            or arr.tobytes() != body[begin:end]):
        return "wrong-bytes", f"{name!r}: not the header's dtype/shape/bytes"
    try:
        wide = f.f32(name)
    except SafetensorsError:
        if entry["dtype"] in EXACT_F32_DTYPES:
            return "wrong-f32", f"{name!r}: f32() refused {entry['dtype']}"
        return None
    except Exception as e:
        return "exception", f"{type(e).__name__} in f32({name!r}): {str(e)[:200]}"
    if not np.array_equal(wide.view(np.uint32), _widen(arr, entry["dtype"])):
        return "wrong-f32", f"{name!r}: f32() of {entry['dtype']} is not exact"
    return None


def _widen(raw: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return raw.astype(np.uint32) << np.uint32(16)
    return raw.astype(np.float32).view(np.uint32)


def _message_class(message: str, path: Path) -> str:
    text = message.replace(str(path), "").lstrip(": ")
    text = re.sub(r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|-?\d+|\([^)]*\)", "_", text)
    return text[:60]


SAFETENSORS_BUGS = ("exception", "bad-view", "wrong-bytes", "wrong-f32")


def safetensors_kind(outcome: str, detail: str) -> str:
    """The finding kind: the exception type and where it escaped (and for a
    ValueError from raw(), NumPy's reason), e.g. ``exception: OverflowError in open``."""
    if outcome != "exception":
        return outcome
    match = re.match(r"(\w+) in (\w+)\(?[^:]*: (.*)", detail)
    if match is None:
        return f"exception: {detail[:40]}"
    kind = f"exception: {match[1]} in {match[2]}"
    if match[1] == "ValueError" and match[2] == "raw":
        reasons = ("cannot reshape", "Maximum allowed dimension", "array is too big")
        reason = next((r for r in reasons if r in match[3]), match[3][:30])
        kind += f": {reason}"
    return kind


def safetensors_campaign(count: int, seed: int, *, workdir: Path | None = None,
                         save_dir: Path | None = None) -> Report:
    report = Report("safetensors", seed)
    start = time.perf_counter()
    messages: collections.Counter[str] = collections.Counter()
    mutations: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "input.safetensors"
        for index, data, applied in safetensors_inputs(count, seed):
            path.write_bytes(data)
            mutations.update(applied)
            outcome, detail = check_safetensors_load(path, data)
            report.count += 1
            report.outcomes[outcome] += 1
            if outcome == "rejected":
                messages[detail] += 1
            if outcome in SAFETENSORS_BUGS:
                saved = None
                if save_dir is not None:
                    save_dir.mkdir(parents=True, exist_ok=True)
                    saved = save_dir / f"safetensors-{seed}-{index}.bin"
                    saved.write_bytes(data)
                kind = safetensors_kind(outcome, detail)
                report.find(kind, SAFETENSORS_REGRESSIONS.get(kind), index=index, mutations=applied,
                            detail=detail, saved=str(saved) if saved else None)
    report.seconds = time.perf_counter() - start
    report.extra["mutations"] = dict(sorted(mutations.items()))
    report.extra["rejections"] = dict(messages.most_common(25))
    return report


# --------------------------------------------------------------------------
# graphs campaign
# --------------------------------------------------------------------------


def graphs_campaign(count: int, seed: int, *, batch: int = 8, bindings: int = 4,
                    sanitize: bool | None = None, progress: bool = False) -> Report:
    from nanocompile.testing.random_graphs import REGRESSION_TESTS, BatchReport, fuzz_graphs

    report = Report("graphs", seed)
    start = time.perf_counter()
    total = BatchReport()
    first = seed * 1_000_000  # graph seeds of campaign `seed`: a disjoint range per seed
    for k in range(0, count, batch):
        seeds = list(range(first + k, first + min(k + batch, count)))
        total.merge(fuzz_graphs(seeds, data_seed=first + k, bindings_count=bindings,
                                sanitize=sanitize))
        if progress:
            print(f"graphs: {min(k + batch, count)}/{count} "
                  f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    report.count = total.graphs
    report.outcomes.update({"runs": total.runs, "errors_agreed": total.errors_agreed})
    report.outcomes.update({f"outputs:{k}": v for k, v in total.outputs.items()})
    failed_graphs: dict[str, set[int | None]] = collections.defaultdict(set)
    for finding in total.findings:
        failed_graphs[finding.kind].add(finding.seed)
        report.bugs[finding.kind] += 1
        if len(report.findings) < MAX_FINDINGS:
            report.findings.append({"kind": finding.kind,
                                    "regression_test": REGRESSION_TESTS.get(finding.kind),
                                    "graph_seed": finding.seed, "output": finding.output,
                                    "bindings": finding.bindings,
                                    "detail": finding.message[:400]})
    report.extra["graphs_with_findings"] = {k: len(v) for k, v in failed_graphs.items()}
    # outputs whose pipelines differed only in two-NaN payloads (the stated limit)
    report.extra["two_nan_payload_outputs"] = dict(total.two_nan_payloads)
    report.extra["primitives"] = dict(sorted(total.ops.items()))
    report.seconds = time.perf_counter() - start
    return report


def replay_graph(graph_seed: int, batch: int = 8, bindings: int = 4) -> int:
    """Print the graph of ``graph_seed`` and rerun the campaign batch that held it,
    with the campaign's data (assuming the campaign's count was a multiple of
    ``batch``), printing the findings."""
    from nanocompile.testing.random_graphs import build_batch, fuzz_graphs

    print(build_batch([graph_seed]).module)
    first = graph_seed - graph_seed % 1_000_000
    start = graph_seed - (graph_seed - first) % batch
    result = fuzz_graphs(list(range(start, start + batch)), data_seed=start,
                         bindings_count=bindings)
    for finding in result.findings:
        print(finding)
    mine = [f for f in result.findings if f.seed == graph_seed]
    print(f"batch {start}..{start + batch - 1}: {result.runs} runs, outputs "
          f"{dict(result.outputs)}, {len(result.findings)} findings, {len(mine)} in graph "
          f"{graph_seed}")
    return 1 if result.findings else 0


# --------------------------------------------------------------------------
# atheris (coverage-guided) engine
# --------------------------------------------------------------------------


def atheris_run(campaign: str, count: int, seed: int) -> int:
    """Run the campaign's check under atheris/libFuzzer, from the same seed corpus."""
    import atheris

    with atheris.instrument_imports():
        import nanocompile.checkpoint.safetensors
        import nanocompile.tools.nc_opt  # noqa: F401
    corpus = Path(tempfile.mkdtemp(prefix=f"atheris-{campaign}-"))
    if campaign == "safetensors":
        for k, data in enumerate(safetensors_seeds()):
            (corpus / f"seed{k}").write_bytes(data)
    else:
        for k, s in enumerate(mlir_seeds()):
            (corpus / f"seed{k}").write_text(s.text)
    target = Path(tempfile.mkdtemp(prefix="atheris-input-")) / "input"
    os.environ["NANOCOMPILE_TRACEBACK"] = "1"

    def one_input(data: bytes) -> None:
        """Raise (atheris reports a crash with the input) on a bug."""
        if campaign == "safetensors":
            target.write_bytes(data)
            outcome, detail = check_safetensors_load(target, data)
            if outcome in SAFETENSORS_BUGS:
                raise AssertionError(f"{safetensors_kind(outcome, detail)}: {detail}")
        else:
            path = target.with_suffix(".mlir")
            path.write_bytes(data)
            outcome, detail = run_ncopt_inprocess(path, (), 5.0)
            if outcome in NCOPT_BUGS:
                kind = ncopt_kind(outcome, data.decode("utf-8", "replace"))
                raise AssertionError(f"{kind}: {detail}")

    atheris.Setup([sys.argv[0], f"-runs={count}", f"-seed={seed}", str(corpus)], one_input)
    atheris.Fuzz()
    return 0


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("campaign", choices=("nc-opt", "safetensors", "graphs", "threads",
                                             "cache", "json", "chains"))
    parser.add_argument("--count", type=int, default=1000, help="inputs (graphs) to try")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--subprocess", type=int, default=0, metavar="N",
                        help="nc-opt: also run the first N inputs as nc-opt processes")
    parser.add_argument("--batch", type=int, default=8, help="graphs: graphs per library")
    parser.add_argument("--bindings", type=int, default=4, help="graphs: runs per batch")
    parser.add_argument("--sanitize", action="store_true",
                        help="graphs: build sanitized kernels (run under sanitizer_env())")
    parser.add_argument("--replay", type=int, metavar="I",
                        help="rerun input I only (graphs: the graph of seed I)")
    parser.add_argument("--save", type=Path, metavar="DIR", help="write failing inputs here")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the report here")
    parser.add_argument("--engine", choices=("builtin", "atheris"), default="builtin")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args(argv)
    if args.engine == "atheris":
        if args.campaign == "graphs":
            parser.error("--engine atheris supports nc-opt and safetensors")
        return atheris_run(args.campaign, args.count, args.seed)
    if args.replay is not None:
        return _replay(args.campaign, args.replay, args.seed, args.batch, args.bindings)
    if args.campaign in ("threads", "cache", "json", "chains"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # fuzz_runtime beside us
        import fuzz_runtime

        report = Report(args.campaign, args.seed)
        fuzz_runtime.run(report, args.campaign, args.count, args.seed)
    elif args.campaign == "nc-opt":
        report = ncopt_campaign(args.count, args.seed, subprocess_sample=args.subprocess,
                                save_dir=args.save)
    elif args.campaign == "safetensors":
        report = safetensors_campaign(args.count, args.seed, save_dir=args.save)
    else:
        report = graphs_campaign(args.count, args.seed, batch=args.batch,
                                 bindings=args.bindings,
                                 sanitize=True if args.sanitize else None,
                                 progress=args.progress)
    text = json.dumps(report.to_json(), indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 1 if report.new_bugs else 0


def _replay(campaign: str, index: int, seed: int, batch: int = 8, bindings: int = 4) -> int:
    if campaign == "graphs":
        return replay_graph(index, batch, bindings)
    with tempfile.TemporaryDirectory() as tmp:
        if campaign == "nc-opt":
            item = next(ncopt_inputs(1, seed, start=index))
            path = Path(tmp) / "input.mlir"
            path.write_text(item.text, errors="surrogateescape")
            print(f"// seed file {item.seed_name}, options {' '.join(item.options)}, "
                  f"mutations {item.mutations}")
            print(item.text)
            outcome, detail = run_ncopt_subprocess(path, item.options, 60)
        else:
            _, data, applied = next(safetensors_inputs(1, seed, start=index))
            path = Path(tmp) / "input.safetensors"
            path.write_bytes(data)
            print(f"mutations {applied}; {len(data)} bytes; header "
                  f"{data[8:8 + min(2000, int.from_bytes(data[:8], 'little'))]!r}")
            outcome, detail = check_safetensors_load(path, data)
        print(f"outcome: {outcome}\n{detail}")
        bad = NCOPT_BUGS if campaign == "nc-opt" else SAFETENSORS_BUGS
        return 1 if outcome in bad else 0


if __name__ == "__main__":
    sys.exit(main())

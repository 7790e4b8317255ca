"""The Python API: load a Qwen2 snapshot, compile it, generate text.

    from nanocompile.api import load

    model = load("path/to/Qwen2.5-0.5B-Instruct")     # compiles with gcc (cached)
    result = model.generate("The capital of France is", max_tokens=16)
    print(result.text, f"{result.decode_tok_per_s:.1f} tok/s")
    print(model.chat([{"role": "user", "content": "Hi!"}]).text)
    logits = model.logits(model.tokenizer.encode("Hello"))   # [seq, vocab] f32
    print(model.ir("loop", n_layers=1))                      # the IR at a stage

``load()`` without a directory uses the embedded default: the **synthetic**
Qwen2.5-0.5B checkpoint (spec §1.2: the real architecture and tokenizer with
deterministic random weights, so its text is meaningless), generated once
(~1 GB) into the user cache directory and reused after.

Backends: ``"c"`` (the compiler: Graph IR -> Loop IR -> C -> gcc -> ctypes)
and ``"interpreter"`` (the NumPy reference that defines what a graph means).

Weights: ``weights="bf16"`` (the default for a snapshot storing bf16, as
Qwen2 releases do) binds the kernels to the snapshot's mapped bf16 tensors,
widened in registers (nothing copied at load); ``weights="f32"`` widens every
tensor to f32 at load. Both compute the same bits.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nanocompile.analysis.work import count_work
from nanocompile.backend.gcc import default_cache_dir, sweep_stale
from nanocompile.backend.runtime import CompiledBackend, CompiledProgram
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.jsonfile import JSONFileError, read_json
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.checkpoint.synth import SYNTH_VERSION, write_synthetic_snapshot
from nanocompile.compiler import STAGES, CompileTimes, Pipeline, compile_program
from nanocompile.inference.engine import (
    WEIGHT_FORMATS,
    Engine,
    SnapshotWeights,
    check_weights,
    default_weights,
    wide_weights,
)
from nanocompile.inference.generate import (
    ContextLengthError,
    GenerationResult,
    TokenCallback,
    generate_tokens,
)
from nanocompile.inference.progress import Progress, report_step
from nanocompile.inference.sampling import Sampler, SamplingParams
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.tokenizer.chat import render_chat
from nanocompile.tokenizer.tokenizer import Tokenizer

__all__ = [
    "BACKENDS",
    "ContextLengthError",
    "GenerationResult",
    "Model",
    "SamplingParams",
    "default_model_dir",
    "ensure_default_snapshot",
    "ir_text",
    "load",
]

BACKENDS = ("c", "interpreter")
DEFAULT_SEED = 0
DEFAULT_NAME = f"synthetic-qwen2.5-0.5b-seed{DEFAULT_SEED}"
MARKER = "nanocompile-default.json"
# the longest step a prompt runs in: longer prompts prefill in consecutive cached steps, so
# the attention temporaries stay ~chunk x context, not context^2 (Engine.chunk)
PREFILL_CHUNK = 512
# a staging directory of the default snapshot older than this has no live writer (generating
# it takes seconds to minutes); one whose writer's pid is gone is removed at once
STAGING_MAX_AGE = 6 * 3600.0
END_OF_TEXT = "<|endoftext|>"
IM_END = "<|im_end|>"

Message = Mapping[str, Any]


# --------------------------------------------------------------------------
# the embedded default model


def home_dir() -> Path:
    """``$NANOCOMPILE_HOME``, else ``$XDG_CACHE_HOME/nanocompile``, else
    ``~/.cache/nanocompile``."""
    home = os.environ.get("NANOCOMPILE_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "nanocompile"
    return Path.home() / ".cache" / "nanocompile"


def default_model_dir() -> Path:
    """Where the embedded default (synthetic) snapshot lives."""
    return home_dir() / DEFAULT_NAME


def _marker() -> dict[str, object]:
    return {"synthetic": True, "synth_version": SYNTH_VERSION, "seed": DEFAULT_SEED}


def _is_current(directory: Path) -> bool:
    try:
        return read_json(directory / MARKER) == _marker()
    except JSONFileError:
        return False


def ensure_default_snapshot(progress: Progress | None = None) -> Path:
    """The default synthetic snapshot's directory, generated first if needed.

    Written into a temporary sibling and renamed into place, so the directory
    is either complete or absent (a marker file records the generator
    version; a stale or foreign directory is replaced). Concurrent callers
    may both generate; one rename wins and the other's copy is discarded.
    """
    target = default_model_dir()
    staging_prefix = f".{target.name}."  # .<name>.<pid>-<random>: see sweep_stale
    sweep_stale(target.parent.glob(f"{staging_prefix}*"), staging_prefix, STAGING_MAX_AGE)
    if _is_current(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{staging_prefix}{os.getpid()}-", dir=target.parent))
    what = "generating the synthetic Qwen2.5-0.5B snapshot (first run only, ~1 GB)"

    def forward(_: str, done: int, total: int) -> None:
        if progress is not None:
            progress(what, done, total)

    try:
        write_synthetic_snapshot(staging, seed=DEFAULT_SEED, progress=forward)
        (staging / MARKER).write_text(json.dumps(_marker()) + "\n", encoding="utf-8")
        _install(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _install(staging: Path, target: Path) -> None:
    if target.exists() and not _is_current(target):
        shutil.rmtree(target)  # an older generator's output (ours: it lives in our cache)
    try:
        staging.rename(target)
    except OSError:
        if not _is_current(target):  # not a concurrent process that won the race
            raise


# --------------------------------------------------------------------------
# IR at each stage


def ir_text(config: Qwen2Config, stage: str, *, n_layers: int | None = None,
            last_only: bool = True, explain: bool = False, weights: str = "f32",
            wide: frozenset[str] = frozenset()) -> str:
    """The program for ``config`` after ``stage``, as text, exactly as
    ``compile_program`` builds it: "graph" (as written), "fused" (after the
    graph passes: cse, fold-constants, dce, fuse), "loop" (Loop IR),
    "scheduled" (the Loop IR with the ``sched.schedule`` default-schedule
    chose for each kernel after it: phase 4) or "c" (of the scheduled
    kernels). ``explain`` (stage "scheduled" only) puts ``//`` comment lines
    first: per kernel, the candidate schedules refused, with the reason, and
    the one chosen. ``weights``: the weight format (``"f32"`` or ``"bf16"``;
    with bf16 the names in ``wide`` stay f32 weights)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    if explain and stage != "scheduled":
        raise ValueError(f"explain needs stage 'scheduled', got {stage!r}")
    graph = build_qwen2(config, Qwen2GraphOptions(n_layers=n_layers, last_only=last_only,
                                                  weights=check_weights(weights), wide=wide))
    pipeline = Pipeline(graph)
    text = pipeline.text(stage)
    if not explain:
        return text
    return "\n".join([*pipeline.explain(), text])


# --------------------------------------------------------------------------
# the model


@dataclass
class _Compiled:
    """One graph on the chosen backend, with what compiling it cost."""

    graph: ModuleOp
    engine: Engine
    program: CompiledProgram | None = None
    times: CompileTimes = field(default_factory=CompileTimes)


class Model:
    """A loaded Qwen2 snapshot on one backend. Create it with :func:`load`."""

    def __init__(self, snapshot: Snapshot, tokenizer: Tokenizer, *, backend: str,
                 last_only: bool, context: int, synthetic: bool,
                 progress: Progress | None, weights: str = "f32") -> None:
        self.snapshot = snapshot
        self.config: Qwen2Config = snapshot.config
        self.tokenizer = tokenizer
        self.backend = backend
        self.last_only = last_only
        self.context = context
        self.synthetic = synthetic
        self._progress = progress
        self.weights = check_weights(weights)
        self._wide = wide_weights(snapshot) if weights == "bf16" else frozenset()
        self._weights = SnapshotWeights(snapshot, weights)
        self._graphs: dict[bool, _Compiled] = {}
        self._compile_lock = threading.Lock()

    @property
    def path(self) -> Path:
        """The snapshot directory."""
        return self.snapshot.path

    def __repr__(self) -> str:
        kind = "synthetic (meaningless text)" if self.synthetic else "checkpoint"
        return (f"Model({str(self.path)!r}, backend={self.backend!r}, "
                f"weights={self.weights!r}, layers={self.config.num_hidden_layers}, {kind})")

    # -- engines ----------------------------------------------------------

    def _options(self, last_only: bool, n_layers: int | None = None) -> Qwen2GraphOptions:
        return Qwen2GraphOptions(n_layers=n_layers, last_only=last_only, weights=self.weights,
                                 wide=self._wide)

    def widen_weights(self) -> None:
        """Widen now the weights the format widens to f32 (otherwise that happens on
        first use): every one with ``weights="f32"``; with ``"bf16"`` only those the
        snapshot stores otherwise than bf16 (the rest stay the mapped bf16 bits)."""
        names = [n for n in self._weights if self.weights == "f32" or n in self._wide]
        for done, name in enumerate(names, 1):
            self._weights[name]
            if self._progress is not None:
                self._progress("widening the weights to f32", done, len(names))

    def _compiled(self, last_only: bool) -> _Compiled:
        """The engine for a last-position-only (or full-logits) graph, built once."""
        if not self.last_only:
            last_only = False  # one full graph serves everything
        with self._compile_lock:  # two threads asking at once compile it once
            found = self._graphs.get(last_only)
            if found is None:
                found = self._graphs[last_only] = self._build(last_only)
            return found

    def _build(self, last_only: bool) -> _Compiled:
        graph = build_qwen2(self.config, self._options(last_only))
        if self.backend == "interpreter":
            return _Compiled(graph, Engine(self.config, InterpreterBackend(graph, self._weights),
                                           chunk=PREFILL_CHUNK))
        times = CompileTimes()
        kind = "last-position" if last_only else "all-position"
        program = report_step(
            self._progress, f"compiling the model ({kind} logits)",
            lambda: compile_program(graph, self._weights, schedule=True, times=times))
        return _Compiled(graph, Engine(self.config, CompiledBackend(program), chunk=PREFILL_CHUNK),
                         program, times)

    @property
    def engine(self) -> Engine:
        """The generation engine (the last-position graph when ``last_only``)."""
        return self._compiled(last_only=True).engine

    # -- logits -----------------------------------------------------------

    def logits(self, token_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Logits ``f32[seq, vocab]`` of one uncached forward pass over ``token_ids``."""
        ids = np.asarray(token_ids)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError(f"token ids must be a non-empty 1-D sequence, got shape {ids.shape}")
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"token ids must be integers, got {ids.dtype}")
        vocab = self.config.vocab_size
        if ids.min() < 0 or ids.max() >= vocab:
            raise ValueError(f"token ids must be in [0, {vocab}), got {int(ids.min())}.."
                             f"{int(ids.max())}")
        if ids.size > self.config.max_position_embeddings:
            raise ContextLengthError(
                f"{ids.size} tokens exceed the model's context of "
                f"{self.config.max_position_embeddings} (max_position_embeddings)")
        return self._compiled(last_only=False).engine.forward(ids.astype(np.int64))

    # -- generation -------------------------------------------------------

    def stop_ids(self, chat: bool) -> frozenset[int]:
        """``<|endoftext|>`` for plain text; ``<|im_end|>`` (and ``<|endoftext|>``) for chat.

        Ids come from the tokenizer; a tokenizer without these names falls
        back to the config's ``eos_token_id``.
        """
        names = (IM_END, END_OF_TEXT) if chat else (END_OF_TEXT,)
        ids = {self.tokenizer.id_of(n) for n in names if n in self.tokenizer.special_tokens}
        return frozenset(ids or {self.config.eos_token_id})

    def generate(self, prompt: str, *, max_tokens: int = 64,
                 sampling: SamplingParams | Sampler | None = None, stop_at_eos: bool = True,
                 chat: bool = False, on_token: TokenCallback | None = None) -> GenerationResult:
        """Continue ``prompt`` by up to ``max_tokens`` tokens.

        ``sampling=None`` is greedy; a :class:`Sampler` keeps its random state
        across calls. With ``chat=True`` the prompt is one user turn of a
        ChatML conversation (see :meth:`chat`). Generation stops at
        ``<|endoftext|>`` unless ``stop_at_eos`` is false. ``on_token`` gets
        each piece of text as soon as it is complete (a character split
        across tokens arrives whole).
        """
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
        if chat:
            return self.chat([{"role": "user", "content": prompt}], max_tokens=max_tokens,
                             sampling=sampling, stop_at_eos=stop_at_eos, on_token=on_token)
        return self.generate_ids(self.tokenizer.encode(prompt), max_tokens=max_tokens,
                                 sampling=sampling, on_token=on_token,
                                 stop_ids=self.stop_ids(chat=False) if stop_at_eos else ())

    def chat(self, messages: Sequence[Message], *, max_tokens: int = 64,
             sampling: SamplingParams | Sampler | None = None, stop_at_eos: bool = True,
             on_token: TokenCallback | None = None) -> GenerationResult:
        """The assistant's reply to ``messages`` (dicts with ``role`` and ``content``).

        The conversation is rendered with the snapshot's chat template (ChatML
        for Qwen2.5, with its default system message when none is given) and
        the reply stops at ``<|im_end|>``.
        """
        text = render_chat(messages, add_generation_prompt=True, snapshot_dir=self.path)
        return self.generate_ids(self.tokenizer.encode(text), max_tokens=max_tokens,
                                 sampling=sampling, on_token=on_token,
                                 stop_ids=self.stop_ids(chat=True) if stop_at_eos else ())

    def generate_ids(self, prompt_ids: Sequence[int], *, max_tokens: int = 64,
                     sampling: SamplingParams | Sampler | None = None,
                     stop_ids: Sequence[int] | frozenset[int] = (),
                     on_token: TokenCallback | None = None) -> GenerationResult:
        """Generate after token ids (ints or NumPy integers), stopping at any of ``stop_ids``."""
        ids = [_token_id(i) for i in prompt_ids]
        bad = [i for i in ids if not 0 <= i < self.config.vocab_size]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary "
                             f"[0, {self.config.vocab_size})")
        return generate_tokens(self.engine, self.tokenizer, ids,
                               max_tokens=max_tokens, sampler=_sampler(sampling),
                               stop_ids=frozenset(stop_ids), context=self.context,
                               on_token=on_token)

    # -- inspection -------------------------------------------------------

    def ir(self, stage: str, n_layers: int | None = None) -> str:
        """The generation program after ``stage`` ("graph", "fused", "loop",
        "scheduled" or "c"), as text."""
        return ir_text(self.config, stage, n_layers=n_layers, last_only=self.last_only,
                       weights=self.weights, wide=self._wide)

    def compile_report(self) -> dict[str, Any]:
        """Work per decode step counted from the Loop IR, and what compiling cost.

        ``bytes_per_step`` is the exact bytes-moved polynomial in ``past``
        (cached tokens) and ``seq`` (new tokens); ``bytes_per_decode_step``
        evaluates it at ``past=0, seq=1``. ``weights`` is the weight format,
        ``widened_weights`` how many tensors it widens to f32 (with f32 every
        tensor not stored as F32; with bf16 those stored as F16) and
        ``widened_weight_bytes`` the memory of those copies. Compile fields are
        ``None`` on the interpreter backend.
        """
        built = self._compiled(last_only=True)
        if built.program is not None:
            loop_module = built.program.program.parent_op()
            assert isinstance(loop_module, ModuleOp)
        else:
            loop_module = Pipeline(built.graph).module("loop")
        work = count_work(loop_module)
        moved = work.bytes_moved
        compiled = built.program is not None
        t = built.times
        return {
            "model": str(self.path),
            "synthetic": self.synthetic,
            "backend": self.backend,
            "layers": self.config.num_hidden_layers,
            "last_only": self.last_only,
            "weights": self.weights,
            "widened_weights": sum(1 for n in self.snapshot.expected_tensors()
                                   if self.snapshot.dtype(n) != "F32"
                                   and (self.weights == "f32" or n in self._wide)),
            "widened_weight_bytes": self._weights.widened_bytes(),
            "launches_per_step": work.launches,
            "distinct_kernels": work.distinct_kernels,
            "bytes_per_step": str(moved),
            "bytes_per_decode_step": moved.evaluate({s: 1 if s == "seq" else 0
                                                     for s in moved.symbols}),
            "compile_seconds": t.total if compiled else None,
            "compile_stages": t.stages() if compiled else None,
            "cache_hit": t.cache_hit if compiled else None,
            "library": str(built.program.library.path) if built.program else None,
            "kernel_cache_dir": str(default_cache_dir()),
        }


def _token_id(value: object) -> int:
    """``value`` as a token id: an int or a NumPy integer, never a float, str or bool."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
        return int(value)
    raise ValueError(f"token ids must be integers, got {value!r} ({type(value).__name__})")


def _sampler(sampling: SamplingParams | Sampler | None) -> Sampler:
    if isinstance(sampling, Sampler):
        return sampling
    if sampling is None:
        return Sampler(SamplingParams(temperature=0.0))
    if not isinstance(sampling, SamplingParams):
        raise TypeError(f"sampling must be SamplingParams, a Sampler or None, "
                        f"got {type(sampling).__name__}")
    return Sampler(sampling)


def _context(config: Qwen2Config, context: int | None) -> int:
    limit = config.max_position_embeddings
    if context is None:
        return limit
    if isinstance(context, bool) or not isinstance(context, int) or not 2 <= context <= limit:
        raise ValueError(f"context must be an integer in [2, {limit}] "
                         f"(max_position_embeddings), got {context!r}")
    return context


def load(model_dir: str | os.PathLike[str] | None = None, *, backend: str = "c",
         last_only: bool = True, context: int | None = None,
         progress: Progress | None = None, weights: str | None = None) -> Model:
    """Open a Qwen2 snapshot directory and get it ready to run on ``backend``.

    ``model_dir=None`` is the embedded default: the synthetic Qwen2.5-0.5B
    (deterministic random weights: its text is meaningless), generated once
    into :func:`default_model_dir`. ``backend`` is ``"c"`` (compiled, the
    default) or ``"interpreter"``. With ``last_only`` generation runs a graph
    that computes the last position's logits only (``Model.logits`` then
    compiles a second, all-position graph on first use). ``context`` caps
    prompt plus generated tokens (default ``max_position_embeddings``).
    ``progress(what, done, total)`` hears about the slow steps. ``weights``
    is the weight format: ``"bf16"`` (the kernels read the snapshot's bf16
    tensors where they lie, mapped, and widen in registers; tensors stored
    otherwise are widened to f32) or ``"f32"`` (every tensor widened at
    load); ``None``: bf16 when the snapshot stores bf16 tensors, else f32.
    The two formats compute the same bits.

    Raises ``SnapshotError``/``ConfigError``/``SafetensorsError`` for a bad
    directory and ``ValueError`` for bad options.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if weights is not None and weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHT_FORMATS)} (or None: "
                         f"the snapshot's), got {weights!r}")
    synthetic = model_dir is None
    directory = ensure_default_snapshot(progress) if model_dir is None else Path(model_dir)
    snapshot = Snapshot.open(directory)
    try:
        fmt = default_weights(snapshot) if weights is None else weights
        if fmt == "bf16" and default_weights(snapshot) != "bf16":
            raise ValueError(f"weights='bf16': {directory} stores no tensor in bf16 "
                             "(use weights='f32')")
        model = Model(snapshot, Tokenizer.from_dir(directory), backend=backend,
                      last_only=last_only, context=_context(snapshot.config, context),
                      synthetic=synthetic, progress=progress, weights=fmt)
        model.widen_weights()
        model._compiled(last_only=True)
    except BaseException:
        snapshot.close()
        raise
    return model

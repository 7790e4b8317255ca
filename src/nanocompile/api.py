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
tensor to f32 at load. Both compute the same bits. ``weights="int8"`` is
spec §5's kernel A (nanoinfer's default int8 mode, W8A32): the seven
projections of every layer and the tied embedding (its lookup and the LM
head) become int8 values with an f32 scale per output row (the
``quantize-int8`` pass), quantized at the first load from the snapshot's
exact f32 values and kept in :func:`int8_cache_dir` (mapped after);
``int8_embedding=False`` keeps the embedding and the LM head as the snapshot
stores them. Everything else (norms, biases) stays as with the snapshot's
default format. ``weights="int8-dot"`` is kernel B (W8A8) for the projections,
the LM head kernel A (f32 activations) unless ``int8_dot_head=True`` (spec
§5's switch: its activations quantized too).

    model = load(weights="int8")                         # kernel A, int8 LM head
    model = load(weights="int8", int8_embedding=False)   # projections only
    model = load(weights="int8-dot", int8_dot_head=True) # kernel B, LM head too
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from nanocompile.analysis.work import count_work
from nanocompile.backend import tuning_records
from nanocompile.backend.gcc import default_cache_dir, sweep_stale
from nanocompile.backend.runtime import CompiledBackend, CompiledProgram
from nanocompile.checkpoint.aligned import AlignedCopies
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.jsonfile import JSONFileError, read_json
from nanocompile.checkpoint.snapshot import Int8Cache, Snapshot
from nanocompile.checkpoint.synth import SYNTH_VERSION, write_synthetic_snapshot
from nanocompile.compiler import (
    STAGES,
    CompileOptions,
    CompileTimes,
    Pipeline,
    compile_program,
    int8_pass,
    quantize_graph,
)
from nanocompile.inference.engine import (
    WEIGHT_FORMATS,
    Engine,
    SnapshotWeights,
    check_weights,
    default_weights,
    wide_weights,
)
from nanocompile.inference.generate import (
    CancelCheck,
    ContextLengthError,
    GenerationResult,
    TokenCallback,
    generate_tokens,
)
from nanocompile.inference.prefix import PrefixCache
from nanocompile.inference.progress import Progress, StderrProgress, report_step
from nanocompile.inference.sampling import Sampler, SamplingParams
from nanocompile.interpreter import InterpreterBackend
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.targets.arch import host_arch
from nanocompile.tokenizer.chat import render_chat
from nanocompile.tokenizer.tokenizer import Tokenizer
from nanocompile.tuning.tune import Outcome, jobs
from nanocompile.tuning.tune import Progress as TuneProgress
from nanocompile.tuning.tune import tune as tune_jobs

__all__ = [
    "BACKENDS",
    "FORMATS",
    "ContextLengthError",
    "GenerationResult",
    "Int8Weights",
    "Model",
    "SamplingParams",
    "aligned_cache_dir",
    "default_model_dir",
    "ensure_default_snapshot",
    "int8_cache_dir",
    "int8_weights",
    "ir_text",
    "load",
    "realigned",
]

BACKENDS = ("c", "interpreter")
INT8 = "int8"
INT8_DOT = "int8-dot"
INT8_FORMATS = {INT8: "a", INT8_DOT: "b"}  # int8 format -> spec §5 kernel (quantize-int8's)
FORMATS = (*WEIGHT_FORMATS, INT8, INT8_DOT)  # the weight formats load() takes
DEFAULT_SEED = 0
DEFAULT_NAME = f"synthetic-qwen2.5-0.5b-seed{DEFAULT_SEED}"
MARKER = "nanocompile-default.json"
# the longest step a prompt runs in: longer prompts prefill in consecutive cached steps, so
# the attention temporaries stay ~chunk x context, not context^2 (Engine.chunk). 256: a
# 1,024-token prompt prefilled 1.2x faster than in steps of 512 (the MLP's activations
# stay in cache; session 6, bf16, 1 and 2 threads), the same bits either way
PREFILL_CHUNK = 256
# the KV cache is the compiled program's state (issue 19): updated in place, one C call a step
KV = "state"
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


REALIGN_ENV = "NANOCOMPILE_REALIGN"
"""``off``: bind a bf16 weight file's tensors where they lie even when they are off
32-byte boundaries (no realigned copy; for comparison)."""


def aligned_cache_dir() -> Path:
    """Where the realigned copies of bf16 weight files whose data is not on 32-byte
    boundaries are kept (``checkpoint.aligned.AlignedCopies``): ``home_dir() /
    "aligned"``."""
    return home_dir() / "aligned"


def realigned(snapshot: Snapshot, progress: Progress | None = None) -> Snapshot:
    """``snapshot`` with each weight file whose bf16 data lies off 32-byte boundaries
    mapped through its realigned copy in :func:`aligned_cache_dir`
    (``checkpoint.aligned.AlignedCopies``); ``snapshot`` itself when none does or
    ``NANOCOMPILE_REALIGN=off``."""
    if os.environ.get(REALIGN_ENV) == "off":
        return snapshot
    return AlignedCopies(snapshot, aligned_cache_dir()).aligned(progress)


def int8_cache_dir() -> Path:
    """Where the int8 weights quantized from snapshots are kept
    (``checkpoint.snapshot.Int8Cache``): ``home_dir() / "int8"``, beside the
    kernel cache and the default snapshot."""
    return home_dir() / "int8"


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
# weight formats


def _check_format(weights: object) -> str:
    """``weights`` if it names a format of ``FORMATS``, else a ValueError."""
    if not isinstance(weights, str) or weights not in FORMATS:
        raise ValueError(f"weights must be one of {', '.join(FORMATS)}, got {weights!r}")
    return weights


def _check_int8_embedding(int8_embedding: object, fmt: str | None,
                          int8_dot_head: object = False) -> None:
    if not isinstance(int8_embedding, bool):
        raise ValueError(f"int8_embedding must be True or False, got {int8_embedding!r}")
    if not int8_embedding and fmt not in INT8_FORMATS:
        raise ValueError(f"int8_embedding=False needs weights='int8' or 'int8-dot', got "
                         f"weights={fmt!r}")
    if not isinstance(int8_dot_head, bool):
        raise ValueError(f"int8_dot_head must be True or False, got {int8_dot_head!r}")
    if int8_dot_head and fmt != INT8_DOT:
        raise ValueError(f"int8_dot_head=True needs weights='int8-dot', got weights={fmt!r}")
    if int8_dot_head and not int8_embedding:
        raise ValueError("int8_dot_head=True needs the int8 embedding (int8_embedding=True): "
                         "with int8_embedding=False the LM head is not int8")


def _int8_pass(fmt: str, int8_embedding: bool, int8_dot_head: bool) -> str:
    """``quantize-int8``'s text for an int8 ``fmt``, "" for any other."""
    if fmt not in INT8_FORMATS:
        return ""
    return int8_pass(int8_embedding, INT8_FORMATS[fmt], "b" if int8_dot_head else "a")


class Int8Weights(Mapping[str, np.ndarray]):
    """The weights of a graph after ``quantize-int8``: each weight the pass made
    (``passes.quantize_int8.int8_sources``: new name -> (source tensor, "int8" or
    "scale")) is that part of the source's int8 format, every other weight is
    ``base``'s (the snapshot's, in the graph's format)."""

    def __init__(self, base: SnapshotWeights, sources: Mapping[str, tuple[str, str]],
                 tensors: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> None:
        bad = sorted(n for n, (src, part) in sources.items()
                     if src not in tensors or part not in ("int8", "scale"))
        if bad:
            raise ValueError(f"int8 weight {bad[0]!r} has no quantized source "
                             f"({sources[bad[0]]!r})")
        self.base = base
        self.sources = dict(sources)
        self.tensors = dict(tensors)
        self.quantized = 0  # matrices the load quantized (not found in the int8 cache)
        self.quantize_seconds = 0.0
        replaced = {src for src, _ in self.sources.values()}
        self._names = [n for n in base if n not in replaced] + sorted(self.sources)

    def __getitem__(self, name: str) -> np.ndarray:
        found = self.sources.get(name)
        if found is None:
            return self.base[name]
        q, scale = self.tensors[found[0]]
        return q if found[1] == "int8" else scale

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def widened_bytes(self) -> int:
        """Bytes of the f32 copies ``base`` made so far."""
        return self.base.widened_bytes()

    def int8_bytes(self) -> int:
        """Bytes of the int8 values and f32 scales of every quantized matrix."""
        return sum(q.nbytes + s.nbytes for q, s in self.tensors.values())


def int8_weights(snapshot: Snapshot, quantized: ModuleOp, base: SnapshotWeights, *,
                 cache_dir: Path | None = None, progress: Progress | None = None
                 ) -> Int8Weights:
    """The weights of ``quantized`` (a graph after ``quantize-int8``) from
    ``snapshot``: its int8 matrices from the int8 cache (``cache_dir``, default
    :func:`int8_cache_dir`; quantized there first if absent or damaged,
    ``progress`` hears "quantizing the weights to int8"), the rest from ``base``."""
    from nanocompile.passes.quantize_int8 import int8_sources

    sources = int8_sources(quantized)
    cache = Int8Cache(snapshot, int8_cache_dir() if cache_dir is None else cache_dir)
    tensors = cache.load(sorted({src for src, _ in sources.values()}), progress)
    weights = Int8Weights(base, sources, tensors)
    weights.quantized, weights.quantize_seconds = cache.quantized, cache.quantized_seconds
    return weights


# --------------------------------------------------------------------------
# IR at each stage


def ir_text(config: Qwen2Config, stage: str, *, n_layers: int | None = None,
            last_only: bool = True, explain: bool = False, weights: str = "f32",
            wide: frozenset[str] = frozenset(), int8_embedding: bool = True,
            int8_dot_head: bool = False) -> str:
    """The program for ``config`` after ``stage``, as text, exactly as
    ``compile_program`` builds it: "graph" (as written), "fused" (after the
    graph passes: cse, fold-constants, dce, fuse), "loop" (Loop IR),
    "scheduled" (the Loop IR with the ``sched.schedule`` default-schedule
    chose for each kernel after it: phase 4) or "c" (of the scheduled
    kernels). ``explain`` (stage "scheduled" only) puts ``//`` comment lines
    first: per kernel, the candidate schedules refused, with the reason, and
    the one chosen. ``weights``: the weight format (``"f32"``, ``"bf16"`` or
    ``"int8"``; with bf16 the names in ``wide`` stay f32 weights; int8 is the
    bf16 graph after ``quantize-int8``, which shows from stage "fused" on,
    with the int8 embedding unless ``int8_embedding`` is false; int8-dot with
    the LM head kernel B when ``int8_dot_head``)."""
    fmt = _check_format(weights)
    _check_int8_embedding(int8_embedding, fmt, int8_dot_head)
    graph_format = "bf16" if fmt in INT8_FORMATS else fmt
    options = Qwen2GraphOptions(n_layers=n_layers, last_only=last_only, weights=graph_format,
                                wide=wide, kv=KV)
    quantize = _int8_pass(fmt, int8_embedding, int8_dot_head)
    return _ir_text(config, stage, options, quantize, explain)


def _ir_text(config: Qwen2Config, stage: str, options: Qwen2GraphOptions, quantize: str,
             explain: bool = False) -> str:
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {', '.join(STAGES)}, got {stage!r}")
    if explain and stage != "scheduled":
        raise ValueError(f"explain needs stage 'scheduled', got {stage!r}")
    pipeline = Pipeline(build_qwen2(config, options), CompileOptions(quantize=quantize))
    text = pipeline.text(stage)
    if not explain:
        return text
    return "\n".join([*pipeline.explain(), text])


# --------------------------------------------------------------------------
# the model


@dataclass
class _Compiled:
    """One graph on the chosen backend, with what compiling it cost: ``graph`` as
    the frontend built it, ``quantize`` the weight-format pass run on it first."""

    graph: ModuleOp
    engine: Engine
    quantize: str = ""
    program: CompiledProgram | None = None
    times: CompileTimes = field(default_factory=CompileTimes)


class Model:
    """A loaded Qwen2 snapshot on one backend. Create it with :func:`load`."""

    def __init__(self, snapshot: Snapshot, tokenizer: Tokenizer, *, backend: str,
                 last_only: bool, context: int, synthetic: bool,
                 progress: Progress | None, weights: str = "f32",
                 int8_embedding: bool = True, int8_dot_head: bool = False) -> None:
        self.snapshot = snapshot
        self.config: Qwen2Config = snapshot.config
        self.tokenizer = tokenizer
        self.backend = backend
        self.last_only = last_only
        self.context = context
        self.synthetic = synthetic
        self._progress = progress
        self.weights = _check_format(weights)
        _check_int8_embedding(int8_embedding, self.weights, int8_dot_head)
        # int8: the embedding (lookup and LM head) is int8 too, unless False
        int8 = self.weights in INT8_FORMATS
        self.int8_embedding: bool | None = int8_embedding if int8 else None
        # int8-dot: the LM head kernel B too (its activations quantized)
        self.int8_dot_head = int8_dot_head
        # the format the graph declares its weights in: int8's are quantized from it
        self.graph_weights = check_weights(default_weights(snapshot) if int8 else self.weights)
        self._quantize = _int8_pass(self.weights, int8_embedding, int8_dot_head)
        self._wide = wide_weights(snapshot) if self.graph_weights == "bf16" else frozenset()
        self._base = SnapshotWeights(snapshot, self.graph_weights)
        self._weights: SnapshotWeights | Int8Weights = self._base
        self._graphs: dict[bool, _Compiled] = {}
        self._frontend: dict[bool, ModuleOp] = {}  # the graphs as built, by last_only
        self._compile_lock = threading.Lock()
        self._prefix: PrefixCache | None = None
        # generations reuse the KV cache of the last one for a shared prompt prefix
        self.reuse_prefix = True

    @property
    def path(self) -> Path:
        """The snapshot directory."""
        return self.snapshot.path

    def __repr__(self) -> str:
        kind = "synthetic (meaningless text)" if self.synthetic else "checkpoint"
        int8 = "" if self.int8_embedding is None else f", int8_embedding={self.int8_embedding}"
        int8 += ", int8_dot_head=True" if self.int8_dot_head else ""
        return (f"Model({str(self.path)!r}, backend={self.backend!r}, "
                f"weights={self.weights!r}{int8}, layers={self.config.num_hidden_layers}, "
                f"{kind})")

    # -- engines ----------------------------------------------------------

    def _options(self, last_only: bool, n_layers: int | None = None) -> Qwen2GraphOptions:
        return Qwen2GraphOptions(n_layers=n_layers, last_only=last_only,
                                 weights=self.graph_weights, wide=self._wide, kv=KV)

    def widen_weights(self) -> None:
        """Prepare now what the format prepares at load (otherwise that happens on
        first use). int8: quantize the matrices (or map them from the int8 cache).
        Then widen the weights the format widens to f32: every one with
        ``weights="f32"``; with ``"bf16"`` (and int8's other weights of a bf16
        snapshot) only those the snapshot stores otherwise than bf16."""
        weights = self._int8_weights(None) if self._quantize else self._base
        stored = self.snapshot.expected_tensors()
        names = [n for n in weights if n in stored
                 and (self.graph_weights == "f32" or n in self._wide)]
        for done, name in enumerate(names, 1):
            weights[name]
            if self._progress is not None:
                self._progress("widening the weights to f32", done, len(names))

    def _graph(self, last_only: bool) -> ModuleOp:
        """The graph as the frontend builds it (built once; nothing changes it: the
        passes run on copies)."""
        if last_only not in self._frontend:
            self._frontend[last_only] = build_qwen2(self.config, self._options(last_only))
        return self._frontend[last_only]

    def _int8_weights(self, quantized: ModuleOp | None) -> Int8Weights:
        """The int8 weights, made once from the first quantized graph (``None``: the
        generation graph quantized here, unverified: only its weights are read; the
        pipeline verifies what it compiles): every graph of the model names the same."""
        if not isinstance(self._weights, Int8Weights):
            if quantized is None:
                quantized = quantize_graph(self._graph(self.last_only), self._quantize,
                                           verify=False)
            self._weights = int8_weights(self.snapshot, quantized, self._base,
                                         progress=self._progress)
        return self._weights

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
        graph = self._graph(last_only)
        weights: Mapping[str, np.ndarray] = self._weights
        if self.backend == "interpreter":
            if self._quantize:  # exactly the C's arithmetic (spec §5's kernel A, its sum orders)
                quantized = quantize_graph(graph, self._quantize)
                backend = InterpreterBackend(quantized, self._int8_weights(quantized),
                                             exact=True)
            else:
                backend = InterpreterBackend(graph, weights)
            return _Compiled(graph, Engine(self.config, backend, chunk=PREFILL_CHUNK, kv=KV),
                             self._quantize)
        if self._quantize:  # the pipeline quantizes the graph (or the program cache has it)
            weights = self._int8_weights(None)
        times = CompileTimes()
        kind = "last-position" if last_only else "all-position"
        program = report_step(
            self._progress, f"compiling the model ({kind} logits)",
            lambda: compile_program(graph, weights, schedule=True, times=times,
                                    quantize=self._quantize))
        return _Compiled(graph, Engine(self.config, CompiledBackend(program), chunk=PREFILL_CHUNK,
                                       kv=KV),
                         self._quantize, program, times)

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
                 chat: bool = False, on_token: TokenCallback | None = None,
                 stop: str | Sequence[str] = (),
                 cancel: CancelCheck | None = None) -> GenerationResult:
        """Continue ``prompt`` by up to ``max_tokens`` tokens.

        ``sampling=None`` is greedy; a :class:`Sampler` keeps its random state
        across calls. With ``chat=True`` the prompt is one user turn of a
        ChatML conversation (see :meth:`chat`). Generation stops at
        ``<|endoftext|>`` unless ``stop_at_eos`` is false. ``on_token`` gets
        each piece of text as soon as it is complete (a character split
        across tokens arrives whole). ``stop``: strings that end the text
        (it stops right before the first one found; text that could still
        become one is held back from ``on_token`` until it cannot).
        ``cancel()`` is asked before every forward pass: True ends the
        generation there (``stop_reason`` "cancelled").
        """
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
        if chat:
            return self.chat([{"role": "user", "content": prompt}], max_tokens=max_tokens,
                             sampling=sampling, stop_at_eos=stop_at_eos, on_token=on_token,
                             stop=stop, cancel=cancel)
        return self.generate_ids(self.tokenizer.encode(prompt), max_tokens=max_tokens,
                                 sampling=sampling, on_token=on_token,
                                 stop_ids=self.stop_ids(chat=False) if stop_at_eos else (),
                                 stop=stop, cancel=cancel)

    def chat(self, messages: Sequence[Message], *, max_tokens: int = 64,
             sampling: SamplingParams | Sampler | None = None, stop_at_eos: bool = True,
             on_token: TokenCallback | None = None, stop: str | Sequence[str] = (),
             cancel: CancelCheck | None = None) -> GenerationResult:
        """The assistant's reply to ``messages`` (dicts with ``role`` and ``content``).

        The conversation is rendered with the snapshot's chat template (ChatML
        for Qwen2.5, with its default system message when none is given) and
        the reply stops at ``<|im_end|>``. ``stop`` and ``cancel``: as for
        :meth:`generate`.
        """
        return self.generate_ids(self.chat_ids(messages), max_tokens=max_tokens,
                                 sampling=sampling, on_token=on_token,
                                 stop_ids=self.stop_ids(chat=True) if stop_at_eos else (),
                                 stop=stop, cancel=cancel)

    def chat_ids(self, messages: Sequence[Message]) -> list[int]:
        """The token ids :meth:`chat` prefills for ``messages`` (the rendered
        conversation and the assistant's generation prompt)."""
        text = render_chat(messages, add_generation_prompt=True, snapshot_dir=self.path)
        return self.tokenizer.encode(text)

    def generate_ids(self, prompt_ids: Sequence[int], *, max_tokens: int = 64,
                     sampling: SamplingParams | Sampler | None = None,
                     stop_ids: Sequence[int] | frozenset[int] = (),
                     on_token: TokenCallback | None = None, stop: str | Sequence[str] = (),
                     cancel: CancelCheck | None = None) -> GenerationResult:
        """Generate after token ids (ints or NumPy integers), stopping at any of
        ``stop_ids`` (``stop`` and ``cancel``: as for :meth:`generate`). The
        prefill is reported to the ``progress`` given to :func:`load`."""
        ids = [_token_id(i) for i in prompt_ids]
        bad = [i for i in ids if not 0 <= i < self.config.vocab_size]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary "
                             f"[0, {self.config.vocab_size})")
        return generate_tokens(self.engine, self.tokenizer, ids,
                               max_tokens=max_tokens, sampler=_sampler(sampling),
                               stop_ids=frozenset(stop_ids), context=self.context,
                               on_token=on_token, stop=stop, cancel=cancel,
                               progress=self._progress,
                               prefix=self.prefix_cache if self.reuse_prefix else None)

    @property
    def prefix_cache(self) -> PrefixCache:
        """The KV cache of the last generation, kept for the next (``inference.prefix``):
        a prompt that starts with its tokens (a chat's next turn, a repeated
        prompt) runs only the rest, with the same bits. ``reuse_prefix =
        False`` turns it off; ``prefix_cache.clear()`` frees it."""
        engine = self.engine
        with self._compile_lock:
            found = self._prefix
            if found is None or found.engine is not engine:
                found = self._prefix = PrefixCache(engine, limit=self.context)
            return found

    # -- inspection -------------------------------------------------------

    def ir(self, stage: str, n_layers: int | None = None) -> str:
        """The generation program after ``stage`` ("graph", "fused", "loop",
        "scheduled" or "c"), as text."""
        return _ir_text(self.config, stage, self._options(self.last_only, n_layers),
                        self._quantize)

    def tune(self, *, budget: float = math.inf, seed: int = 0, samples: int = 12,
             max_candidates: int = 48, threads: int | None = None,
             progress: TuneProgress | None = None,
             on_outcome: Callable[[Outcome, int, int], None] | None = None) -> list[Outcome]:
        """Tune the generation program's projections on this machine
        (``tuning/tune.py``): search each one's schedule space from the hand
        point, keep a winner only if it beats the hand schedule by more than 3 %
        in a final paired run, and record every outcome in the tuning records
        (``NANOCOMPILE_TUNING``; ``compile`` then uses the winners). ``threads``:
        the pool's count while measuring, and the count the records are for
        (default: the pool's default). ``budget``: seconds in all (the kernels
        not reached are left out). ``progress`` hears of every batch,
        ``on_outcome`` of every kernel done. Returns the outcomes, kernel by
        kernel."""
        if self.backend != "c":
            raise ValueError(f"tuning needs the C backend, got {self.backend!r}")
        arch = host_arch()
        if not arch.vector:
            raise ValueError(f"nothing to tune with arch {arch.name!r} (the knobs schedule "
                             "vector tiles; unset NANOCOMPILE_ARCH)")
        path = tuning_records.tuning_path()
        if path is None:
            raise ValueError(f"{tuning_records.TUNING_ENV}=off: no records to write")
        threads = tuning_records.default_threads() if threads is None else threads
        graph = self._graph(self.last_only)
        loop_module = Pipeline(graph, CompileOptions(quantize=self._quantize)).module("loop")
        outcomes = tune_jobs(jobs(loop_module, arch), arch, threads=threads, seed=seed,
                             samples=samples, max_candidates=max_candidates, budget=budget,
                             records=path, progress=progress, on_outcome=on_outcome)
        with self._compile_lock:
            self._graphs.clear()  # the next compile schedules with the winners
        return outcomes

    def tuned_winners(self) -> int:
        """How many kernels of the compiled generation program the tuner's winners
        scheduled (0: hand-written schedules, or not compiled yet, or not the C
        backend)."""
        built = self._graphs.get(self.last_only)
        return built.times.tuned_kernels if built is not None else 0

    def compile_report(self) -> dict[str, Any]:
        """Work per decode step counted from the Loop IR, and what compiling cost.

        ``bytes_per_step`` is the exact bytes-moved polynomial in ``past``
        (cached tokens) and ``seq`` (new tokens) of the program as it runs
        (for int8, after ``quantize-int8``); ``bytes_per_decode_step``
        evaluates it at ``past=0, seq=1``. ``weights`` is the weight format,
        ``graph_weights`` the format the graph declares the rest in (int8:
        the snapshot's default, bf16 or f32), ``widened_weights`` how many
        tensors it widens to f32 (with f32 every tensor read and not stored
        as F32; with bf16 those stored as F16) and ``widened_weight_bytes``
        the memory of those copies. int8 only (else ``None``):
        ``int8_kernel`` ("a": spec §5's kernel A, W8A32; "b": kernel B, W8A8),
        ``int8_embedding`` (the embedding and the LM head int8 too),
        ``int8_head_kernel`` (the int8 LM head's kernel, "a" or "b"; ``None``
        with an f32 one),
        ``int8_matrices`` (how many matrices are int8), ``int8_weight_bytes``
        (their int8 values and f32 scales), ``int8_quantized`` (how many the
        load quantized: 0 when the int8 cache had them all) and
        ``int8_quantize_seconds``. Compile fields are ``None`` on the
        interpreter backend.
        """
        built = self._compiled(last_only=True)
        if built.program is not None:
            loop_module = built.program.program.parent_op()
            assert isinstance(loop_module, ModuleOp)
        else:
            loop_module = Pipeline(built.graph, CompileOptions(quantize=built.quantize)
                                   ).module("loop")
        work = count_work(loop_module)
        moved = work.bytes_moved
        compiled = built.program is not None
        t = built.times
        int8 = self._weights if isinstance(self._weights, Int8Weights) else None
        replaced = set() if int8 is None else set(int8.tensors)
        return {
            "model": str(self.path),
            "synthetic": self.synthetic,
            "backend": self.backend,
            "layers": self.config.num_hidden_layers,
            "last_only": self.last_only,
            "weights": self.weights,
            "graph_weights": self.graph_weights,
            "int8_kernel": INT8_FORMATS[self.weights] if int8 is not None else None,
            "int8_embedding": self.int8_embedding,
            "int8_head_kernel": (None if not self.int8_embedding
                                 else "b" if self.int8_dot_head else "a"),
            "int8_matrices": len(int8.tensors) if int8 is not None else None,
            "int8_weight_bytes": int8.int8_bytes() if int8 is not None else None,
            "int8_quantized": int8.quantized if int8 is not None else None,
            "int8_quantize_seconds": int8.quantize_seconds if int8 is not None else None,
            "widened_weights": sum(1 for n in self.snapshot.expected_tensors()
                                   if self.snapshot.dtype(n) != "F32" and n not in replaced
                                   and (self.graph_weights == "f32" or n in self._wide)),
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
            "tuned_winners": t.tuned_winners if compiled else None,
            "tuned_kernels": t.tuned_kernels if compiled else None,
            "tuning_records": str(tuning_records.tuning_path() or "off"),
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
         progress: Progress | bool | None = None, weights: str | None = None,
         int8_embedding: bool = True, int8_dot_head: bool = False,
         tokenizer: Tokenizer | None = None) -> Model:
    """Open a Qwen2 snapshot directory and get it ready to run on ``backend``.

    ``model_dir=None`` is the embedded default: the synthetic Qwen2.5-0.5B
    (deterministic random weights: its text is meaningless), generated once
    into :func:`default_model_dir`. ``backend`` is ``"c"`` (compiled, the
    default) or ``"interpreter"``. With ``last_only`` generation runs a graph
    that computes the last position's logits only (``Model.logits`` then
    compiles a second, all-position graph on first use). ``context`` caps
    prompt plus generated tokens (default ``max_position_embeddings``).
    ``progress(what, done, total)`` hears about the slow steps (the load's,
    then each generation's prefill); ``progress=True`` shows them on stderr
    as the command line does (:class:`StderrProgress`: steps over a second,
    on a terminal only). ``tokenizer``: one already read from the directory
    (the command line reads it first, to check a prompt before the slow
    steps); default: read here. ``weights``
    is the weight format: ``"bf16"`` (the kernels read the snapshot's bf16
    tensors where they lie, mapped, and widen in registers; a weight file whose
    bf16 data is not on 32-byte boundaries is rewritten once, realigned, into
    :func:`aligned_cache_dir` and that copy mapped instead (:func:`realigned`),
    progress "aligning the bf16 weights on cache lines"; tensors stored
    otherwise are widened to f32) or ``"f32"`` (every tensor widened at load);
    ``None``: bf16 when the snapshot stores bf16 tensors, else f32.
    The two formats compute the same bits. ``"int8"`` is spec §5's kernel A:
    the seven projections of every layer and, unless ``int8_embedding`` is
    false, the tied embedding (lookup and LM head) as int8 values with f32
    row scales, quantized from the snapshot at the first load (progress:
    "quantizing the weights to int8") and mapped from :func:`int8_cache_dir`
    after; the other weights as the snapshot's default format has them. Its
    logits differ from f32's (that is quantization); the interpreter backend
    then computes exactly the C's bits. ``"int8-dot"`` is kernel B (W8A8:
    activations quantized per block of 32, exact integer dot products) for
    the projections, with the same int8 weights; the LM head stays kernel A
    (or f32 with ``int8_embedding=False``), or kernel B as well with
    ``int8_dot_head=True`` (spec §5's switch: the LM head's activations
    quantized per block of 32 too); its integer core runs the best
    int8-dot instructions this CPU has (AVX512-VNNI, AVX-VNNI, AVX2 or scalar).

    Raises ``SnapshotError``/``ConfigError``/``SafetensorsError`` for a bad
    directory and ``ValueError`` for bad options.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if weights is not None and weights not in FORMATS:
        raise ValueError(f"weights must be one of {', '.join(FORMATS)} (or None: "
                         f"the snapshot's), got {weights!r}")
    _check_int8_embedding(int8_embedding, weights, int8_dot_head)
    if isinstance(progress, bool):
        progress = StderrProgress() if progress else None
    synthetic = model_dir is None
    directory = ensure_default_snapshot(progress) if model_dir is None else Path(model_dir)
    snapshot = Snapshot.open(directory)
    try:
        fmt = default_weights(snapshot) if weights is None else weights
        if fmt == "bf16" and default_weights(snapshot) != "bf16":
            raise ValueError(f"weights='bf16': {directory} stores no tensor in bf16 "
                             "(use weights='f32')")
        if fmt == "bf16":
            snapshot = realigned(snapshot, progress)
        if tokenizer is None:
            tokenizer = Tokenizer.from_dir(directory)
        model = Model(snapshot, tokenizer, backend=backend,
                      last_only=last_only, context=_context(snapshot.config, context),
                      synthetic=synthetic, progress=progress, weights=fmt,
                      int8_embedding=int8_embedding, int8_dot_head=int8_dot_head)
        model.widen_weights()
        model._compiled(last_only=True)
    except BaseException:
        snapshot.close()
        raise
    return model

"""The engines ``python -m bench run`` times, and the work each must do.

Every engine is built from the *same snapshot bytes* and offers one
operation, ``next_token(ids, state)``: run ``ids`` after the tokens already
in ``state`` (its KV cache) and return the argmax of the last position's
logits. Timing, thread limits and statistics live in :mod:`bench.run`.

==============  ==========================================================
interp          nanocompile's graph interpreter (NumPy per primitive, unfused)
c-phase2        nanocompile's generated C, one kernel per primitive (fuse=False)
c-phase3        nanocompile's generated C after the fuse pass (fuse=True)
c-phase4        fused C with the default schedules (schedule=True): f32 weights
                widened at load, register tiles in the widest vectors the CPU has
                (``targets.arch.host_arch``), W rows read in place (no packed
                copies), the persistent pool (threads per slot)
c-bf16          the same, compiled from the bf16-weight graph and bound to the
                snapshot's mapped bf16 tensors (``SnapshotWeights(snap, "bf16")``,
                zero-copy): 2 bytes per weight read, widened in registers, the
                same bits as c-phase4
c-int8          the same, compiled after ``quantize-int8`` (spec §5's kernel A, W8A32):
                the projections and the embedding/LM head as int8 + f32 row scales,
                quantized once into the int8 cache and mapped
                (``nanocompile.api.int8_weights``), the other weights as c-bf16's
c-int8-dot      the same int8 weights, spec §5's kernel B (W8A8, ``--weights int8-dot``)
                for the projections: activations quantized per block of 32, exact
                integer dots (``loop.dot4``: AVX512-VNNI / AVX-VNNI / AVX2 by the
                CPU's flags, ``targets.arch.host_int8_dot``); the LM head kernel A
c-*-tuned       c-phase4 / c-bf16 / c-int8 / c-int8-dot scheduled with this machine's
                tuned winners (``nanocompile tune``; asked for by name only)
torch           transformers ``Qwen2ForCausalLM`` float32, eager, its own KV cache
torch-compile   the same model with its forward under ``torch.compile``
                (:mod:`bench.torch_compile_engine`)
numpy           the hand-written NumPy engine (:mod:`bench.numpy_engine`)
llama-f32       llama.cpp on the F32 GGUF of the snapshot, f32 KV cache
llama-bf16      llama.cpp on the BF16 GGUF of the snapshot, f32 KV cache (c-bf16's peer)
llama-q8_0      llama.cpp on that GGUF quantized to Q8_0 (:mod:`bench.llama_engine`)
nanoinfer-f32   nanoinfer's f32 engine, from a checkout (:mod:`bench.nanoinfer_engine`)
nanoinfer-int8  nanoinfer's int8 engine (its entry point named by ``NANOINFER_INT8``)
==============  ==========================================================

The nanoinfer engines are in a default run (``ENGINE_NAMES``) only when a
checkout is found (``$NANOINFER_PATH`` or ``../nanoinfer``, docs/nanoinfer.md)
and, for int8, ``NANOINFER_INT8`` is set; asked for by name without them,
they are skipped with one line saying how to enable them.

Peers whose packages are missing (torch, transformers, llama-cpp-python,
gguf) or that cannot be built here (torch.compile over its time budget)
raise :class:`EngineUnavailable` when built, and ``bench run`` skips them with
one line. Their modules are imported only when an engine is built, so
``python -m bench`` needs none of them.

nanocompile engines run the last-only graph (LM head on the last position),
and torch is asked for the same (``logits_to_keep=1``), so prefill does the
same arithmetic everywhere; llama.cpp computes only the last position's logits.

Work counters come from the IR (``nanocompile.analysis.work.count_work``): kernel
launches and the exact bytes polynomial of the unfused (phase 2) and fused
(phase 3) loop programs, of the fused bf16-weight program (c-bf16's; 2
bytes per bf16 weight element) and of the fused int8 program (c-int8's: 1
byte per int8 weight and 4 per row scale). FLOPs are counted from the config: matmul FLOPs
only (2 per multiply-add; the 7 projections per token, causal attention
scores and context, the LM head on one row); elementwise work is left out
(< 0.1 % of it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.snapshot import Snapshot

NANOINFER_ENGINE_NAMES: tuple[str, ...] = ("nanoinfer-f32", "nanoinfer-int8")
TUNED_ENGINE_NAMES: tuple[str, ...] = ("c-phase4-tuned", "c-bf16-tuned", "c-int8-tuned",
                                        "c-int8-dot-tuned")
ALL_ENGINE_NAMES: tuple[str, ...] = ("interp", "c-phase2", "c-phase3", "c-phase4", "c-bf16",
                                      "c-int8", "c-int8-dot", *TUNED_ENGINE_NAMES, "torch",
                                      "torch-compile", "numpy", "llama-f32", "llama-bf16",
                                      "llama-q8_0", *NANOINFER_ENGINE_NAMES)


def default_engine_names() -> tuple[str, ...]:
    """The engines of a default run: nanoinfer's only those that can be built here,
    the tuned ones only when asked for by name."""
    from bench.nanoinfer_engine import available_engines

    present = available_engines()
    return tuple(n for n in ALL_ENGINE_NAMES if n not in TUNED_ENGINE_NAMES
                 and (n in present or n not in NANOINFER_ENGINE_NAMES))


ENGINE_NAMES: tuple[str, ...] = default_engine_names()
REFERENCE_ENGINE = "c-phase4"  # the head-to-heads are against the scheduled C engine
# c-int8's quantize-int8 options: kernel A, the int8 embedding/LM head (nanoinfer's default);
# nanocompile.compiler.int8_pass() spells the same text
INT8_PASS = "quantize-int8{kernel=a embedding=int8}"
INT8_DOT_PASS = "quantize-int8{kernel=b embedding=int8}"  # c-int8-dot's: kernel B


class Model(Protocol):
    """One engine, ready to run: a fresh state per generation, one step at a time."""

    def new_state(self, capacity: int) -> Any:
        """An empty KV cache (or equivalent) for ``capacity`` positions."""
        ...

    def next_token(self, ids: Sequence[int], state: Any) -> int:
        """Run ``ids`` after the state's tokens (extending it); the last argmax."""
        ...


class EngineUnavailable(Exception):
    """An engine cannot run here (a missing package, no compiler): skip it."""


# --------------------------------------------------------------------------
# the snapshot the engines share


def cache_root() -> Path:
    """Where the bench caches what it derives (GGUFs): nanocompile's home directory.

    ``nanocompile.api.home_dir()``: ``$NANOCOMPILE_HOME``, else
    ``$XDG_CACHE_HOME/nanocompile``, else ``~/.cache/nanocompile``; the default
    snapshot lives there too.
    """
    from nanocompile.api import home_dir

    return home_dir()


def full_synthetic_snapshot(log: Callable[[str], None] = print) -> Path:
    """The full-size synthetic snapshot (seed 0), generated once and cached.

    The embedded default model of ``nanocompile.api.load()``
    (:func:`nanocompile.api.ensure_default_snapshot`), so the command line, the
    test fixtures and the benchmarks share one copy of the ~1 GB of weights.
    """
    from nanocompile.api import ensure_default_snapshot

    started: set[str] = set()

    def progress(what: str, done: int, total: int) -> None:
        if what not in started:
            started.add(what)
            log(f"{what}...")
        elif done >= total:
            log("  done")

    return ensure_default_snapshot(progress)


def prompt_ids(config: Qwen2Config, length: int, seed: int = 0) -> list[int]:
    """A deterministic prompt of ``length`` token ids (no tokenizer needed)."""
    rng = np.random.default_rng(seed)
    high = min(config.vocab_size, 151_643)  # real BPE ids only, no specials
    return [int(t) for t in rng.integers(0, high, size=length)]


def model_facts(snapshot: Snapshot, label: str) -> dict[str, Any]:
    """What identifies the model in a record: label, path, parameters, a short id."""
    import hashlib

    cfg = snapshot.config
    params = sum(int(np.prod(shape)) for shape in snapshot.expected_tensors().values())
    ident = (snapshot.path / "config.json").read_bytes() + str(snapshot.nbytes()).encode()
    return {
        "label": label,
        "path": str(snapshot.path),
        "id": hashlib.sha256(ident).hexdigest()[:12],
        "layers": cfg.num_hidden_layers,
        "hidden": cfg.hidden_size,
        "parameters": params,
        "f32_weight_bytes": 4 * params,
    }


# --------------------------------------------------------------------------
# work: FLOPs from the config, bytes and launches from the IR


def prefill_flops(config: Qwen2Config, seq: int) -> int:
    """Matmul FLOPs of an uncached, last-only prefill of ``seq`` tokens.

    2 FLOPs per multiply-add: the 7 projections for every token, the causal
    attention (token i attends to i + 1 keys: scores and context in every
    head), and the LM head on the last row. Equals
    ``bench.probe.prefill_flops_per_token(seq) * seq`` for Qwen2.5-0.5B.
    """
    h, i, d = config.hidden_size, config.intermediate_size, config.head_dim
    kv = config.num_key_value_heads * d
    per_layer = h * h + 2 * kv * h + h * h + 3 * i * h
    attended = seq * (seq + 1) // 2
    attention = config.num_hidden_layers * config.num_attention_heads * 2 * (2 * d * attended)
    return 2 * config.num_hidden_layers * per_layer * seq + attention + 2 * config.vocab_size * h


@dataclass(frozen=True)
class Work:
    """Launches per step and the bytes polynomial of one loop program."""

    program: str  # "unfused" (phase 2), "fused" (phase 3), "fused-bf16", "fused-int8"
    launches: int
    distinct_kernels: int
    bytes_moved: Any  # nanocompile.ir.symbolic.Expr in seq and past

    def decode_bytes(self, past: int) -> int:
        """Bytes one decode step (seq = 1) moves with ``past`` cached tokens."""
        return int(self.bytes_moved.evaluate({"seq": 1, "past": past}))

    def as_dict(self, past: int) -> dict[str, Any]:
        """Plain dict for a record."""
        return {
            "program": self.program,
            "launches_per_step": self.launches,
            "distinct_kernels": self.distinct_kernels,
            "decode_bytes_per_step": self.decode_bytes(past),
            "decode_bytes_past": past,
            "bytes_polynomial": str(self.bytes_moved),
        }


def count_program_work(graph: Any, *, fused: bool, program: str | None = None,
                       quantize: str = "") -> Work:
    """Count the loop program ``compile_program(graph, fuse=fused, quantize=quantize)``
    builds (named ``program``; by default "fused" or "unfused")."""
    from nanocompile.analysis.work import count_work
    from nanocompile.compiler import CompileOptions, Pipeline

    loop_ir = Pipeline(graph, CompileOptions(fuse=fused, quantize=quantize)).module("loop")
    work = count_work(loop_ir)
    name = program if program is not None else "fused" if fused else "unfused"
    return Work(name, work.launches, work.distinct_kernels, work.bytes_moved)


# --------------------------------------------------------------------------
# the engines


class _CacheModel:
    """An engine with ``new_cache(capacity)`` and ``forward(ids, cache) -> logits``.

    Both ``nanocompile.inference.engine.Engine`` (any backend) and the NumPy engine.
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def new_state(self, capacity: int) -> Any:
        return self.engine.new_cache(capacity)

    def next_token(self, ids: Sequence[int], state: Any) -> int:
        return int(np.argmax(self.engine.forward(ids, state)[-1]))


class _TorchModel:
    """transformers' Qwen2ForCausalLM driven step by step with its own KV cache."""

    def __init__(self, directory: Path) -> None:
        import inspect

        import torch
        import transformers

        self.torch = torch
        self.model = transformers.Qwen2ForCausalLM.from_pretrained(
            directory, dtype=torch.float32).eval()
        self.forward: Callable[..., Any] = self.model  # torch-compile swaps in its compiled forward
        self.cache_type = transformers.DynamicCache
        params = inspect.signature(self.model.forward).parameters
        # transformers 5 renamed ``past_key_values`` to ``cache``
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.attention = getattr(self.model.config, "_attn_implementation", None)

    def details(self) -> dict[str, Any]:
        """Facts for the record: transformers' attention implementation."""
        return {"attention": self.attention, "cache_argument": self.cache_arg}

    def new_state(self, capacity: int) -> Any:
        return self.cache_type(config=self.model.config)

    def next_token(self, ids: Sequence[int], state: Any) -> int:
        torch = self.torch
        with torch.inference_mode():
            out = self.forward(torch.tensor([list(ids)], dtype=torch.long), use_cache=True,
                               logits_to_keep=1, **{self.cache_arg: state})
        return int(out.logits[0, -1].argmax())


@dataclass
class Shared:
    """What the engines share: the snapshot, widened weights and the last-only graph
    (and, for c-bf16, the mapped bf16 weights and the bf16-weight graph; for c-int8
    the int8 weights)."""

    snapshot: Snapshot
    compile_budget: float = 180.0  # seconds torch-compile may spend compiling, else skipped
    thread_counts: tuple[int, ...] = ()  # the run's thread counts (torch-compile compiles each)
    _weights: Any = None
    _graph: Any = None
    _bf16_weights: Any = None
    _bf16_graph: Any = None
    _int8_weights: Any = None
    work: dict[str, Work] = field(default_factory=dict)
    log: Callable[[str], None] = print

    @property
    def config(self) -> Qwen2Config:
        return self.snapshot.config

    @property
    def weights(self) -> Any:
        """``F32Weights`` shared by the interpreter and the C engines."""
        if self._weights is None:
            from nanocompile.inference.engine import F32Weights

            self._weights = F32Weights(self.snapshot)
        return self._weights

    @property
    def graph(self) -> Any:
        """The last-only Qwen2 graph (built once)."""
        if self._graph is None:
            from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

            self._graph = build_qwen2(self.config, Qwen2GraphOptions(last_only=True))
        return self._graph

    def _require_bf16(self) -> None:
        from nanocompile.inference.engine import default_weights

        if default_weights(self.snapshot) != "bf16":
            raise EngineUnavailable(f"{self.snapshot.path} stores no tensor in bf16")

    @property
    def bf16_weights(self) -> Any:
        """``SnapshotWeights(snapshot, "bf16")``: zero-copy views of the mapped bf16
        tensors (tensors stored otherwise widened to f32). ``EngineUnavailable`` when
        the snapshot stores no bf16 tensor."""
        if self._bf16_weights is None:
            self._require_bf16()
            from nanocompile.inference.engine import SnapshotWeights

            self._bf16_weights = SnapshotWeights(self.snapshot, "bf16")
        return self._bf16_weights

    @property
    def bf16_graph(self) -> Any:
        """The last-only Qwen2 graph with bf16 weights (those the snapshot stores
        otherwise stay f32: ``wide_weights``), built once."""
        if self._bf16_graph is None:
            self._require_bf16()
            from nanocompile.inference.engine import wide_weights
            from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

            self._bf16_graph = build_qwen2(self.config, Qwen2GraphOptions(
                last_only=True, weights="bf16", wide=wide_weights(self.snapshot)))
        return self._bf16_graph

    @property
    def int8_graph(self) -> Any:
        """The graph c-int8 compiles (``quantize-int8`` runs in the pipeline): the
        bf16-weight graph of a bf16 snapshot, else the f32 one."""
        from nanocompile.inference.engine import default_weights

        return self.bf16_graph if default_weights(self.snapshot) == "bf16" else self.graph

    @property
    def int8_weights(self) -> Any:
        """``nanocompile.api.int8_weights`` of the int8 graph: the int8 matrices from
        the int8 cache (quantized into it first when absent), the rest as
        ``int8_graph`` declares them."""
        if self._int8_weights is None:
            from nanocompile.api import int8_weights
            from nanocompile.compiler import quantize_graph
            from nanocompile.inference.engine import SnapshotWeights, default_weights

            started: set[str] = set()

            def progress(what: str, done: int, total: int) -> None:
                if what not in started:
                    started.add(what)
                    self.log(f"  {what} (once: cached after)...")

            base = SnapshotWeights(self.snapshot, default_weights(self.snapshot))
            quantized = quantize_graph(self.int8_graph, INT8_PASS)
            self._int8_weights = int8_weights(self.snapshot, quantized, base,
                                              progress=progress)
        return self._int8_weights

    def program_work(self, fused: bool) -> Work:
        """Work of the fused or unfused program (counted once)."""
        key = "fused" if fused else "unfused"
        if key not in self.work:
            self.work[key] = count_program_work(self.graph, fused=fused)
        return self.work[key]

    def bf16_work(self) -> Work:
        """Work of the fused bf16-weight program (counted once)."""
        key = "fused-bf16"
        if key not in self.work:
            self.work[key] = count_program_work(self.bf16_graph, fused=True, program=key)
        return self.work[key]

    def int8_work(self, quantize: str = INT8_PASS) -> Work:
        """Work of the fused int8 program (c-int8's, or with ``INT8_DOT_PASS``
        c-int8-dot's; counted once)."""
        key = "fused-int8" if quantize == INT8_PASS else "fused-int8-dot"
        if key not in self.work:
            self.work[key] = count_program_work(self.int8_graph, fused=True, program=key,
                                                quantize=quantize)
        return self.work[key]


@dataclass(frozen=True)
class EngineSpec:
    """How to build one engine and what its work counters are."""

    name: str
    description: str
    build: Callable[[Shared], Model]
    work: Callable[[Shared], Work]
    work_is_own: bool  # False: the engine has no IR; bytes are the fused program's


def _build_interp(shared: Shared) -> Model:
    from nanocompile.inference.engine import Engine
    from nanocompile.interpreter import InterpreterBackend

    return _CacheModel(Engine(shared.config, InterpreterBackend(shared.graph,
                                                                      shared.weights)))


class _PooledModel(_CacheModel):
    """A compiled engine whose pool follows ``NANOCOMPILE_THREADS`` (the bench
    sets it per slot; the pool reads it only when the library loads)."""

    def __init__(self, engine: Any, program: Any, facts: dict[str, Any] | None = None) -> None:
        super().__init__(engine)
        self.program = program
        self.facts = facts or {}

    def details(self) -> dict[str, Any]:
        """Facts for the record: the arch the schedules used and the weight format."""
        return dict(self.facts)

    def new_state(self, capacity: int) -> Any:
        wanted = os.environ.get("NANOCOMPILE_THREADS")
        if wanted and wanted.isdigit() and int(wanted) != self.program.threads():
            self.program.set_threads(int(wanted))
        return super().new_state(capacity)


class _TunedModel(_PooledModel):
    """A ``-tuned`` engine: per thread count, the program scheduled by the winners
    recorded for that count (``nanocompile tune --threads N``: a tile that wins at
    2 threads may lose at 1), the one for ``NANOCOMPILE_THREADS`` chosen at each
    ``new_state``."""

    def __init__(self, by_threads: dict[int, tuple[Any, Any]], facts: dict[str, Any]) -> None:
        first = next(iter(by_threads.values()))
        super().__init__(*first, facts)
        self.by_threads = by_threads

    def new_state(self, capacity: int) -> Any:
        wanted = os.environ.get("NANOCOMPILE_THREADS")
        if wanted and wanted.isdigit() and int(wanted) in self.by_threads:
            self.engine, self.program = self.by_threads[int(wanted)]
        return super().new_state(capacity)


def _build_c(fuse: bool, schedule: bool = False, weights: str = "f32", tuned: bool = False
             ) -> Callable[[Shared], Model]:
    """A builder of the C engine; ``weights="bf16"``: the bf16-weight graph bound to
    the snapshot's mapped bf16 tensors (needs ``schedule``: c-bf16); ``"int8"``: that
    graph after ``quantize-int8`` bound to the int8 weights (c-int8); ``"int8-dot"``:
    the same with kernel B's pass (c-int8-dot; the same int8 weights). The
    hand-written schedules unless ``tuned`` (the ``-tuned`` engines: this
    machine's recorded winners for each thread count of the run, ``nanocompile
    tune --threads N``; unavailable without them)."""
    def build(shared: Shared) -> Model:
        if shutil.which("gcc") is None:
            raise EngineUnavailable("no gcc on PATH")
        from nanocompile.backend.runtime import CompiledBackend
        from nanocompile.compiler import compile_program
        from nanocompile.inference.engine import Engine

        quantize = {"int8": INT8_PASS, "int8-dot": INT8_DOT_PASS}.get(weights, "")
        graph, bound = ((shared.bf16_graph, shared.bf16_weights) if weights == "bf16"
                        else (shared.int8_graph, shared.int8_weights) if quantize
                        else (shared.graph, shared.weights))
        if tuned:
            return _build_tuned(shared, graph, bound, fuse, weights, quantize)
        program = compile_program(graph, bound, fuse=fuse, schedule=schedule,
                                  quantize=quantize, tuned="")
        engine = Engine(shared.config, CompiledBackend(program))
        if not schedule:
            return _CacheModel(engine)
        return _PooledModel(engine, program, _format_facts(weights, quantize, bound))

    return build


def _build_tuned(shared: Shared, graph: Any, bound: Any, fuse: bool, weights: str,
                 quantize: str) -> Model:
    """A ``-tuned`` engine: one program per thread count of the run, each
    scheduled by the winners recorded for that count. Where the program's
    kernels were searched at a count and the hand schedule kept for each (no
    winner), that count's program is the hand-scheduled one, as ``compile``
    would build it there (``tuned_kernels`` 0). Unavailable when no kernel of
    the program was searched at some count."""
    from nanocompile.backend.runtime import CompiledBackend
    from nanocompile.backend.tuning_records import default_threads
    from nanocompile.compiler import CompileTimes, compile_program, recorded_winners
    from nanocompile.inference.engine import Engine

    by_threads: dict[int, tuple[Any, Any]] = {}
    facts: dict[str, Any] = {**_format_facts(weights, quantize, bound),
                             "tuned_winners": {}, "tuned_kernels": {}}

    def build(tuned: str) -> tuple[Any, int]:
        times = CompileTimes()
        program = compile_program(graph, bound, fuse=fuse, schedule=True, quantize=quantize,
                                  tuned=tuned, times=times) if tuned else None
        return program, times.tuned_kernels

    for threads in shared.thread_counts or (default_threads(),):
        winners = recorded_winners(threads)
        facts["tuned_winners"][str(threads)] = len(json.loads(winners)) if winners else 0
        program, tuned = build(winners)
        if not tuned:  # searched here with the hand schedules kept? then those are its own
            program, searched = build(_searched_hand_points(threads))
            if not searched:
                raise EngineUnavailable(
                    f"no kernel of this program was tuned at {threads} thread(s) "
                    f"({facts['tuned_winners'][str(threads)]} winners recorded there; run: "
                    f"nanocompile tune --weights {weights} --threads {threads})")
        facts["tuned_kernels"][str(threads)] = tuned
        by_threads[threads] = (Engine(shared.config, CompiledBackend(program)), program)
    return _TunedModel(by_threads, facts)


def _searched_hand_points(threads: int) -> str:
    """Every kernel the records hold at ``threads`` (a winner or not) with its hand
    point, as ``CompileOptions.tuned``: a program compiled with it is the
    hand-scheduled one (the hand point schedules byte for byte as no knobs do),
    and its ``tuned_kernels`` counts the kernels of the program searched there."""
    from nanocompile.backend import tuning_records
    from nanocompile.compiler import winners_text

    entries = tuning_records.entries(tuning_records.tuning_path(), threads)
    return winners_text({key: entry["hand"] for key, entry in entries.items()
                         if isinstance(entry.get("hand"), str)})


def _format_facts(weights: str, quantize: str, bound: Any) -> dict[str, Any]:
    """Facts for a scheduled C engine's record: arch, weight format, the int8 ones."""
    facts: dict[str, Any] = {"arch": host_arch_name(), "weights": weights}
    if weights == "int8-dot":
        from nanocompile.targets.arch import host_int8_dot

        facts["int8_dot"] = host_int8_dot()
    if quantize:
        facts |= {"quantize": quantize, "int8_weight_bytes": bound.int8_bytes(),
                  "int8_quantized_at_build": bound.quantized,
                  "int8_quantize_seconds": bound.quantize_seconds}
    return facts


def host_arch_name() -> str:
    """The arch the default schedules pick here (``targets.arch.host_arch``:
    ``NANOCOMPILE_ARCH`` or the widest the CPU runs); a bad override is named as such."""
    from nanocompile.targets.arch import ArchError, host_arch

    try:
        return host_arch().name
    except ArchError:
        return "invalid NANOCOMPILE_ARCH"


def _scheduled_description(weights: str) -> str:
    arch = host_arch_name()
    vectors = "scalar" if arch == "scalar" else f"{arch} register tiles"
    if weights == "bf16":
        held = "bf16 weights: the mapped snapshot tensors, widened in registers"
    elif weights == "int8":
        held = ("int8 weights, spec 5's kernel A (W8A32): projections and embedding/LM "
                "head int8 with f32 row scales, mapped from the int8 cache")
    elif weights == "int8-dot":
        held = ("int8 weights, spec 5's kernel B (W8A8, integer dots) for the "
                "projections, kernel A for the embedding/LM head")
    else:
        held = "f32 weights widened at load"
    return (f"nanocompile C, fused + default schedules ({held}, {vectors}, "
            "no packed weight copies, thread pool)")


def _build_torch(shared: Shared) -> _TorchModel:
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise EngineUnavailable(f"{' and '.join(missing)} not installed "
                                "(pip install -e '.[bench]')")
    return _TorchModel(shared.snapshot.path)


def _build_torch_compile(shared: Shared) -> Model:
    """The eager torch engine (as ``_build_torch`` loads it) with a compiled forward."""
    eager = _build_torch(shared)
    from bench.torch_compile_engine import TorchCompiledModel

    return TorchCompiledModel(eager, prompt_ids(shared.config, 16), budget=shared.compile_budget,
                              thread_counts=shared.thread_counts)


def _build_llama(kind: str) -> Callable[[Shared], Model]:
    def build(shared: Shared) -> Model:
        from bench.llama_engine import build_model

        return build_model(shared.snapshot.path, kind)

    return build


def _build_nanoinfer(kind: str) -> Callable[[Shared], Model]:
    def build(shared: Shared) -> Model:
        from bench.nanoinfer_engine import build_model

        return build_model(shared.snapshot.path, kind)

    return build


def _build_numpy(shared: Shared) -> Model:
    from bench.numpy_engine import NumpyQwen2

    return _CacheModel(NumpyQwen2.from_snapshot(shared.snapshot))


def _unfused(shared: Shared) -> Work:
    return shared.program_work(fused=False)


def _fused(shared: Shared) -> Work:
    return shared.program_work(fused=True)


def _fused_bf16(shared: Shared) -> Work:
    return shared.bf16_work()


def _fused_int8(shared: Shared) -> Work:
    return shared.int8_work()


def _fused_int8_dot(shared: Shared) -> Work:
    return shared.int8_work(INT8_DOT_PASS)


ENGINES: dict[str, EngineSpec] = {
    "interp": EngineSpec("interp", "nanocompile graph interpreter (NumPy, unfused graph)",
                         _build_interp, _unfused, True),
    "c-phase2": EngineSpec("c-phase2", "nanocompile C, one kernel per primitive",
                           _build_c(False), _unfused, True),
    "c-phase3": EngineSpec("c-phase3", "nanocompile C, fused kernels",
                           _build_c(True), _fused, True),
    "c-phase4": EngineSpec("c-phase4", _scheduled_description("f32"), _build_c(True, True),
                           _fused, True),
    "c-bf16": EngineSpec("c-bf16", _scheduled_description("bf16"),
                         _build_c(True, True, "bf16"), _fused_bf16, True),
    "c-int8": EngineSpec("c-int8", _scheduled_description("int8"),
                         _build_c(True, True, "int8"), _fused_int8, True),
    "c-int8-dot": EngineSpec("c-int8-dot", _scheduled_description("int8-dot"),
                             _build_c(True, True, "int8-dot"), _fused_int8_dot, True),
    **{f"{name}-tuned": EngineSpec(f"{name}-tuned", f"{_scheduled_description(fmt)}, "
                                   "this machine's tuned winners (nanocompile tune)",
                                   _build_c(True, True, fmt, tuned=True), counters, True)
       for name, fmt, counters in (("c-phase4", "f32", _fused), ("c-bf16", "bf16", _fused_bf16),
                                   ("c-int8", "int8", _fused_int8),
                                   ("c-int8-dot", "int8-dot", _fused_int8_dot))},
    "torch": EngineSpec("torch", "transformers Qwen2ForCausalLM f32 eager",
                        _build_torch, _fused, False),
    "torch-compile": EngineSpec("torch-compile", "transformers Qwen2ForCausalLM f32, forward "
                                "under torch.compile (inductor, dynamic shapes)",
                                _build_torch_compile, _fused, False),
    "numpy": EngineSpec("numpy", "hand-written NumPy f32 engine (bench/numpy_engine.py)",
                        _build_numpy, _fused, False),
    # llama.cpp has no IR here: the fused f32 program's counters, which over-count
    # the bytes the Q8_0 engine reads; for BF16 the fused bf16 program's
    "llama-f32": EngineSpec("llama-f32", "llama.cpp (llama-cpp-python) F32 GGUF, f32 KV cache",
                            _build_llama("f32"), _fused, False),
    "llama-bf16": EngineSpec("llama-bf16", "llama.cpp (llama-cpp-python) BF16 GGUF (norms and "
                             "biases F32), f32 KV cache", _build_llama("bf16"), _fused_bf16,
                             False),
    "llama-q8_0": EngineSpec("llama-q8_0", "llama.cpp (llama-cpp-python) Q8_0 GGUF, f16 KV "
                             "cache", _build_llama("q8_0"), _fused, False),
    # nanoinfer has no IR here either: the fused f32 program's counters
    "nanoinfer-f32": EngineSpec("nanoinfer-f32", "nanoinfer f32 (NumPy) from a checkout",
                                _build_nanoinfer("f32"), _fused, False),
    "nanoinfer-int8": EngineSpec("nanoinfer-int8", "nanoinfer int8 from a checkout "
                                 "(NANOINFER_INT8 names its entry point)",
                                 _build_nanoinfer("int8"), _fused, False),
}
assert tuple(ENGINES) == ALL_ENGINE_NAMES
assert set(ENGINE_NAMES) <= set(ENGINES)

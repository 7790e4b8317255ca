"""llama.cpp as a bench peer, in-process through ``llama-cpp-python``.

Three engines run on GGUFs written from the *same snapshot bytes* by
:mod:`bench.gguf_export`:

=============  ==========================================================
llama-f32      the F32 GGUF (weights exactly the snapshot's), f32 KV cache
llama-bf16     the BF16 GGUF (the snapshot's bf16 matrices as they are, norms
               and biases F32), f32 KV cache: the peer of ``c-bf16``
llama-q8_0     the F32 GGUF quantized to Q8_0 by llama.cpp's own quantizer,
               llama.cpp's default (f16) KV cache
=============  ==========================================================

Sampling is pinned by not using llama.cpp's samplers at all: each step takes
the logits of the last position (``llama_get_logits_ith(ctx, -1)``) and returns
their argmax, so no temperature, top-k/p, min-p or repetition penalty (nor the
generation defaults a GGUF may carry) can apply. Token ids go in directly
(``Llama.eval``), bypassing llama.cpp's tokenizer, so only the model is
compared; :func:`tokenization_agrees` checks its tokenizer separately.

GGUFs are cached under ``<cache root>/gguf/<key>/`` (the cache root of
:func:`bench.engines.cache_root`, nanocompile's home directory, never the
repository), the key a hash of the snapshot's files (config, tokenizer files
and weight bytes) and the export format, so a changed snapshot or exporter
never meets a stale file. A snapshot without ``tokenizer.json`` (the bench's
smoke model) gets the Qwen2 vocabulary nanocompile builds
(:mod:`nanocompile.tokenizer.build`); the engine never uses the GGUF's tokenizer.

The bench registers the engines in ``bench.engines.ENGINES`` ("llama-f32",
"llama-bf16", "llama-q8_0"); their builders import this module and call
:func:`build_model`.

Threads: ``n_threads`` (and ``n_threads_batch``) follow ``NANOCOMPILE_THREADS``,
which the bench driver sets for every slot; it is re-read each step and
applied with ``llama_set_n_threads``.

``python -m bench.llama_engine agree [--model DIR] [--tokens 32]`` prints the
greedy-token agreement with nanocompile's compiled engine (docs/bench.md).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nanocompile.checkpoint.pagecache import release_written

GGUF_FORMAT = "nanocompile-gguf-1"  # bump when bench/gguf_export.py changes what it writes
NOT_INSTALLED = "llama-cpp-python not installed (pip install -e '.[bench]')"
GGUF_NOT_INSTALLED = "gguf not installed (pip install -e '.[bench]')"
DEFAULT_CTX = 512
DEFAULT_BATCH = 512
GGML_TYPE_F32 = 0  # ggml_type of an f32 KV cache
HASH_CHUNK = 1 << 24


def _unavailable(message: str) -> Exception:
    from bench.engines import EngineUnavailable

    return EngineUnavailable(message)


def require_llama_cpp() -> Any:
    """The ``llama_cpp`` module, or ``EngineUnavailable`` when it is not installed."""
    if importlib.util.find_spec("llama_cpp") is None:
        raise _unavailable(NOT_INSTALLED)
    try:
        import llama_cpp
    except (ImportError, OSError) as exc:  # installed, but its shared library does not load
        raise _unavailable(f"llama-cpp-python does not load: {exc}") from None
    return llama_cpp


def llama_cpp_version() -> str:
    """The installed llama-cpp-python version (``"absent"`` when not installed)."""
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def default_threads() -> int:
    """``NANOCOMPILE_THREADS`` when set (the bench sets it per slot), else the usable cores."""
    value = os.environ.get("NANOCOMPILE_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# --------------------------------------------------------------------------
# the GGUFs, cached outside the repository


SNAPSHOT_FILES = ("config.json", "generation_config.json", "tokenizer.json",
                  "tokenizer_config.json")


def snapshot_key(directory: Path) -> str:
    """A hash of everything the GGUF is made from: the small files and the weight bytes."""
    digest = hashlib.sha256(GGUF_FORMAT.encode())
    for name in SNAPSHOT_FILES:
        path = directory / name
        digest.update(f"\0{name}\0".encode())
        digest.update(path.read_bytes() if path.is_file() else b"<absent>")
    weights = sorted(directory.glob("*.safetensors"))
    for path in weights:
        digest.update(f"\0{path.name}\0".encode())
        with path.open("rb") as f:
            while chunk := f.read(HASH_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()[:20]


def _tokenizer_for(directory: Path) -> dict[str, Any] | None:
    """``None`` (the snapshot's own ``tokenizer.json``) or the built-in Qwen2 one."""
    if (directory / "tokenizer.json").is_file():
        return None
    from nanocompile.tokenizer.build import load_ranks, tokenizer_json

    return tokenizer_json(load_ranks())


def gguf_file(directory: Path, kind: str, *, log: Callable[[str], None] = print,
              cache: Path | None = None) -> Path:
    """The cached ``kind`` ("f32", "bf16" or "q8_0") GGUF of the snapshot in ``directory``.

    Written on first use: the F32 file by :func:`bench.gguf_export.write_f32_gguf`,
    the BF16 one by :func:`bench.gguf_export.write_bf16_gguf`, the Q8_0 file from
    the F32 one by llama.cpp's quantizer (named for the llama-cpp-python version
    that quantized it).
    """
    from bench import gguf_export
    from bench.engines import cache_root

    if kind not in ("f32", "bf16", "q8_0"):
        raise ValueError(f"unknown GGUF kind {kind!r}")
    if importlib.util.find_spec("gguf") is None:
        raise _unavailable(GGUF_NOT_INSTALLED)
    directory = Path(directory)
    folder = (cache or cache_root() / "gguf") / snapshot_key(directory)
    if kind == "bf16":
        bf16 = folder / "model-bf16.gguf"
        if not bf16.is_file():
            log(f"writing the BF16 GGUF of {directory} into {folder} (once)")
            start = time.perf_counter()
            gguf_export.write_bf16_gguf(directory, bf16, tokenizer=_tokenizer_for(directory),
                                        name=directory.resolve().name)
            log(f"  BF16 GGUF written in {time.perf_counter() - start:.1f} s")
        return bf16
    f32 = folder / "model-f32.gguf"
    if not f32.is_file():
        log(f"writing the F32 GGUF of {directory} into {folder} (once)")
        start = time.perf_counter()
        gguf_export.write_f32_gguf(directory, f32, tokenizer=_tokenizer_for(directory),
                                   name=directory.resolve().name)
        log(f"  F32 GGUF written in {time.perf_counter() - start:.1f} s")
    if kind == "f32":
        return f32
    require_llama_cpp()
    q8 = folder / f"model-q8_0-llama-cpp-python-{llama_cpp_version()}.gguf"
    if not q8.is_file():
        log(f"quantizing to Q8_0 with llama.cpp's quantizer into {folder} (once)")
        start = time.perf_counter()
        gguf_export.quantize_q8_0(f32, q8)
        log(f"  Q8_0 GGUF written in {time.perf_counter() - start:.1f} s")
    return q8


# --------------------------------------------------------------------------
# the engine


@dataclass
class LlamaState:
    """A generation in the one llama.cpp context: its capacity and tokens so far."""

    capacity: int
    past: int = 0


class LlamaCppModel:
    """A GGUF in llama.cpp, one greedy step at a time (the bench's ``Model`` protocol).

    llama.cpp keeps one KV cache per context, so only the newest state from
    :meth:`new_state` may be stepped; an older one raises instead of silently
    continuing someone else's cache.
    """

    def __init__(self, gguf_path: str | os.PathLike[str], *, f32_cache: bool,
                 n_ctx: int = DEFAULT_CTX, n_batch: int = DEFAULT_BATCH,
                 threads: int | None = None) -> None:
        self.llama_cpp = require_llama_cpp()
        self.path = Path(gguf_path)
        self.f32_cache = f32_cache
        self.n_batch = n_batch
        self.threads = threads or default_threads()
        self._state: LlamaState | None = None
        # the GGUF dropped from the page cache first (unless mapped already), so
        # llama.cpp's mapping reads it back in 2 MiB folios: a file cached in
        # 4 KiB ones (28 of 500 MiB in 2 MiB pages, session 23) decoded Q8_0 at
        # 44.5 ms a step against 31.0 in 2 MiB pages (checkpoint/pagecache.py)
        release_written(self.path)
        self._load(n_ctx)

    def _load(self, n_ctx: int) -> None:
        kv = {"type_k": GGML_TYPE_F32, "type_v": GGML_TYPE_F32} if self.f32_cache else {}
        self.llm = self.llama_cpp.Llama(
            model_path=str(self.path), n_ctx=n_ctx, n_batch=self.n_batch,
            n_ubatch=self.n_batch, n_threads=self.threads, n_threads_batch=self.threads,
            logits_all=False, seed=0, verbose=False, **kv)
        self.n_ctx = n_ctx
        self.n_vocab = self.llm.n_vocab()

    def details(self) -> dict[str, Any]:
        """Facts for the bench record."""
        info = self.llama_cpp.llama_print_system_info()
        return {
            "gguf": str(self.path),
            "gguf_bytes": self.path.stat().st_size,
            "llama_cpp_python": llama_cpp_version(),
            "system_info": info.decode(errors="replace").strip() if info else "",
            "n_ctx": self.n_ctx,
            "n_batch": self.n_batch,
            "kv_cache": "f32" if self.f32_cache else "f16 (llama.cpp default)",
            "flash_attn": False,
            "sampling": "argmax of the last position's logits (no llama.cpp sampler)",
        }

    def _apply_threads(self) -> None:
        wanted = default_threads() if "NANOCOMPILE_THREADS" in os.environ else self.threads
        if wanted != self.threads:
            self.llama_cpp.llama_set_n_threads(self.llm.ctx, wanted, wanted)
            self.threads = wanted

    def new_state(self, capacity: int) -> LlamaState:
        """Start a generation of up to ``capacity`` tokens (clears the context's cache)."""
        if capacity < 1:
            raise ValueError(f"capacity must be positive, got {capacity}")
        if capacity > self.n_ctx:  # a larger context: reload (untimed, outside a generation)
            self._load(max(capacity, 2 * self.n_ctx))
        self.llm.reset()  # the next eval drops every cached position
        self._state = LlamaState(capacity)
        return self._state

    def logits(self, ids: Sequence[int], state: LlamaState) -> np.ndarray:
        """Run ``ids`` after the state's tokens; the last position's logits (a copy)."""
        if state is not self._state:
            raise RuntimeError("llama.cpp holds one KV cache: only the newest state can run")
        if not ids:
            raise ValueError("no token ids to run")
        if state.past + len(ids) > state.capacity:
            raise ValueError(f"KV cache full: {state.past} + {len(ids)} tokens exceed its "
                             f"capacity {state.capacity}")
        bad = [t for t in ids if not 0 <= int(t) < self.n_vocab]
        if bad:
            raise ValueError(f"token id {bad[0]} outside the vocabulary of {self.n_vocab}")
        self._apply_threads()
        self.llm.eval([int(t) for t in ids])
        state.past += len(ids)
        pointer = self.llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()

    def next_token(self, ids: Sequence[int], state: LlamaState) -> int:
        """Run ``ids`` after the state's tokens; the argmax of the last position."""
        return int(np.argmax(self.logits(ids, state)))

    def tokenize(self, text: str) -> list[int]:
        """llama.cpp's own tokenization of ``text`` (special tokens parsed, no BOS)."""
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))


# --------------------------------------------------------------------------
# bench registration


ENGINE_KINDS: dict[str, str] = {"llama-f32": "f32", "llama-bf16": "bf16", "llama-q8_0": "q8_0"}
F32_CACHE_KINDS = ("f32", "bf16")  # like nanocompile's engines; Q8_0 keeps llama.cpp's f16


def build_model(snapshot_dir: Path, kind: str) -> LlamaCppModel:
    """The bench engine for the ``kind`` ("f32", "bf16" or "q8_0") GGUF of a snapshot.

    Raises ``EngineUnavailable`` without llama-cpp-python (checked before any
    GGUF is written) or gguf. The F32 and BF16 engines get an f32 KV cache,
    the Q8_0 one llama.cpp's default (f16); threads follow ``NANOCOMPILE_THREADS``.
    """
    require_llama_cpp()
    path = gguf_file(Path(snapshot_dir), kind)
    return LlamaCppModel(path, f32_cache=kind in F32_CACHE_KINDS)


def build_llama_engines() -> dict[str, Any]:
    """The llama.cpp entries of ``bench.engines.ENGINES``: ``{"llama-f32": EngineSpec, ...}``.

    Their builders call :func:`build_model`. llama.cpp has no IR here: the
    work counters are nanocompile's fused program's (``work_is_own`` False:
    the f32 one, which over-counts the bytes Q8_0 reads; for llama-bf16 the
    bf16 one).
    """
    from bench.engines import ENGINES

    return {name: ENGINES[name] for name in ENGINE_KINDS}


# --------------------------------------------------------------------------
# agreement with nanocompile


PROMPTS: dict[str, str | None] = {
    "france": "The capital of France is",
    "fibonacci": "def fibonacci(n):",
    "chat": None,  # a ChatML user turn rendered with nanocompile.tokenizer.chat.render_chat
}
CHAT_TURN = "Write a haiku about compilers."


def prompt_texts(snapshot_dir: Path) -> dict[str, str]:
    """The agreement prompts as text (the chat one rendered with the snapshot's template)."""
    from nanocompile.tokenizer.chat import render_chat

    texts = {}
    for key, text in PROMPTS.items():
        if text is None:
            text = render_chat([{"role": "user", "content": CHAT_TURN}],
                               add_generation_prompt=True, snapshot_dir=snapshot_dir)
        texts[key] = text
    return texts


@dataclass(frozen=True)
class Agreement:
    """Greedy tokens of nanocompile and llama.cpp after one prompt."""

    prompt: str
    prompt_ids: list[int]
    ours: list[int]
    theirs: list[int]
    max_logit_diff: float  # max |Δ| over the steps both ran on the same tokens
    min_margin: float  # smallest top-1 / top-2 gap of nanocompile's logits over those steps

    @property
    def matching(self) -> int:
        """Positions (of the generated tokens) where both chose the same token."""
        return sum(a == b for a, b in zip(self.ours, self.theirs, strict=True))

    @property
    def prefix(self) -> int:
        """Tokens generated before the first disagreement."""
        for i, (a, b) in enumerate(zip(self.ours, self.theirs, strict=True)):
            if a != b:
                return i
        return len(self.ours)


def _margin(logits: np.ndarray) -> float:
    top2 = np.partition(logits, -2)[-2:]
    return float(top2[1] - top2[0])


def agree(nano: Any, llama: LlamaCppModel, prompt: str, ids: Sequence[int],
          n_tokens: int) -> Agreement:
    """Greedy-generate ``n_tokens`` with both engines after ``ids``, side by side.

    ``nano`` is a ``nanocompile.inference.engine.Engine`` (last-only graph). Each engine
    follows its own tokens; logit differences are taken while they agree.
    """
    cache = nano.new_cache(len(ids) + n_tokens)
    state = llama.new_state(len(ids) + n_tokens)
    ours: list[int] = []
    theirs: list[int] = []
    diff, margin = 0.0, float("inf")
    step_ours, step_theirs = list(ids), list(ids)
    for _ in range(n_tokens):
        a = np.asarray(nano.forward(step_ours, cache)[-1], dtype=np.float32)
        b = llama.logits(step_theirs, state)
        if ours == theirs:
            diff = max(diff, float(np.abs(a - b).max()))
            margin = min(margin, _margin(a))
        ours.append(int(np.argmax(a)))
        theirs.append(int(np.argmax(b)))
        step_ours, step_theirs = [ours[-1]], [theirs[-1]]
    return Agreement(prompt, list(ids), ours, theirs, diff, margin)


def compiled_engine(snapshot: Any) -> Any:
    """nanocompile's compiled (fused C) engine on the last-only graph."""
    from nanocompile.backend.runtime import CompiledBackend
    from nanocompile.compiler import compile_program
    from nanocompile.inference.engine import Engine, F32Weights
    from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

    graph = build_qwen2(snapshot.config, Qwen2GraphOptions(last_only=True))
    return Engine(snapshot.config, CompiledBackend(compile_program(graph, F32Weights(snapshot))))


def tokenization_agrees(snapshot_dir: Path,
                        llama: LlamaCppModel) -> dict[str, tuple[bool, list[int], list[int]]]:
    """Per prompt: (equal, nanocompile's ids, llama.cpp's ids)."""
    from nanocompile.tokenizer.tokenizer import Tokenizer

    tok = Tokenizer.from_dir(snapshot_dir)
    out = {}
    for key, text in prompt_texts(snapshot_dir).items():
        ours, theirs = tok.encode(text), llama.tokenize(text)
        out[key] = (ours == theirs, ours, theirs)
    return out


def agreement_table(rows: Sequence[Agreement], n_tokens: int, label: str) -> str:
    """The markdown table of docs/bench.md."""
    lines = [f"| prompt ({label}) | prompt tokens | same tokens of {n_tokens} | "
             "agree up to | max abs logit diff while agreeing | smallest top-1 margin |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.prompt} | {len(r.prompt_ids)} | {r.matching} | {r.prefix} | "
                     f"{r.max_logit_diff:.3g} | {r.min_margin:.3g} |")
    return "\n".join(lines)


def _agree_command(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from bench.engines import EngineUnavailable, full_synthetic_snapshot
    from nanocompile.checkpoint.snapshot import Snapshot
    from nanocompile.tokenizer.build import write_tokenizer_files
    from nanocompile.tokenizer.tokenizer import Tokenizer

    weights = Path(args.model) if args.model else full_synthetic_snapshot()
    text_dir, scratch = weights, None
    if not (weights / "tokenizer.json").is_file():  # the cached synthetic weights
        scratch = Path(tempfile.mkdtemp(prefix="nc-agree-"))
        write_tokenizer_files(scratch)  # the same vocabulary the GGUF gets
        text_dir = scratch
    try:
        snapshot = Snapshot.open(weights)
        print(f"compiling nanocompile's engine for {weights}", flush=True)
        nano = compiled_engine(snapshot)
        tok = Tokenizer.from_dir(text_dir)
        texts = prompt_texts(text_dir)
        for kind in ["f32"] + (["q8_0"] if args.q8_0 else []):
            llama = LlamaCppModel(gguf_file(weights, kind), f32_cache=(kind == "f32"),
                                  n_ctx=1024, threads=args.threads)
            rows = [agree(nano, llama, key, tok.encode(text), args.tokens)
                    for key, text in texts.items()]
            print(agreement_table(rows, args.tokens, f"llama.cpp {kind}"))
            for key, (same, ours, theirs) in tokenization_agrees(text_dir, llama).items():
                print(f"tokenization {key}: {'equal' if same else 'DIFFERENT'} "
                      f"({len(ours)} ids{'' if same else f' vs {len(theirs)}'})")
            for r in rows:
                print(f"  {r.prompt}: nanocompile {r.ours}")
                print(f"  {r.prompt}: llama.cpp   {r.theirs}")
    except EngineUnavailable as exc:
        print(f"llama_engine agree: {exc}", file=sys.stderr)
        return 1
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.llama_engine agree``."""
    parser = argparse.ArgumentParser(prog="python -m bench.llama_engine",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("agree", help="greedy-token agreement of llama.cpp and nanocompile")
    p.add_argument("--model", help="snapshot directory (default: the full synthetic one)")
    p.add_argument("--tokens", type=int, default=32, help="tokens to generate per prompt")
    p.add_argument("--q8_0", action="store_true", help="also compare the Q8_0 GGUF")
    p.add_argument("--threads", type=int, default=None,
                   help="llama.cpp threads (default: NANOCOMPILE_THREADS or the usable cores)")
    args = parser.parse_args(argv)
    if args.tokens < 1 or (args.threads is not None and args.threads < 1):
        parser.error("--tokens and --threads must be positive")
    return _agree_command(args)


if __name__ == "__main__":
    raise SystemExit(main())

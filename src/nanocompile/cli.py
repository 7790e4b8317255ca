"""The ``nanocompile`` command line: one subcommand per job.

    nanocompile generate "The capital of France is"     # stream a continuation
    nanocompile generate -f prompt.txt --json           # one JSON object, for scripts
    nanocompile chat --system "Be brief."               # a conversation (a REPL on a terminal)
    nanocompile serve                                   # an OpenAI-compatible HTTP server
    nanocompile compile                                 # kernels, bytes, cache
    nanocompile perplexity FILE                         # spec §1.5
    nanocompile dump --stage loop --layers 1            # the IR after a stage
    nanocompile synth DIR [--tiny]                      # a synthetic snapshot

Without ``--model DIR`` the model is the embedded default, a synthetic
Qwen2.5-0.5B generated once into the user cache (its text is meaningless).
Generated text goes to stdout; progress (on a terminal, for steps over a
second), notices and the closing speed line to stderr. Every error a user
can cause ends in one line on stderr and a non-zero exit, never a traceback
(set ``NANOCOMPILE_TRACEBACK=1`` to see one anyway). Heavy modules (xDSL, the
compiler, the server) are imported by the subcommands that need them, so
``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from nanocompile.inference.progress import StderrProgress

if TYPE_CHECKING:
    from nanocompile.api import Model
    from nanocompile.checkpoint.config import Qwen2Config
    from nanocompile.inference.conversation import Conversation
    from nanocompile.inference.generate import GenerationResult
    from nanocompile.inference.sampling import Sampler, SamplingParams
    from nanocompile.tokenizer.tokenizer import Tokenizer

PROG = "nanocompile"
SYNTHETIC_NOTICE = (
    f"{PROG}: note: no --model given: using the embedded default, a SYNTHETIC "
    "Qwen2.5-0.5B (deterministic random weights): its text is meaningless"
)
MAX_THREADS = 256


class UserError(Exception):
    """A problem with the user's input, reported as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``nanocompile: error: ...``, pointing at the
    help of the (sub)command that failed."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """As argparse, but an unknown option is reported by the subcommand's parser
        (argparse leaves it to the top level, whose help does not list the options)."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            owner: argparse.ArgumentParser = getattr(parsed, "parser", self)
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed


# --------------------------------------------------------------------------
# argument types


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


def _thread_count(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_THREADS:
        raise argparse.ArgumentTypeError(f"expected a thread count in 1..{MAX_THREADS}, "
                                         f"got {value}")
    return value


def _port(text: str) -> int:
    value = _non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 0..65535, got {value}")
    return value


# --------------------------------------------------------------------------
# shared pieces


_REPORTER: StderrProgress | None = None


def _progress() -> StderrProgress:
    """The process's one progress reporter (on stderr, when it is a terminal)."""
    global _REPORTER
    if _REPORTER is None:
        _REPORTER = StderrProgress(sys.stderr)
    return _REPORTER


def _note(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _int8_embedding(args: argparse.Namespace) -> bool:
    """``not --f32-embedding``, which only ``--weights int8`` / ``int8-dot`` take."""
    if args.f32_embedding and args.weights not in ("int8", "int8-dot"):
        raise UserError(f"--f32-embedding needs --weights int8 or int8-dot, got --weights "
                        f"{args.weights or '(the snapshot default)'}")
    return not args.f32_embedding


def _int8_dot_head(args: argparse.Namespace) -> bool:
    """``--int8-dot-head``, which needs ``--weights int8-dot`` and the int8 embedding."""
    if args.int8_dot_head and args.weights != "int8-dot":
        raise UserError(f"--int8-dot-head needs --weights int8-dot, got --weights "
                        f"{args.weights or '(the snapshot default)'}")
    if args.int8_dot_head and args.f32_embedding:
        raise UserError("--int8-dot-head and --f32-embedding exclude each other: the first "
                        "runs the int8 LM head on kernel B, the second keeps the LM head f32")
    return bool(args.int8_dot_head)


def _use_threads(args: argparse.Namespace) -> None:
    """``--threads N``: the compiled kernels' pool size (NANOCOMPILE_THREADS, read by
    the pool when it starts)."""
    threads = getattr(args, "threads", None)
    if threads is not None:
        os.environ["NANOCOMPILE_THREADS"] = str(threads)


def _model_dir(args: argparse.Namespace) -> Path:
    """``--model`` (it must exist), or the default snapshot (generated if needed)."""
    if args.model is None:
        from nanocompile.api import ensure_default_snapshot

        print(SYNTHETIC_NOTICE, file=sys.stderr, flush=True)
        return ensure_default_snapshot(_progress())
    path = Path(args.model)
    if not path.is_dir():
        raise UserError(f"{path}: model directory does not exist")
    return path


def _context_of(args: argparse.Namespace, directory: Path) -> int:
    """``--context`` checked against the snapshot's config (read, not loaded)."""
    from nanocompile.checkpoint.config import Qwen2Config

    limit = Qwen2Config.from_file(directory / "config.json").max_position_embeddings
    context = getattr(args, "context", None)
    if context is None:
        return limit
    if not 2 <= context <= limit:
        raise UserError(f"--context must be in [2, {limit}] (max_position_embeddings), "
                        f"got {context}")
    return context


def _load_model(args: argparse.Namespace, *, last_only: bool = True,
                tokenizer: Tokenizer | None = None, notice: bool = True) -> Model:
    """Load ``--model`` (or the synthetic default, saying so unless ``notice`` is
    false: it was said already) on ``--backend``."""
    from nanocompile.api import load

    int8_embedding = _int8_embedding(args)
    int8_dot_head = _int8_dot_head(args)
    _use_threads(args)
    if args.model is None and notice:
        print(SYNTHETIC_NOTICE, file=sys.stderr, flush=True)
    return load(args.model, backend=getattr(args, "backend", "c"), last_only=last_only,
                context=getattr(args, "context", None), progress=_progress(),
                weights=args.weights, int8_embedding=int8_embedding,
                int8_dot_head=int8_dot_head, tokenizer=tokenizer)


def _sampling_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling fields the user set explicitly (SamplingParams checks them)."""
    chosen: dict[str, Any] = {}
    for name in ("temperature", "top_k", "top_p", "repetition_penalty"):
        value = getattr(args, name)
        if value is not None:
            chosen[name] = value
    if args.greedy:
        chosen["temperature"] = 0.0
    return chosen


def _check_sampling_flags(args: argparse.Namespace) -> None:
    """Bad sampling flags fail before anything slow (SamplingParams says why)."""
    from nanocompile.inference.sampling import SamplingParams

    SamplingParams(**_sampling_from_flags(args))


def _base_params(args: argparse.Namespace, model_dir: Path, seed: int | None
                 ) -> SamplingParams:
    """The sampling parameters before the explicit flags.

    By default the snapshot's generation_config.json (temperature, top-k,
    top-p; as transformers does), without its repetition penalty (spec
    §1.4: not unless asked for), or spec §1.4's defaults if the snapshot has
    no such file; ``--model-defaults``: the file, which must exist, penalty
    included; ``--no-model-defaults``: spec §1.4's defaults (T 1, no top-k,
    no top-p).
    """
    from nanocompile.inference.sampling import SamplingParams, from_generation_config

    mode = args.model_defaults
    if mode is False or (mode is None and not os.path.lexists(
            model_dir / "generation_config.json")):
        return SamplingParams(seed=seed)
    return from_generation_config(model_dir, seed=seed, with_repetition_penalty=mode is True)


def _sampler(args: argparse.Namespace, model_dir: Path) -> Sampler:
    """The sampler the flags describe (``model_dir``: where generation_config.json is);
    explicit flags win over the defaults. Without ``--seed`` a random seed is
    drawn (and reported at the end)."""
    from dataclasses import replace

    from nanocompile.inference.sampling import Sampler

    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    return Sampler(replace(_base_params(args, model_dir, seed), **_sampling_from_flags(args)))


_OPEN_LINE = False  # stdout holds a line of generated text without its newline


def _write(piece: str) -> None:
    global _OPEN_LINE
    sys.stdout.write(piece)
    sys.stdout.flush()
    _OPEN_LINE = not piece.endswith("\n")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _how(sampler: Sampler) -> str:
    p = sampler.params
    how = ("greedy" if p.greedy else
           f"T={p.temperature:g} top-k={p.top_k} top-p={p.top_p:g} seed={p.seed}")
    if p.repetition_penalty != 1.0:
        how += f" repetition-penalty={p.repetition_penalty:g}"
    return how


def _closing_line(result: GenerationResult, sampler: Sampler) -> str:
    speed = (f"{result.decode_tok_per_s:.1f} tok/s" if result.decode_steps
             else "n/a (no decode step)")
    return (f"{PROG}: {_count(len(result.token_ids), 'token')} generated "
            f"(stop: {result.stop_reason.replace('_', ' ')}) | "
            f"prefill {_count(result.prompt_tokens, 'token')}"
            f"{f' ({result.cached_prompt_tokens} cached)' if result.cached_prompt_tokens else ''}"
            " in "
            f"{result.prefill_seconds:.3f} s | decode {speed} | {_how(sampler)}")


def _threads_of(model: Model) -> int | None:
    """The compiled kernels' thread count (None on the interpreter)."""
    from nanocompile.backend.runtime import CompiledBackend

    backend = model.engine.backend
    return backend.program.threads() if isinstance(backend, CompiledBackend) else None


def _result_json(model: Model, result: GenerationResult, sampler: Sampler) -> str:
    p = sampler.params
    return json.dumps({
        "text": result.text,
        "token_ids": result.token_ids,
        "prompt_tokens": result.prompt_tokens,
        "stop_reason": result.stop_reason,
        "timings": {"prefill_seconds": result.prefill_seconds,
                    "decode_seconds": result.decode_seconds,
                    "decode_steps": result.decode_steps,
                    "decode_tok_per_s": result.decode_tok_per_s},
        "sampling": {"greedy": p.greedy, "temperature": p.temperature, "top_k": p.top_k,
                     "top_p": p.top_p, "repetition_penalty": p.repetition_penalty,
                     "seed": p.seed},
        "model": str(model.path),
        "backend": model.backend,
        "weights": model.weights,
        "threads": _threads_of(model),
    }, ensure_ascii=False)


def _read_text(source: str, what: str) -> str:
    """The text of file ``source`` (``-``: stdin), bytes that are not UTF-8 replaced."""
    if source == "-":
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else (
            sys.stdin.read().encode("utf-8", "surrogateescape"))
    else:
        path = Path(source)
        if not path.is_file():
            raise UserError(f"{path}: no such file")
        data = path.read_bytes()
    return _valid_text(data.decode("utf-8", "surrogateescape"), what)


def _prompt(args: argparse.Namespace) -> str:
    """PROMPT, ``-`` (stdin) or ``-f FILE`` (``-f -``: stdin), exactly one of them."""
    if args.prompt is not None and args.file is not None:
        raise UserError("give PROMPT or -f FILE, not both")
    if args.file is not None:
        return _read_text(args.file, "stdin" if args.file == "-" else args.file)
    if args.prompt is None:
        raise UserError("no prompt: give PROMPT, - (read stdin) or -f FILE")
    if args.prompt == "-":
        return _read_text("-", "stdin")
    return _valid_text(args.prompt, "PROMPT")


# --------------------------------------------------------------------------
# subcommands


def _cmd_synth(args: argparse.Namespace) -> int:
    from nanocompile.checkpoint.synth import write_synthetic_snapshot

    progress = _progress()
    what = "writing the synthetic snapshot"
    out = write_synthetic_snapshot(Path(args.dir), tiny=args.tiny, seed=args.seed,
                                   progress=lambda _, done, total: progress(what, done, total))
    size = "tiny 2-layer" if args.tiny else "full-size Qwen2.5-0.5B-shaped"
    print(f"wrote a {size} synthetic snapshot (seed {args.seed}) to {out}")
    print("note: synthetic weights: the model's text is meaningless by design")
    return 0


def _cmd_cache(args: argparse.Namespace) -> int:
    from nanocompile.api import aligned_cache_dir, home_dir, int8_cache_dir
    from nanocompile.backend.cache_usage import prune, survey
    from nanocompile.backend.gcc import default_cache_dir

    areas = survey(home_dir(), default_cache_dir(), int8_cache_dir(), aligned_cache_dir(),
                   older_than_days=args.older_than)
    print(f"nanocompile caches (home {home_dir()}):")
    width = max(len(a.name) for a in areas)
    for area in areas:
        state = f"{'missing':>13}" if not area.path.exists() else f"{area.nbytes / 1e6:10.1f} MB"
        note = (f"; stale: {len(area.stale)}, {area.stale_bytes / 1e6:.1f} MB"
                if area.stale else "")
        print(f"  {area.name:<{width}}  {state}  {area.path}"
              + (f"  ({area.detail}{note})" if area.detail or note else ""))
    stale = [s for a in areas for s in a.stale]
    total = sum(s.nbytes for s in stale)
    reasons = sorted({f"{a.name}: {s.reason}" for a in areas for s in a.stale})
    if not stale:
        print("nothing stale (kernels count as stale when unused for "
              f"{args.older_than:g} days: --older-than)")
        return 0
    if args.prune and not args.dry_run:
        removed, freed = prune(areas)
        left = len(stale) - removed
        print(f"removed {removed} stale entries, {freed / 1e6:.1f} MB"
              + (f"; {left} left in use by a build" if left else ""))
    else:
        verb = "would remove" if args.dry_run else "--prune removes"
        print(f"{verb} {len(stale)} stale entries, {total / 1e6:.1f} MB:")
        for reason in reasons:
            print(f"  {reason}")
    return 0


def _load_config(model: str | None) -> Qwen2Config:
    from nanocompile.checkpoint.config import Qwen2Config

    if model is None:
        from nanocompile.checkpoint.synth import synthetic_config

        return Qwen2Config.from_dict(synthetic_config(), source="<Qwen2.5-0.5B config>")
    path = Path(model)
    if not path.is_dir():
        raise UserError(f"{path}: model directory does not exist")
    return Qwen2Config.from_file(path / "config.json")


def _cmd_dump(args: argparse.Namespace) -> int:
    from nanocompile.api import ir_text
    from nanocompile.inference.progress import report_step

    if args.explain and args.stage != "scheduled":
        raise UserError(f"--explain needs --stage scheduled, got --stage {args.stage}")
    int8_embedding = _int8_embedding(args)
    int8_dot_head = _int8_dot_head(args)
    cfg = _load_config(args.model)
    if args.layers is not None and not 0 < args.layers <= cfg.num_hidden_layers:
        raise UserError(f"--layers must be in [1, {cfg.num_hidden_layers}], got {args.layers}")
    text = report_step(_progress(), f"building the program up to stage '{args.stage}'",
                       lambda: ir_text(cfg, args.stage, n_layers=args.layers,
                                       last_only=args.last_only, explain=args.explain,
                                       weights=args.weights, int8_embedding=int8_embedding,
                                       int8_dot_head=int8_dot_head))
    print(text)
    return 0


def _valid_text(text: str, what: str) -> str:
    """``text`` (from argv or stdin) with its undecodable bytes replaced by U+FFFD, saying so.

    Python hands over bytes that are not UTF-8 as lone surrogates
    (``surrogateescape``); the tokenizer takes valid Unicode only.
    """
    from nanocompile.tokenizer.tokenizer import replace_undecodable

    clean, count = replace_undecodable(text)
    if count:
        print(f"{PROG}: note: {what} is not valid UTF-8: {count} undecodable "
              f"byte{'s' if count != 1 else ''} replaced by U+FFFD", file=sys.stderr, flush=True)
    return clean


def _cmd_generate(args: argparse.Namespace) -> int:
    from nanocompile.inference.generate import check_prompt, check_stops
    from nanocompile.tokenizer.tokenizer import Tokenizer

    prompt = _prompt(args)
    stops = check_stops(args.stop or ())
    _check_sampling_flags(args)
    _int8_embedding(args)
    _int8_dot_head(args)
    directory = _model_dir(args)
    context = _context_of(args, directory)
    tokenizer = Tokenizer.from_dir(directory)
    prompt_ids = tokenizer.encode(prompt)
    check_prompt(prompt_ids, context)  # before the slow load
    sampler = _sampler(args, directory)
    model = _load_model(args, tokenizer=tokenizer, notice=False)
    stream = None if args.json else _write
    result = model.generate_ids(prompt_ids, max_tokens=args.max_tokens, sampling=sampler,
                                stop_ids=() if args.ignore_eos else model.stop_ids(chat=False),
                                on_token=stream, stop=stops)
    if args.json:
        print(_result_json(model, result, sampler), flush=True)
        return 0
    _write("\n")
    print(_closing_line(result, sampler), file=sys.stderr)
    _tuned_note(model)
    return 0


def _tuned_note(model: Model) -> None:
    """Say so when the program was scheduled with the tuner's winners."""
    kernels = model.tuned_winners()
    if kernels:
        from nanocompile.backend.tuning_records import tuning_path

        _note(f"{kernels} kernels scheduled with this machine's tuned winners from "
              f"{tuning_path()} (nanocompile tune)")


# -- chat -------------------------------------------------------------------


CHAT_COMMANDS = ("/reset: forget the conversation (the system message stays); "
                 "/system TEXT: set the system message (/system alone: the template's "
                 "default); /help: this list")


class _CtrlC:
    """While a reply runs, Ctrl-C asks it to stop (at the next token) instead of
    ending the session."""

    def __init__(self) -> None:
        self.pressed = threading.Event()
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        self.pressed.clear()
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.pressed.set()


class _Lines:
    """The user's lines: with line editing and history (readline) on a terminal,
    plain lines from a pipe or a file."""

    def __init__(self, interactive: bool) -> None:
        self.interactive = interactive
        self.number = 0
        self._editing = interactive and sys.stdout.isatty()
        if self._editing:
            try:
                import readline  # noqa: F401  (input() edits lines and keeps a history)
            except ImportError:
                self._editing = False

    def read(self) -> str | None:
        """The next line without its newline; None at the end of the input."""
        self.number += 1
        if self._editing:
            try:
                return input("> ")
            except EOFError:
                _write("\n")
                return None
        if self.interactive:
            print("> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        return line.rstrip("\r\n") if line else None


def _chat_command(line: str, conversation: Conversation) -> bool:
    """Run ``/reset``, ``/system``, ``/help``; False if ``line`` is a message."""
    if not line.startswith("/"):
        return False
    name, _, rest = line.partition(" ")
    if name == "/reset":
        conversation.reset()
        _note("conversation cleared (the system message stays)")
    elif name == "/system":
        conversation.system = rest.strip() or None
        _note("system message set" if conversation.system else
              "system message: the chat template's default")
    elif name == "/help":
        _note(CHAT_COMMANDS)
    else:
        _note(f"unknown command {name} ({CHAT_COMMANDS})")
    return True


def _fit_conversation(model: Model, conversation: Conversation, max_tokens: int) -> None:
    """Drop the oldest turns (with a notice) so the reply has ``max_tokens`` of room."""
    dropped = conversation.fit(lambda messages: len(model.chat_ids(messages)),
                               model.context - max_tokens)
    if dropped:
        _note(f"the conversation outgrew the context ({model.context} tokens): dropped the "
              f"oldest {_count(dropped, 'turn')}")


def _chat_turn(model: Model, conversation: Conversation, args: argparse.Namespace,
               sampler: Sampler, stops: tuple[str, ...], ctrl_c: _CtrlC | None) -> None:
    """One reply to the conversation's newest user message."""
    _fit_conversation(model, conversation, args.max_tokens)
    if ctrl_c is None:
        result = model.chat(conversation.messages(), max_tokens=args.max_tokens,
                            sampling=sampler, on_token=_write, stop=stops)
    else:
        with ctrl_c:
            result = model.chat(conversation.messages(), max_tokens=args.max_tokens,
                                sampling=sampler, on_token=_write, stop=stops,
                                cancel=ctrl_c.pressed.is_set)
    _write("\n")
    if result.stop_reason == "cancelled":
        _note("reply stopped (Ctrl-C); the conversation goes on")
    print(_closing_line(result, sampler), file=sys.stderr, flush=True)
    conversation.add("assistant", result.text)


def _cmd_chat(args: argparse.Namespace) -> int:
    from nanocompile.inference.conversation import Conversation
    from nanocompile.inference.generate import ContextLengthError, check_stops

    system = None if args.system is None else _valid_text(args.system, "--system")
    stops = check_stops(args.stop or ())
    if isinstance(sys.stdin, io.TextIOWrapper):  # bytes that are not UTF-8: whatever the locale
        sys.stdin.reconfigure(errors="surrogateescape")
    _check_sampling_flags(args)
    directory = _model_dir(args)
    _context_of(args, directory)
    sampler = _sampler(args, directory)
    model = _load_model(args, notice=False)
    conversation = Conversation(system)
    lines = _Lines(sys.stdin.isatty())
    if lines.interactive:
        _note(f"chat with {model.path.name}: Ctrl-C stops a reply, Ctrl-D ends; "
              f"{CHAT_COMMANDS}")
    while True:
        try:
            line = lines.read()
        except KeyboardInterrupt:  # at the prompt: a fresh line, as a shell does
            if not lines.interactive:
                raise
            _write("\n")
            continue
        if line is None:
            break
        if not line.strip() or _chat_command(line, conversation):
            continue
        conversation.add("user", _valid_text(line, f"line {lines.number} of stdin"))
        try:
            _chat_turn(model, conversation, args, sampler, stops,
                       _CtrlC() if lines.interactive else None)
        except ContextLengthError as exc:
            conversation.drop_last_user_turn()
            if not lines.interactive:
                raise
            _note(f"error: {exc} (shorten the message, or /reset)")
    return 0


# -- serve ------------------------------------------------------------------


def _cmd_serve(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from nanocompile.server import Settings, listen, serve

    _check_sampling_flags(args)
    directory = _model_dir(args)
    _context_of(args, directory)
    # a request's defaults: the flags over the snapshot's (no seed: each request draws one)
    defaults = replace(_base_params(args, directory, None), **_sampling_from_flags(args))
    sock = listen(args.host, args.port)  # before the slow load: a taken port fails at once
    try:
        model = _load_model(args, notice=False)
        _progress().enabled = False  # the prefill of requests: no bars in the server's log
        name = args.name or model.path.name
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        _note(f"serving {name} at http://{shown}:{port}/v1 (OpenAI API: /v1/chat/completions, "
              f"/v1/completions, /v1/models; GET /health); requests queue on the one model; "
              f"Ctrl-C stops")
        serve(model, Settings(name, defaults, args.max_tokens), sock,
              max_body=args.max_body_bytes, log_level=args.log_level)
    finally:
        sock.close()
    _note("server stopped")
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    model = _load_model(args, last_only=not args.all_positions)
    if args.json:
        print(json.dumps(model.compile_report()), flush=True)
        return 0
    r = model.compile_report()
    stages = r["compile_stages"]
    print(f"model                   {r['model']}"
          f"{' (synthetic)' if r['synthetic'] else ''}")
    print(f"graph                   {r['layers']} layers, "
          f"{'last-position' if r['last_only'] else 'all-position'} logits")
    widened = (f"{r['widened_weights']} widened to f32, "
               f"{r['widened_weight_bytes'] / 2**20:.1f} MiB")
    print(f"weights                 {r['weights']} ({widened})")
    if r["weights"] in ("int8", "int8-dot"):
        embedding = "int8" if r["int8_embedding"] else f"{r['graph_weights']} (--f32-embedding)"
        cached = (f"quantized at this load in {r['int8_quantize_seconds']:.1f} s"
                  if r["int8_quantized"] else "mapped from the int8 cache")
        head = {"a": "; LM head kernel A", "b": "; LM head kernel B too (--int8-dot-head)",
                None: ""}[r["int8_head_kernel"]]
        kernel = "kernel A (W8A32)" if r["int8_kernel"] == "a" else \
            f"kernel B (W8A8, integer dot products{head})"
        print(f"  int8                  {kernel}: {r['int8_matrices']} matrices, "
              f"int8 values + f32 row scales, {r['int8_weight_bytes'] / 2**20:.1f} MiB "
              f"({cached}); embedding and LM head {embedding}; the other weights "
              f"{r['graph_weights']}")
    print(f"kernel launches / step  {r['launches_per_step']}")
    print(f"distinct kernels        {r['distinct_kernels']}")
    print(f"bytes moved / step      {r['bytes_per_step']}")
    print(f"  at past=0, seq=1      {r['bytes_per_decode_step']:,} "
          f"({r['bytes_per_decode_step'] / 2**20:.1f} MiB)")
    steps = ", ".join(f"{name} {seconds:.2f}" for name, seconds in stages.items())
    print(f"compile time            {r['compile_seconds']:.2f} s ({steps}; "
          f"cache {'hit' if r['cache_hit'] else 'miss'})")
    print(f"library                 {r['library']}")
    print(f"kernel cache            {r['kernel_cache_dir']}")
    print(f"tuned schedules         {_tuned_text(r)}")
    return 0


def _tuned_text(r: dict[str, Any]) -> str:
    """What the compile report says of the tuner's winners."""
    if r["tuning_records"] == "off":
        return "off (NANOCOMPILE_TUNING=off): hand-written schedules"
    if not r["tuned_winners"]:
        return f"none recorded for this machine ({r['tuning_records']}): hand-written"
    return (f"{r['tuned_winners']} winners recorded for this machine and thread count, "
            f"{r['tuned_kernels']} kernels scheduled by them ({r['tuning_records']})")




def _cmd_tune(args: argparse.Namespace) -> int:
    from nanocompile.backend.tuning_records import tuning_path

    if tuning_path() is None:
        raise UserError("NANOCOMPILE_TUNING=off: there is nowhere to record the winners")
    model = _load_model(args)
    live = _TuneProgress(args.json)
    with live:
        outcomes = model.tune(budget=args.budget, seed=args.seed, samples=args.samples,
                              max_candidates=args.max_candidates, threads=args.threads,
                              progress=live, on_outcome=live.finished)
    if args.json:
        print(json.dumps({"records": str(tuning_path()), "kernels": [
            o.entry(args.seed, args.samples, args.max_candidates) for o in outcomes]}),
            flush=True)
        return 0
    kept = sum(o.winner for o in outcomes)
    print(f"{len(outcomes)} kernels tuned, {kept} winners kept (> 3 % faster than the "
          f"hand schedule in the final paired run); records: {tuning_path()}")
    for o in outcomes:
        print(f"  {_tune_line(o)}")
    return 0


def _tune_line(o: Any) -> str:
    """One kernel's outcome, as the tune command prints it."""
    names = o.job.names[0] + (f" (+{len(o.job.names) - 1})" if len(o.job.names) > 1 else "")
    head = f"{names}: {len(o.result.tried)} candidates, best {o.best.text()}"
    if o.best != o.result.best:
        back = sum(getattr(o.best, f.name) != getattr(o.result.best, f.name)
                   for f in dataclasses.fields(o.best))
        if o.refined and o.refined[0][0][0] != o.best:
            head += (f" (the search's {o.result.best.text()} taken toward hand and refined: "
                     f"{back} knob(s) changed)")
        else:
            head += f" (the search's {o.result.best.text()} with {back} knob(s) put back)"
    note = f"; {o.note}" if o.note else ""
    if not o.final_rounds:
        return f"{head}: the hand schedule ({o.hand_ns / 1e6:.3f} ms){note}"
    verdict = "kept" if o.winner else "hand kept"
    return (f"{head}; final run {o.hand_ns / 1e6:.3f} ms hand, {o.tuned_ns / 1e6:.3f} ms best "
            f"({o.speedup:.3f}x, {o.rounds_won}/{o.final_rounds} rounds): {verdict}{note}")


class _TuneProgress:
    """The tune command's progress: a rich bar of kernels done with the candidates
    tried and the best so far on a terminal; one line per kernel on stderr
    always (unless ``--json``)."""

    def __init__(self, quiet: bool) -> None:
        from nanocompile.inference.progress import is_terminal

        self.quiet = quiet
        self.bar: Any = None
        self.task: Any = None
        if not quiet and is_terminal(sys.stderr) and is_terminal(sys.stdout):
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("{task.fields[status]}"),
                                console=Console(file=sys.stderr), transient=True)

    def __enter__(self) -> _TuneProgress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, done: int, total: int, job: Any, result: Any) -> None:
        if self.bar is not None:
            if self.task is None:
                self.task = self.bar.add_task("tuning kernels", total=total, status="")
            status = f"{job.names[0]}: starting"
            if result is not None and result.tried:
                best = result.best_cost
                hand = dict(result.tried).get(job.hand, float("nan"))
                status = (f"{job.names[0]}: {len(result.tried)} candidates, best "
                          f"{hand / best:.2f}x hand" if best > 0 else "")
            self.bar.update(self.task, completed=done, status=status)

    def finished(self, outcome: Any, done: int, total: int) -> None:
        if not self.quiet:
            message = f"tuned {done}/{total}: {_tune_line(outcome)}"
            if self.bar is not None:
                self.bar.console.print(f"{PROG}: {message}", highlight=False)
            else:
                _note(message)


def _cmd_perplexity(args: argparse.Namespace) -> int:
    from nanocompile.inference.perplexity import perplexity

    path = Path(args.file)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    model = _load_model(args, last_only=False)
    ids = model.tokenizer.encode(text)
    if args.max_tokens is not None:
        ids = ids[: args.max_tokens]
    if len(ids) < 2:
        raise UserError(f"{path}: needs at least 2 tokens, has {len(ids)}")
    result = perplexity(ids, model.logits, chunk=args.chunk, progress=_progress())
    print(f"perplexity {result.ppl!r}")
    print(f"scored {result.scored} of {len(ids)} tokens in {result.chunks} chunks of "
          f"{args.chunk} (mean NLL {result.nll / result.scored:.6f} nats)")
    return 0


# --------------------------------------------------------------------------
# the parser


Command = Callable[[argparse.Namespace], int]


def _add_model_options(p: argparse.ArgumentParser, backend: bool = True) -> None:
    p.add_argument("--model", metavar="DIR",
                   help="Qwen2 snapshot directory (default: the embedded synthetic "
                   "Qwen2.5-0.5B, generated once into the user cache)")
    if backend:
        p.add_argument("--backend", choices=["c", "interpreter"], default="c",
                       help="c: compiled kernels (default); interpreter: the NumPy reference")
    p.add_argument("--weights", choices=["bf16", "f32", "int8", "int8-dot"], default=None,
                   help="weight format: bf16 (the kernels read the snapshot's bf16 tensors "
                   "in place; the default for a bf16 snapshot) or f32 (every tensor widened "
                   "at load), the same bits either way; int8 (spec 5's kernel A, W8A32: the "
                   "projections and the embedding/LM head as int8 with f32 row scales, "
                   "quantized at the first load and cached); int8-dot (kernel B, W8A8: "
                   "activations quantized per block of 32, integer dot products: VNNI, "
                   "AVX2 or scalar, whichever this CPU has)")
    _add_int8_options(p)
    if backend:
        p.add_argument("--threads", type=_thread_count, metavar="N",
                       help="threads of the compiled kernels, 1..256 (default: "
                       "$NANOCOMPILE_THREADS, else the physical cores)")


def _add_int8_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--f32-embedding", action="store_true",
                   help="with --weights int8 or int8-dot: keep the embedding and the LM "
                   "head as the snapshot stores them (default: int8 too, as nanoinfer)")
    p.add_argument("--int8-dot-head", action="store_true",
                   help="with --weights int8-dot: run the int8 LM head on kernel B too, its "
                   "activations quantized per block of 32 (default: kernel A, f32 "
                   "activations, as spec 5 has it)")


def _add_sampling_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temperature", type=float, metavar="T",
                   help="softmax temperature; 0 is greedy (default: the model's, see "
                   "--model-defaults)")
    p.add_argument("--top-k", type=_non_negative_int, metavar="K",
                   help="keep the K most likely tokens; 0 disables")
    p.add_argument("--top-p", type=float, metavar="P",
                   help="nucleus sampling mass in (0, 1]; 1 disables")
    p.add_argument("--repetition-penalty", type=float, metavar="R",
                   help="penalize tokens already seen; 1 disables (default 1: spec 1.4)")
    p.add_argument("--greedy", action="store_true", help="always take the most likely token")
    p.add_argument("--model-defaults", action=argparse.BooleanOptionalAction, default=None,
                   help="sampling starts from the snapshot's generation_config.json: by "
                   "default its temperature, top-k and top-p (as transformers does; spec "
                   "1.4's T=1, no top-k, no top-p when the file is absent); "
                   "--model-defaults: the file, which must exist, with its repetition "
                   "penalty too; --no-model-defaults: spec 1.4's defaults. Explicit flags "
                   "override either")
    p.add_argument("--context", type=_positive_int, metavar="N",
                   help="most tokens (prompt + generated) to hold "
                   "(default: the model's max_position_embeddings)")


def _add_generation_options(p: argparse.ArgumentParser) -> None:
    _add_model_options(p)
    p.add_argument("--max-tokens", type=_positive_int, default=64, metavar="N",
                   help="most tokens to generate (default 64)")
    _add_sampling_options(p)
    p.add_argument("--seed", type=_non_negative_int, metavar="S",
                   help="random seed: the same seed gives the same text (default: random)")
    p.add_argument("--stop", action="append", metavar="STRING",
                   help="stop when the text reaches STRING (not printed); repeatable")


def _subparser(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(name, **kwargs)
    parser.set_defaults(parser=parser)  # unknown options are this parser's to report
    return parser


def _version() -> str:
    """``nanocompile --version``: this package's version and what it runs on."""
    from importlib.metadata import PackageNotFoundError, version

    from nanocompile import __version__

    try:
        xdsl = version("xdsl")
    except PackageNotFoundError:  # a source tree without the package installed
        xdsl = "not installed"
    python = ".".join(str(n) for n in sys.version_info[:3])
    return f"{PROG} {__version__} (xdsl {xdsl}, Python {python})"


class _VersionAction(argparse.Action):
    """``--version``, its text read only when asked for (the package metadata
    lookup costs ~60 ms, which every other command would pay)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(_version())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="A small tensor compiler for Qwen2 on xDSL.")
    parser.add_argument("--version", action=_VersionAction,
                        help="print the versions of nanocompile, xDSL and Python, and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    gen = _subparser(sub, "generate", help="continue a prompt, streaming the tokens",
                     description="Continue PROMPT, printing tokens as they are produced, "
                     "then a line on stderr with prefill time and decode speed (--json: "
                     "one JSON object on stdout instead). Stops at <|endoftext|>.")
    gen.add_argument("prompt", metavar="PROMPT", nargs="?",
                     help="the text to continue; - reads it from stdin (bytes that are not "
                     "UTF-8 become U+FFFD, with a note on stderr)")
    gen.add_argument("-f", "--file", metavar="FILE",
                     help="read the prompt from FILE, exactly as it is (- : stdin)")
    _add_generation_options(gen)
    gen.add_argument("--ignore-eos", action="store_true",
                     help="do not stop at <|endoftext|>")
    gen.add_argument("--json", action="store_true",
                     help="print one JSON object (text, token_ids, prompt_tokens, "
                     "stop_reason, timings, sampling, model, threads) instead of streaming")
    gen.set_defaults(func=_cmd_generate)

    chat = _subparser(sub, "chat", help="a ChatML conversation: a REPL on a terminal, one "
                      "user turn per line from a pipe",
                      description="Answer each user turn: on a terminal a REPL with line "
                      "editing and history (Ctrl-C stops a reply and keeps the session, "
                      "Ctrl-D ends it); from a pipe or a file one turn per line. The whole "
                      "conversation is the context; when it outgrows the context the oldest "
                      "turns are dropped, with a notice. /reset forgets the conversation, "
                      "/system TEXT sets the system message. Replies stop at <|im_end|>. "
                      "Bytes that are not UTF-8 (on stdin or in --system) become U+FFFD, "
                      "with a note on stderr.")
    chat.add_argument("--system", metavar="TEXT",
                      help="the system message (default: the chat template's)")
    _add_generation_options(chat)
    chat.set_defaults(func=_cmd_chat)

    serve = _subparser(sub, "serve", help="an OpenAI-compatible HTTP server",
                       description="Serve the model over HTTP with OpenAI's API: "
                       "POST /v1/chat/completions and /v1/completions (stream: true for "
                       "server-sent events), GET /v1/models and /health. Requests queue on "
                       "the one model and run one at a time, in arrival order. No "
                       "authentication: it listens on 127.0.0.1 unless --host says otherwise.")
    _add_model_options(serve)
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=_port, default=8000,
                       help="TCP port (default 8000; 0: any free port, printed at start)")
    serve.add_argument("--name", metavar="NAME",
                       help="the model id clients see (default: the snapshot directory's "
                       "name)")
    serve.add_argument("--max-tokens", type=_positive_int, default=512, metavar="N",
                       help="max_tokens of a request that gives none (default 512)")
    serve.add_argument("--max-body-bytes", type=_positive_int, default=1 << 20, metavar="N",
                       help="largest request body accepted (default 1 MiB; larger: 413)")
    serve.add_argument("--log-level", choices=["critical", "error", "warning", "info",
                                               "debug"], default="info",
                       help="uvicorn's log level (default info: one line per request)")
    _add_sampling_options(serve)
    serve.set_defaults(func=_cmd_serve)

    comp = _subparser(sub, "compile", help="compile a snapshot and report the work per step",
                      description="Compile the model with gcc (cached) and report the "
                      "weight format, kernel launches and bytes moved per decode step, "
                      "compile time and the kernel cache location.")
    _add_model_options(comp, backend=False)
    comp.add_argument("--all-positions", action="store_true",
                      help="compile the graph with logits for every position")
    comp.add_argument("--json", action="store_true",
                      help="print the report as one JSON object (Model.compile_report())")
    comp.set_defaults(func=_cmd_compile)

    tune = _subparser(sub, "tune", help="tune the projections' schedules on this machine",
                      description="Measure candidate schedules of each projection kernel of "
                      "the model on this machine (a seeded random sample of its knobs, the "
                      "hand-written schedule among them, then greedy one-knob steps), each "
                      "checked bitwise against the unscheduled kernel before it is timed by "
                      "a C loop on a decode step and a 64-row prefill (the cost: their times "
                      "per token, summed); keep a winner only when it beats the hand "
                      "schedule by more than 3 % in a final paired "
                      "run. The results go to the tuning records ($NANOCOMPILE_TUNING, "
                      "default tuning.json in the kernel cache), which compile, generate, "
                      "chat and serve then use on this machine (same CPU, compiler and "
                      "thread count).")
    _add_model_options(tune, backend=False)
    tune.add_argument("--threads", type=_thread_count, metavar="N",
                      help="threads while measuring, and the count the winners are for "
                      "(default: $NANOCOMPILE_THREADS, else the physical cores)")
    tune.add_argument("--budget", type=_positive_float, default=math.inf, metavar="SECONDS",
                      help="stop after this long (the kernels not reached stay hand-"
                      "scheduled; default: no limit)")
    tune.add_argument("--seed", type=_non_negative_int, default=0,
                      help="seed of the random sample (default 0)")
    tune.add_argument("--samples", type=_non_negative_int, default=12, metavar="N",
                      help="random points besides the hand schedule (default 12)")
    tune.add_argument("--max-candidates", type=_positive_int, default=48, metavar="N",
                      help="most points measured per kernel (default 48)")
    tune.add_argument("--json", action="store_true",
                      help="print the outcomes as one JSON object instead")
    tune.set_defaults(func=_cmd_tune)

    ppl = _subparser(sub, "perplexity", help="perplexity of a UTF-8 text file (spec 1.5)",
                     description="Tokenize FILE, split it into independent chunks, and "
                     "print exp(mean NLL) over the scored tokens.")
    ppl.add_argument("file", metavar="FILE", help="a UTF-8 text file")
    _add_model_options(ppl)
    ppl.add_argument("--chunk", type=_positive_int, default=128, metavar="N",
                     help="tokens per independent chunk (default 128)")
    ppl.add_argument("--max-tokens", type=_positive_int, metavar="N",
                     help="score only the first N tokens of the file")
    ppl.set_defaults(func=_cmd_perplexity)

    dump = _subparser(sub, "dump", help="print the IR of the Qwen2 program after a stage",
                          description="Print the Qwen2 program after a stage: graph (Graph "
                          "IR as built), fused (after cse, fold-constants, dce, fuse), loop "
                          "(Loop IR), scheduled (the Loop IR with, after each kernel, the "
                          "sched.schedule the default-schedule pass chose for it: "
                          "'nc-opt -p apply-schedule' applies them) or c (the generated C, "
                          "of the scheduled kernels).")
    dump.add_argument("--model", metavar="DIR",
                      help="snapshot directory (default: the Qwen2.5-0.5B architecture)")
    dump.add_argument("--stage", choices=["graph", "fused", "loop", "scheduled", "c"],
                      default="graph",
                      help="which IR to print (default: graph)")
    dump.add_argument("--layers", type=int, default=None, metavar="N",
                      help="build only the first N layers (default: all)")
    dump.add_argument("--last-only", action="store_true",
                      help="logits for the last position only")
    dump.add_argument("--weights", choices=["f32", "bf16", "int8", "int8-dot"], default="f32",
                      help="weight format of the program (default f32; bf16: every weight "
                      "bf16, widened where the kernels read it; int8: the bf16 program "
                      "after quantize-int8, seen from --stage fused on; int8-dot: kernel B)")
    _add_int8_options(dump)
    dump.add_argument("--explain", action="store_true",
                      help="with --stage scheduled: first, as // comments, each kernel's "
                      "refused candidate schedules with the reason, and the one chosen")
    dump.set_defaults(func=_cmd_dump)

    synth = _subparser(sub, "synth", help="write a deterministic synthetic Qwen2 snapshot",
                           description="Write a deterministic synthetic Qwen2.5-0.5B-shaped "
                           "snapshot (bf16 safetensors, config, tokenizer) to DIR.")
    synth.add_argument("dir", metavar="DIR", help="output directory")
    synth.add_argument("--tiny", action="store_true", help="the tiny 2-layer test config")
    synth.add_argument("--seed", type=_non_negative_int, default=0,
                       help="random seed (default 0)")
    synth.set_defaults(func=_cmd_synth)

    cache = _subparser(sub, "cache", help="what the caches hold on disk; --prune removes "
                       "what no run will read again",
                       description="Report the caches under the nanocompile home (compiled "
                       "kernels, int8 and realigned weights, the default snapshot) and "
                       "their stale entries: compiled kernels and programs unused for "
                       "--older-than days (a cache hit marks an entry used), int8 and "
                       "realigned weights of an older format. Tuning records, precompiled "
                       "headers and snapshots are never removed.")
    cache.add_argument("--prune", action="store_true", help="remove the stale entries")
    cache.add_argument("--dry-run", action="store_true",
                       help="with --prune: list what would be removed, remove nothing")
    cache.add_argument("--older-than", type=_non_negative_float, default=30.0, metavar="DAYS",
                       help="compiled kernels unused this long are stale (default 30)")
    cache.set_defaults(func=_cmd_cache)
    return parser


# --------------------------------------------------------------------------
# the entry point


def _user_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a user's input can cause (the library's are all ValueErrors,
    except a gcc failure and memory a long prompt needs but cannot have)."""
    from nanocompile.backend.gcc import CompileError

    return (UserError, ValueError, OSError, CompileError, MemoryError)


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines and isinstance(error, MemoryError):
        return "out of memory"
    return lines[0] if lines else type(error).__name__


def _exit_on_broken_pipe() -> NoReturn:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush is quiet
    sys.exit(1)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``nanocompile`` console script."""
    args = _parser().parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")  # never die on an unprintable character
    func: Command = args.func
    try:
        code = func(args)
    except KeyboardInterrupt:
        _tidy_up()
        sys.exit(f"{PROG}: interrupted")
    except BrokenPipeError:
        _exit_on_broken_pipe()
    except Exception as e:
        if not isinstance(e, _user_errors()) or os.environ.get("NANOCOMPILE_TRACEBACK"):
            raise
        _tidy_up()
        sys.exit(f"{PROG}: error: {_one_line(e)}")
    sys.exit(code)


def _tidy_up() -> None:
    """Before a final message: end a progress line and a line of generated text."""
    if _REPORTER is not None:
        _REPORTER.abort()
    if _OPEN_LINE:
        _write("\n")


if __name__ == "__main__":
    main()

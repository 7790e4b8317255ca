"""The ``nanocompile`` command line: one subcommand per job.

    nanocompile generate "The capital of France is"     # stream a continuation
    nanocompile chat --system "Be brief."               # ChatML turns from stdin
    nanocompile compile                                 # kernels, bytes, cache
    nanocompile perplexity FILE                         # spec §1.5
    nanocompile dump --stage loop --layers 1            # the IR after a stage
    nanocompile synth DIR [--tiny]                      # a synthetic snapshot

Without ``--model DIR`` the model is the embedded default, a synthetic
Qwen2.5-0.5B generated once into the user cache (its text is meaningless).
Generated text goes to stdout; progress, notices and the closing speed line
to stderr. Every error a user can cause ends in one line on stderr and a
non-zero exit, never a traceback (set ``NANOCOMPILE_TRACEBACK=1`` to see one
anyway). Heavy modules (xDSL, the compiler) are imported by the subcommands
that need them, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import io
import os
import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from nanocompile.inference.progress import StderrProgress

if TYPE_CHECKING:
    from nanocompile.api import Model
    from nanocompile.checkpoint.config import Qwen2Config
    from nanocompile.inference.generate import GenerationResult
    from nanocompile.inference.sampling import Sampler

PROG = "nanocompile"
SYNTHETIC_NOTICE = (
    f"{PROG}: note: no --model given: using the embedded default, a SYNTHETIC "
    "Qwen2.5-0.5B (deterministic random weights): its text is meaningless"
)


class UserError(Exception):
    """A problem with the user's input, reported as one line."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``nanocompile: error: ...``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


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


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {value}")
    return value


# --------------------------------------------------------------------------
# shared pieces


_REPORTER: StderrProgress | None = None


def _progress() -> StderrProgress:
    """The process's one progress reporter (on stderr)."""
    global _REPORTER
    if _REPORTER is None:
        _REPORTER = StderrProgress(sys.stderr)
    return _REPORTER


def _int8_embedding(args: argparse.Namespace) -> bool:
    """``not --f32-embedding``, which only ``--weights int8`` takes."""
    if args.f32_embedding and args.weights != "int8":
        raise UserError(f"--f32-embedding needs --weights int8, got --weights "
                        f"{args.weights or '(the snapshot default)'}")
    return not args.f32_embedding


def _load_model(args: argparse.Namespace, *, last_only: bool = True) -> Model:
    """Load ``--model`` (or the synthetic default, saying so) on ``--backend``."""
    from nanocompile.api import load

    int8_embedding = _int8_embedding(args)
    if args.model is None:
        print(SYNTHETIC_NOTICE, file=sys.stderr, flush=True)
    return load(args.model, backend=getattr(args, "backend", "c"), last_only=last_only,
                context=getattr(args, "context", None), progress=_progress(),
                weights=args.weights, int8_embedding=int8_embedding)


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


def _sampler(args: argparse.Namespace, model_dir: Path | None = None) -> Sampler:
    """The sampler the flags describe (``model_dir``: where generation_config.json is).

    Defaults: temperature 1, no top-k, no top-p; ``--model-defaults`` starts
    from the snapshot's generation_config.json instead; explicit flags win.
    Without ``--seed`` a random seed is drawn (and reported at the end).
    """
    from dataclasses import replace

    from nanocompile.inference.sampling import Sampler, SamplingParams, from_generation_config

    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    if args.model_defaults:
        if model_dir is None:
            raise UserError("--model-defaults needs the model directory")
        params = from_generation_config(model_dir, seed=seed,
                                        with_repetition_penalty=True)
        params = replace(params, **_sampling_from_flags(args))
    else:
        params = SamplingParams(seed=seed, **_sampling_from_flags(args))
    return Sampler(params)


_OPEN_LINE = False  # stdout holds a line of generated text without its newline


def _write(piece: str) -> None:
    global _OPEN_LINE
    sys.stdout.write(piece)
    sys.stdout.flush()
    _OPEN_LINE = not piece.endswith("\n")


def _closing_line(result: GenerationResult, sampler: Sampler) -> str:
    n = len(result.token_ids)
    speed = (f"{result.decode_tok_per_s:.1f} tok/s" if result.decode_steps
             else "n/a (no decode step)")
    how = ("greedy" if sampler.params.greedy else
           f"T={sampler.params.temperature:g} top-k={sampler.params.top_k} "
           f"top-p={sampler.params.top_p:g} seed={sampler.params.seed}")
    return (f"{PROG}: {n} tokens generated (stop: {result.stop_reason.replace('_', ' ')}) | "
            f"prefill {result.prompt_tokens} tokens in {result.prefill_seconds:.3f} s | "
            f"decode {speed} | {how}")


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
    cfg = _load_config(args.model)
    if args.layers is not None and not 0 < args.layers <= cfg.num_hidden_layers:
        raise UserError(f"--layers must be in [1, {cfg.num_hidden_layers}], got {args.layers}")
    text = report_step(_progress(), f"building the program up to stage '{args.stage}'",
                       lambda: ir_text(cfg, args.stage, n_layers=args.layers,
                                       last_only=args.last_only, explain=args.explain,
                                       weights=args.weights, int8_embedding=int8_embedding))
    print(text)
    return 0


def _load_with_sampler(args: argparse.Namespace) -> tuple[Model, Sampler]:
    """The model and the sampler; bad sampling flags fail before the slow load."""
    sampler = None if args.model_defaults else _sampler(args)
    model = _load_model(args)
    return model, sampler or _sampler(args, model.path)


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
    prompt = _valid_text(args.prompt, "PROMPT")
    model, sampler = _load_with_sampler(args)
    result = model.generate(prompt, max_tokens=args.max_tokens, sampling=sampler,
                            stop_at_eos=not args.ignore_eos, on_token=_write)
    _write("\n")
    print(_closing_line(result, sampler), file=sys.stderr)
    return 0


def _cmd_chat(args: argparse.Namespace) -> int:
    system = None if args.system is None else _valid_text(args.system, "--system")
    if isinstance(sys.stdin, io.TextIOWrapper):  # bytes that are not UTF-8: whatever the locale
        sys.stdin.reconfigure(errors="surrogateescape")
    model, sampler = _load_with_sampler(args)
    messages: list[dict[str, str]] = []
    if system is not None:
        messages.append({"role": "system", "content": system})
    interactive = sys.stdin.isatty()
    line_number = 0
    while True:
        if interactive:
            print("> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        line_number += 1
        if not line:
            break
        if not line.strip():
            continue
        text = _valid_text(line.rstrip("\r\n"), f"line {line_number} of stdin")
        messages.append({"role": "user", "content": text})
        result = model.chat(messages, max_tokens=args.max_tokens, sampling=sampler,
                            on_token=_write)
        _write("\n")
        print(_closing_line(result, sampler), file=sys.stderr, flush=True)
        messages.append({"role": "assistant", "content": result.text})
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    model = _load_model(args, last_only=not args.all_positions)
    r = model.compile_report()
    stages = r["compile_stages"]
    print(f"model                   {r['model']}"
          f"{' (synthetic)' if r['synthetic'] else ''}")
    print(f"graph                   {r['layers']} layers, "
          f"{'last-position' if r['last_only'] else 'all-position'} logits")
    widened = (f"{r['widened_weights']} widened to f32, "
               f"{r['widened_weight_bytes'] / 2**20:.1f} MiB")
    print(f"weights                 {r['weights']} ({widened})")
    if r["weights"] == "int8":
        embedding = "int8" if r["int8_embedding"] else f"{r['graph_weights']} (--f32-embedding)"
        cached = (f"quantized at this load in {r['int8_quantize_seconds']:.1f} s"
                  if r["int8_quantized"] else "mapped from the int8 cache")
        print(f"  int8                  kernel A (W8A32): {r['int8_matrices']} matrices, "
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
    return 0


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
    result = perplexity(ids, model.logits, chunk=args.chunk)
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
    p.add_argument("--weights", choices=["bf16", "f32", "int8"], default=None,
                   help="weight format: bf16 (the kernels read the snapshot's bf16 tensors "
                   "in place; the default for a bf16 snapshot) or f32 (every tensor widened "
                   "at load), the same bits either way; int8 (spec 5's kernel A, W8A32: the "
                   "projections and the embedding/LM head as int8 with f32 row scales, "
                   "quantized at the first load and cached)")
    _add_int8_options(p)


def _add_int8_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--f32-embedding", action="store_true",
                   help="with --weights int8: keep the embedding and the LM head as the "
                   "snapshot stores them (default: int8 too, as nanoinfer)")


def _add_generation_options(p: argparse.ArgumentParser) -> None:
    _add_model_options(p)
    p.add_argument("--max-tokens", type=_positive_int, default=64, metavar="N",
                   help="most tokens to generate (default 64)")
    p.add_argument("--temperature", type=float, metavar="T",
                   help="softmax temperature; 0 is greedy (default 1.0)")
    p.add_argument("--top-k", type=_non_negative_int, metavar="K",
                   help="keep the K most likely tokens; 0 disables (default 0)")
    p.add_argument("--top-p", type=float, metavar="P",
                   help="nucleus sampling mass in (0, 1]; 1 disables (default 1.0)")
    p.add_argument("--repetition-penalty", type=float, metavar="R",
                   help="penalize tokens already seen; 1 disables (default 1.0)")
    p.add_argument("--seed", type=_non_negative_int, metavar="S",
                   help="random seed: the same seed gives the same text (default: random)")
    p.add_argument("--greedy", action="store_true", help="always take the most likely token")
    p.add_argument("--model-defaults", action="store_true",
                   help="start from the snapshot's generation_config.json (temperature, "
                   "top-k, top-p, repetition penalty); explicit flags override it")
    p.add_argument("--context", type=_positive_int, metavar="N",
                   help="most tokens (prompt + generated) to hold "
                   "(default: the model's max_position_embeddings)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="A small tensor compiler for Qwen2 on xDSL.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    gen = sub.add_parser("generate", help="continue a prompt, streaming the tokens",
                         description="Continue PROMPT, printing tokens as they are produced, "
                         "then a line on stderr with prefill time and decode speed. "
                         "Stops at <|endoftext|>.")
    gen.add_argument("prompt", metavar="PROMPT",
                     help="the text to continue (bytes that are not UTF-8 become U+FFFD, "
                     "with a note on stderr)")
    _add_generation_options(gen)
    gen.add_argument("--ignore-eos", action="store_true",
                     help="do not stop at <|endoftext|>")
    gen.set_defaults(func=_cmd_generate)

    chat = sub.add_parser("chat", help="a ChatML conversation, one user turn per stdin line",
                          description="Read user turns from stdin, one per line, and answer "
                          "each (the whole conversation is the context). Replies stop at "
                          "<|im_end|>. Bytes that are not UTF-8 (on stdin or in --system) "
                          "become U+FFFD, with a note on stderr.")
    chat.add_argument("--system", metavar="TEXT",
                      help="the system message (default: the chat template's)")
    _add_generation_options(chat)
    chat.set_defaults(func=_cmd_chat)

    comp = sub.add_parser("compile", help="compile a snapshot and report the work per step",
                          description="Compile the model with gcc (cached) and report the "
                          "weight format, kernel launches and bytes moved per decode step, "
                          "compile time and the kernel cache location.")
    _add_model_options(comp, backend=False)
    comp.add_argument("--all-positions", action="store_true",
                      help="compile the graph with logits for every position")
    comp.set_defaults(func=_cmd_compile)

    ppl = sub.add_parser("perplexity", help="perplexity of a UTF-8 text file (spec 1.5)",
                         description="Tokenize FILE, split it into independent chunks, and "
                         "print exp(mean NLL) over the scored tokens.")
    ppl.add_argument("file", metavar="FILE", help="a UTF-8 text file")
    _add_model_options(ppl)
    ppl.add_argument("--chunk", type=_positive_int, default=128, metavar="N",
                     help="tokens per independent chunk (default 128)")
    ppl.add_argument("--max-tokens", type=_positive_int, metavar="N",
                     help="score only the first N tokens of the file")
    ppl.set_defaults(func=_cmd_perplexity)

    dump = sub.add_parser("dump", help="print the IR of the Qwen2 program after a stage",
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
    dump.add_argument("--weights", choices=["f32", "bf16", "int8"], default="f32",
                      help="weight format of the program (default f32; bf16: every weight "
                      "bf16, widened where the kernels read it; int8: the bf16 program "
                      "after quantize-int8, seen from --stage fused on)")
    _add_int8_options(dump)
    dump.add_argument("--explain", action="store_true",
                      help="with --stage scheduled: first, as // comments, each kernel's "
                      "refused candidate schedules with the reason, and the one chosen")
    dump.set_defaults(func=_cmd_dump)

    synth = sub.add_parser("synth", help="write a deterministic synthetic Qwen2 snapshot",
                           description="Write a deterministic synthetic Qwen2.5-0.5B-shaped "
                           "snapshot (bf16 safetensors, config, tokenizer) to DIR.")
    synth.add_argument("dir", metavar="DIR", help="output directory")
    synth.add_argument("--tiny", action="store_true", help="the tiny 2-layer test config")
    synth.add_argument("--seed", type=_non_negative_int, default=0,
                       help="random seed (default 0)")
    synth.set_defaults(func=_cmd_synth)
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

"""``python -m bench quality``: how far int8 logits are from f32 logits, position by position.

Issue 18, "Must show" item 3 (reported, not a gate: the synthetic model's
weights are random, so this measures the quantization's numerical effect, not
a trained model's quality). One uncached forward pass over a fixed text
(:data:`TEXT`, a few hundred tokens of prose and code) on each variant:

* the reference: the snapshot's weights computed in f32 (``weights=None``:
  bf16 for a bf16 snapshot, the same bits as ``weights="f32"``);
* ``int8``: spec §5's kernel A with the int8 embedding and LM head
  (``load(..., weights="int8")``, nanoinfer's default);
* ``int8-f32-embedding``: kernel A with the embedding and LM head kept f32
  (``int8_embedding=False``);
* ``int8-dot``: spec §5's kernel B (W8A8, integer dot products) for the
  projections, the int8 LM head kernel A (f32 activations: spec §5's default);
* ``int8-dot-head``: kernel B for the int8 LM head too (``int8_dot_head=True``,
  spec §5's switch: its activations quantized per block of 32);
* ``int8-dot-f32-embedding``: kernel B, the embedding and LM head kept f32.

Per position: the KL divergence ``KL(P_f32 || P_int8) = sum p_f32 (log p_f32 -
log p_int8)`` of the two next-token distributions, each a log-softmax in
float64 (``x - max - log sum exp(x - max)``, as spec §1.5's perplexity), and
whether the top-1 tokens agree. Reported: the mean, median, 95th percentile
and maximum KL over the positions, and the fraction of positions whose top-1
agrees. Appends one ``"quality"`` record to ``bench/results.jsonl``
(``--results``; ``--no-record`` prints only), its ``measurements`` one entry per
variant and metric (``kl_divergence`` with the median and the rest,
``top1_agreement`` with the fraction as its ``median``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench import BenchError, command, results

DEFAULT_TOKENS = 300

# A fixed text of prose, numbers and a little code: 430 tokens with the Qwen2
# tokenizer (the first --tokens of them are used; more than that is an error).
TEXT = (
    "Quantization trades a little accuracy for a lot of memory traffic. A weight "
    "matrix of 896 by 4,864 floats takes 17.4 MB in f32 and 4.4 MB as int8 with one "
    "scale per row, so a decode step that reads every weight once moves a quarter of "
    "the bytes. Whether the model still says the same thing is the question this text "
    "asks, one position at a time.\n\n"
    "The recipe is short. For each output row, find the largest magnitude, divide it "
    "by 127 and call that the scale; divide the row by its scale, round half away from "
    "zero, and clip to the range from -127 to 127. A row of zeros keeps the scale 1.0. "
    "At run time the kernel multiplies the int8 values, widened to f32, by the "
    "activations in four chains of eight lanes, adds the chains in a fixed tree and "
    "scales the sum once.\n\n"
    "```python\n"
    "def quantize_row(row: list[float]) -> tuple[list[int], float]:\n"
    "    peak = max((abs(v) for v in row), default=0.0)\n"
    "    scale = peak / 127 if peak else 1.0\n"
    "    q = [max(-127, min(127, int(abs(v / scale) + 0.5) * (1 if v >= 0 else -1)))\n"
    "         for v in row]\n"
    "    return q, scale\n"
    "```\n\n"
    "Two questions remain: how much the next-token distribution moves, measured as a "
    "KL divergence in nats, and how often the most likely token changes. On a trained "
    "model the answer is small (a perplexity 0.13 % higher, say); on random weights it "
    "says only how the rounding propagates through 24 layers. Either way, numbers beat "
    "opinions: 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144 and so on."
)


# --------------------------------------------------------------------------
# the arithmetic


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax in float64: ``x - max - log(sum(exp(x - max)))``."""
    x = np.asarray(logits, dtype=np.float64)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def kl_divergence(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per row, ``KL(P || Q)`` in nats of ``P = softmax(reference)`` and ``Q =
    softmax(other)`` (float64). Rows are positions, columns the vocabulary."""
    ref, oth = np.asarray(reference), np.asarray(other)
    if ref.shape != oth.shape or ref.ndim != 2:
        raise ValueError(f"expected two [positions, vocab] arrays of one shape, got "
                         f"{ref.shape} and {oth.shape}")
    log_p, log_q = log_softmax(ref), log_softmax(oth)
    return np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)


def top1_agreement(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per row, whether the two argmaxes are the same token."""
    return np.argmax(reference, axis=-1) == np.argmax(other, axis=-1)


def summarize(kl: np.ndarray, agree: np.ndarray) -> dict[str, Any]:
    """The reported figures of one variant (``kl`` and ``agree`` per position)."""
    if kl.size == 0 or kl.shape != agree.shape:
        raise ValueError(f"expected per-position values of one shape, got {kl.shape} and "
                         f"{agree.shape}")
    return {
        "positions": int(kl.size),
        "kl_mean": float(kl.mean()),
        "kl_median": float(np.median(kl)),
        "kl_p95": float(np.percentile(kl, 95)),
        "kl_max": float(kl.max()),
        "kl_argmax_position": int(np.argmax(kl)),
        "top1_agreement": float(agree.mean()),
        "top1_agreeing": int(agree.sum()),
        "first_top1_disagreement": (int(np.argmin(agree)) if not agree.all() else None),
    }


# --------------------------------------------------------------------------
# the variants


@dataclass(frozen=True)
class Variant:
    """One int8 configuration compared with the f32 reference."""

    name: str
    description: str
    load_options: dict[str, Any]


VARIANTS = (
    Variant("int8", "kernel A (W8A32), int8 embedding and LM head (nanoinfer's default)",
            {"weights": "int8"}),
    Variant("int8-f32-embedding", "kernel A (W8A32), embedding and LM head f32",
            {"weights": "int8", "int8_embedding": False}),
    Variant("int8-dot", "kernel B (W8A8), int8 embedding, LM head kernel A (spec 5's default)",
            {"weights": "int8-dot"}),
    Variant("int8-dot-head", "kernel B (W8A8), int8 embedding, LM head kernel B too",
            {"weights": "int8-dot", "int8_dot_head": True}),
    Variant("int8-dot-f32-embedding", "kernel B (W8A8), embedding and LM head f32",
            {"weights": "int8-dot", "int8_embedding": False}),
)


def text_ids(directory: Path, tokens: int) -> list[int]:
    """The first ``tokens`` token ids of :data:`TEXT` with the snapshot's tokenizer."""
    from nanocompile.tokenizer.tokenizer import Tokenizer

    ids = Tokenizer.from_dir(directory).encode(TEXT)
    if tokens > len(ids):
        raise BenchError(f"--tokens {tokens}: the text has only {len(ids)} tokens")
    return ids[:tokens]


Logits = Callable[[dict[str, Any]], np.ndarray]


def compare(logits_of: Logits) -> dict[str, Any]:
    """The reference's logits, then each variant's, compared position by position;
    ``logits_of(load_options)`` runs one model (released before the next loads)."""
    start = time.perf_counter()
    reference = logits_of({})
    out: dict[str, Any] = {"reference_seconds": time.perf_counter() - start, "variants": {}}
    for v in VARIANTS:
        start = time.perf_counter()
        logits = logits_of(v.load_options)
        if logits.shape != reference.shape:
            raise BenchError(f"{v.name}: logits of shape {logits.shape}, the reference's "
                             f"{reference.shape}")
        figures = summarize(kl_divergence(reference, logits), top1_agreement(reference, logits))
        out["variants"][v.name] = {"description": v.description, "options": v.load_options,
                                   "seconds": time.perf_counter() - start, **figures}
    return out


def model_logits(directory: Path, ids: list[int], backend: str) -> Logits:
    """``logits_of`` for :func:`compare`: load ``directory`` with the options, run
    ``ids`` (every position's logits), release the model."""
    from nanocompile.api import load

    def logits_of(options: dict[str, Any]) -> np.ndarray:
        model = load(directory, backend=backend, last_only=False, **options)
        try:
            return model.logits(ids)
        finally:
            model.snapshot.close()

    return logits_of


def measurements(compared: dict[str, Any], threads: int | None) -> list[dict[str, Any]]:
    """The record's measurement entries: per variant, KL and top-1 agreement."""
    out = []
    for name, v in compared["variants"].items():
        out.append({"engine": f"c-{name}", "metric": "kl_divergence", "unit": "nats",
                    "threads": threads, "median": v["kl_median"], "mean": v["kl_mean"],
                    "p95": v["kl_p95"], "max": v["kl_max"], "n": v["positions"]})
        out.append({"engine": f"c-{name}", "metric": "top1_agreement", "unit": "fraction",
                    "threads": threads, "median": v["top1_agreement"], "n": v["positions"]})
    return out


def format_report(payload: dict[str, Any]) -> str:
    """One line per variant."""
    lines = [f"int8 against f32 logits: {payload['model']['label']} "
             f"({payload['model']['path']}), {payload['text']['tokens']} positions of "
             f"bench.quality.TEXT, backend {payload['backend']}; KL(P_f32 || P_int8) in nats",
             f"{'variant':24} {'KL mean':>10} {'median':>10} {'p95':>10} {'max':>10} "
             f"{'top-1 agree':>12}"]
    for name, v in payload["variants"].items():
        lines.append(f"{name:24} {v['kl_mean']:10.3g} {v['kl_median']:10.3g} "
                     f"{v['kl_p95']:10.3g} {v['kl_max']:10.3g} "
                     f"{100 * v['top1_agreement']:11.1f}%  ({v['description']})")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# the command


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=int, default=DEFAULT_TOKENS,
                        help="positions compared: the first N tokens of the text "
                        "(default %(default)s)")
    parser.add_argument("--model", type=Path, default=None,
                        help="snapshot directory (default: the full-size synthetic model)")
    parser.add_argument("--backend", choices=["c", "interpreter"], default="c",
                        help="nanocompile backend (default c)")
    parser.add_argument("--smoke", action="store_true",
                        help="the tiny synthetic model, 32 tokens (seconds)")
    parser.add_argument("--results", type=Path, default=results.RESULTS_PATH,
                        help="results file to append to (default: %(default)s)")
    parser.add_argument("--no-record", action="store_true", help="print only, append nothing")


@command("quality", help="per-position KL divergence and top-1 agreement of int8 vs f32 "
         "logits; append a quality record", arguments=_arguments)
def quality_command(args: argparse.Namespace) -> int:
    """Measure, print and (unless ``--no-record``) append one ``"quality"`` record."""
    if args.smoke and args.model is not None:
        raise BenchError("--smoke uses the tiny synthetic model; drop --model")
    tokens = 32 if args.smoke and args.tokens == DEFAULT_TOKENS else args.tokens
    if not 2 <= tokens <= 4096:
        raise BenchError(f"--tokens must be in 2..4096, got {tokens}")
    if args.model is not None and not args.model.is_dir():
        raise BenchError(f"--model {args.model}: not a directory")
    with tempfile.TemporaryDirectory(prefix="nanocompile-quality-") as scratch:
        directory, label = _model(args, Path(scratch))
        from bench.engines import model_facts
        from nanocompile.checkpoint.snapshot import Snapshot

        with Snapshot.open(directory) as snapshot:
            model = model_facts(snapshot, label)
        ids = text_ids(directory, tokens)
        compared = compare(model_logits(directory, ids, args.backend))
    threads = os.environ.get("NANOCOMPILE_THREADS")
    payload = {"model": model, "backend": args.backend,
               "reference": "the snapshot's weights computed in f32 (load(weights=None))",
               "text": {"source": "bench.quality.TEXT", "tokens": len(ids),
                        "sha256": hashlib.sha256(TEXT.encode()).hexdigest()[:16]},
               "threads_env": threads, **compared,
               "measurements": measurements(compared, int(threads) if threads and
                                            threads.isdigit() else None)}
    print(format_report(payload))
    if args.no_record:
        print("not recorded (--no-record)")
        return 0
    results.append_record(results.make_record("quality", payload), args.results)
    print(f"appended a quality record to {args.results}")
    return 0


def _model(args: argparse.Namespace, scratch: Path) -> tuple[Path, str]:
    if args.smoke:
        from nanocompile.checkpoint.synth import write_synthetic_snapshot

        return write_synthetic_snapshot(scratch / "tiny", tiny=True, seed=0,
                                        tokenizer=True), "synthetic tiny seed 0"
    if args.model is not None:
        return args.model, f"snapshot {args.model.name}"
    from bench.engines import full_synthetic_snapshot

    return full_synthetic_snapshot(), "synthetic full-size seed 0"

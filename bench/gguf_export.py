"""Write a llama.cpp GGUF from a nanocompile snapshot: ``python -m bench.gguf_export``.

    python -m bench.gguf_export SNAPSHOT_DIR OUT.gguf [--bf16 | --q8_0] [--threads N]

The GGUF is written here with the PyPI ``gguf`` package (``gguf.GGUFWriter``),
not with llama.cpp's conversion scripts:

* architecture ``qwen2`` with the hyperparameters llama.cpp reads (context,
  embedding and feed-forward length, block count, head counts, RoPE base,
  RMS-norm epsilon) and ``general.file_type``;
* the tokenizer as llama.cpp's ``gpt2`` (byte-level BPE) model with the
  ``qwen2`` pre-tokenizer: one token per embedding row, spelled as in
  ``tokenizer.json`` (byte-level alphabet), added tokens by their content,
  rows without a token (151,665..151,935 in Qwen2.5) as ``[PAD<id>]`` of type
  *unused*. Token types: *control* for added tokens marked special or spelled
  ``<|...|>``, *user-defined* for the other added tokens (``<tool_call>``),
  *normal* for the rest; the BPE merges in ``tokenizer.json`` order; bos / eos
  from ``config.json``, padding from ``generation_config.json``; no BOS added
  (``add_bos_token`` false, as Qwen2.5's tokenizer config); the chat template
  from ``tokenizer_config.json`` when there is one. No sampler defaults are
  written (the bench takes the argmax of the logits itself).
* every tensor renamed to llama.cpp's qwen2 names (:func:`gguf_name`) and
  widened exactly to F32 (bf16 bits in the high half of a u32, spec §1.1).
  Tied embeddings: there is no ``output.weight``; llama.cpp reuses
  ``token_embd.weight`` as the LM head.

``--bf16`` writes the BF16 GGUF instead (``general.file_type``
``MOSTLY_BF16``): every matrix the snapshot stores in bf16 keeps its 16 bits
(``GGMLQuantizationType.BF16``, copied, not converted); the 1-D tensors (norms,
biases) and any tensor stored otherwise (f32, f16) are widened exactly to
F32, as llama.cpp's own converter keeps 1-D tensors F32. The values are the
snapshot's either way.

``--q8_0`` then quantizes that F32 file with llama.cpp's own quantizer through
``llama-cpp-python`` (``llama_model_quantize`` with ftype ``MOSTLY_Q8_0``).

Files are written to ``OUT.<pid>.partial`` and renamed into place, so ``OUT``
either is complete or does not exist.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.pagecache import release_written
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.tokenizer.build import QWEN2_PATTERN  # llama.cpp's 'qwen2' split

ARCH = "qwen2"
TOKENIZER_MODEL = "gpt2"  # llama.cpp's name for byte-level BPE
TOKENIZER_PRE = "qwen2"
FTYPE_ALL_F32 = 0  # llama_ftype LLAMA_FTYPE_ALL_F32
FTYPE_MOSTLY_Q8_0 = 7  # llama_ftype LLAMA_FTYPE_MOSTLY_Q8_0
FTYPE_MOSTLY_BF16 = 32  # llama_ftype LLAMA_FTYPE_MOSTLY_BF16
GGUF_WEIGHTS = ("f32", "bf16")  # what write_gguf writes
QUANT_VERSION = 2  # general.quantization_version (GGML_QNT_VERSION)

# token types (llama_token_type / gguf.TokenType)
NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5

_GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",  # only for untied embeddings
}
_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)")


class GGUFExportError(ValueError):
    """The snapshot cannot be exported (or quantized): one line for the user."""


def gguf_name(hf_name: str) -> str:
    """llama.cpp's qwen2 tensor name for a Hugging Face Qwen2 tensor name."""
    if hf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[hf_name]
    match = _LAYER.fullmatch(hf_name)
    if match is not None and match.group(2) in _LAYER_NAMES:
        return f"blk.{int(match.group(1))}.{_LAYER_NAMES[match.group(2)]}"
    raise GGUFExportError(f"tensor {hf_name!r} has no llama.cpp qwen2 name")


# --------------------------------------------------------------------------
# the vocabulary


@dataclass(frozen=True)
class Vocabulary:
    """What the GGUF's tokenizer keys hold, derived from ``tokenizer.json``."""

    tokens: list[str]  # one per embedding row
    types: list[int]  # NORMAL / CONTROL / USER_DEFINED / UNUSED per row
    merges: list[str]  # "left right" in the byte-level alphabet, in rank order


def _looks_special(content: str) -> bool:
    return content.startswith("<|") and content.endswith("|>")


def _merge_text(merge: object, where: str) -> str:
    # tokenizers writes merges as "left right" (older) or ["left", "right"] (newer)
    if isinstance(merge, str) and merge.count(" ") == 1:
        return merge
    if (isinstance(merge, list) and len(merge) == 2 and all(isinstance(p, str) for p in merge)
            and " " not in merge[0] + merge[1]):
        return f"{merge[0]} {merge[1]}"
    raise GGUFExportError(f"{where}: malformed BPE merge {merge!r}")


def _check_bpe(data: dict[str, Any], where: str) -> dict[str, Any]:
    model = data.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE":
        raise GGUFExportError(f"{where}: not a BPE tokenizer")
    if not isinstance(model.get("vocab"), dict) or not isinstance(model.get("merges"), list):
        raise GGUFExportError(f"{where}: BPE model without vocab and merges")
    pre = json.dumps(data.get("pre_tokenizer"))
    if json.dumps(QWEN2_PATTERN) not in pre or "ByteLevel" not in pre:
        raise GGUFExportError(
            f"{where}: the pre-tokenizer is not Qwen2's byte-level split; "
            "llama.cpp's 'qwen2' pre-tokenizer would tokenize differently")
    return model


def vocabulary(data: dict[str, Any], vocab_size: int, where: str = "tokenizer.json") -> Vocabulary:
    """Tokens, token types and merges for a ``vocab_size``-row embedding."""
    model = _check_bpe(data, where)
    tokens: list[str | None] = [None] * vocab_size
    types = [NORMAL] * vocab_size

    def place(token_id: object, text: str, kind: int) -> None:
        if not isinstance(token_id, int) or not 0 <= token_id < vocab_size:
            raise GGUFExportError(
                f"{where}: token {text!r} has id {token_id!r}, outside the "
                f"{vocab_size} embedding rows")
        if tokens[token_id] is not None and tokens[token_id] != text:
            raise GGUFExportError(
                f"{where}: id {token_id} is both {tokens[token_id]!r} and {text!r}")
        tokens[token_id] = text
        types[token_id] = kind

    for text, token_id in model["vocab"].items():
        place(token_id, text, NORMAL)
    for added in data.get("added_tokens") or []:
        content = added.get("content")
        if not isinstance(content, str):
            raise GGUFExportError(f"{where}: added token without content: {added!r}")
        special = bool(added.get("special")) or _looks_special(content)
        place(added.get("id"), content, CONTROL if special else USER_DEFINED)
    for token_id, text in enumerate(tokens):
        if text is None:
            tokens[token_id] = f"[PAD{token_id}]"
            types[token_id] = UNUSED
    merges = [_merge_text(m, where) for m in model["merges"]]
    return Vocabulary([t for t in tokens if t is not None], types, merges)


# --------------------------------------------------------------------------
# metadata


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise GGUFExportError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise GGUFExportError(f"{path}: expected a JSON object")
    return data


def _optional_json(path: Path) -> dict[str, Any]:
    return _read_json(path) if path.is_file() else {}


def pad_token_id(directory: Path, vocab: Vocabulary) -> int | None:
    """The padding id: ``generation_config.json``'s, else ``tokenizer_config.json``'s token."""
    generation = _optional_json(directory / "generation_config.json")
    pad = generation.get("pad_token_id")
    if isinstance(pad, int) and 0 <= pad < len(vocab.tokens):
        return pad
    token = _optional_json(directory / "tokenizer_config.json").get("pad_token")
    if isinstance(token, dict):
        token = token.get("content")
    if isinstance(token, str) and token in vocab.tokens:
        return vocab.tokens.index(token)
    return None


def add_metadata(writer: Any, config: Qwen2Config, vocab: Vocabulary, directory: Path,
                 name: str, file_type: int = FTYPE_ALL_F32) -> None:
    """Every key llama.cpp's qwen2 loader and tokenizer read."""
    writer.add_name(name)
    writer.add_file_type(file_type)
    writer.add_quantization_version(QUANT_VERSION)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_theta)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_tokenizer_model(TOKENIZER_MODEL)
    writer.add_tokenizer_pre(TOKENIZER_PRE)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    writer.add_token_merges(vocab.merges)
    writer.add_bos_token_id(config.bos_token_id)
    writer.add_eos_token_id(config.eos_token_id)
    pad = pad_token_id(directory, vocab)
    if pad is not None:
        writer.add_pad_token_id(pad)
    tokenizer_config = _optional_json(directory / "tokenizer_config.json")
    writer.add_add_bos_token(bool(tokenizer_config.get("add_bos_token", False)))
    template = tokenizer_config.get("chat_template")
    if isinstance(template, str):
        writer.add_chat_template(template)


# --------------------------------------------------------------------------
# writing


def tensor_plan(snapshot: Snapshot) -> dict[str, str]:
    """GGUF name -> snapshot name, in the order the tensors are written."""
    plan = {gguf_name(hf): hf for hf in snapshot.expected_tensors()}
    if snapshot.config.tie_word_embeddings and "output.weight" in plan:
        raise GGUFExportError("tied embeddings, yet the snapshot names an lm_head.weight")
    return plan


def _require_gguf() -> Any:
    try:
        import gguf
    except ImportError:
        raise GGUFExportError("the gguf package is not installed "
                              "(pip install -e '.[bench]')") from None
    return gguf


def _staged(out: Path, write: Callable[[Path], None]) -> Path:
    """Run ``write(OUT.partial)`` and rename the result to ``out``, which then leaves
    the page cache (``release_written``: llama.cpp maps it in the large folios of
    its next read, as nanocompile maps the snapshots it writes)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f"{out.name}.{os.getpid()}.partial")  # concurrent writers
    try:
        write(partial)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    release_written(out)
    return out


def keeps_bf16(snapshot: Snapshot, hf: str) -> bool:
    """Whether the BF16 GGUF stores ``hf`` as BF16: a matrix the snapshot stores in
    bf16. 1-D tensors (norms, biases) and tensors stored otherwise are widened to F32."""
    return snapshot.dtype(hf) == "BF16" and len(snapshot.shape(hf)) >= 2


def _tensor_data(snapshot: Snapshot, hf: str, bf16: bool) -> np.ndarray:
    """The bytes written for ``hf``: its bf16 bits (``bf16``) or its exact f32 widening."""
    if bf16:
        return np.ascontiguousarray(snapshot.raw(hf), dtype=np.uint16)
    return np.ascontiguousarray(snapshot.f32(hf), dtype=np.float32)


def write_gguf(snapshot_dir: str | os.PathLike[str], out: str | os.PathLike[str], *,
               weights: str = "f32", tokenizer: dict[str, Any] | None = None,
               name: str | None = None) -> Path:
    """Write the F32 (``weights="f32"``) or BF16 (``"bf16"``) GGUF of the snapshot in
    ``snapshot_dir`` to ``out``.

    ``tokenizer`` is the parsed ``tokenizer.json``; by default the snapshot's.
    Tensors are streamed one at a time (header first, then each tensor widened
    or copied and written), so memory holds one tensor, not the model.
    """
    if weights not in GGUF_WEIGHTS:
        raise GGUFExportError(f"weights must be one of {', '.join(GGUF_WEIGHTS)}, "
                              f"got {weights!r}")
    gguf = _require_gguf()
    directory = Path(snapshot_dir)
    with Snapshot.open(directory) as snapshot:
        config = snapshot.config
        if tokenizer is None:
            path = directory / "tokenizer.json"
            if not path.is_file():
                raise GGUFExportError(f"{directory}: no tokenizer.json in the snapshot directory")
            tokenizer = _read_json(path)
        vocab = vocabulary(tokenizer, config.vocab_size)
        plan = tensor_plan(snapshot)
        bf16 = {gname: weights == "bf16" and keeps_bf16(snapshot, hf)
                for gname, hf in plan.items()}
        if weights == "bf16" and not any(bf16.values()):
            raise GGUFExportError(f"{directory}: the snapshot stores no matrix in bf16, "
                                  "so a BF16 GGUF would be the F32 one")
        file_type = FTYPE_MOSTLY_BF16 if weights == "bf16" else FTYPE_ALL_F32

        def write(partial: Path) -> None:
            writer = gguf.GGUFWriter(partial, ARCH)
            try:
                add_metadata(writer, config, vocab, directory,
                             name or directory.resolve().name, file_type)
                for gname, hf in plan.items():
                    shape = snapshot.shape(hf)
                    if bf16[gname]:
                        writer.add_tensor_info(gname, shape, np.dtype(np.uint16),
                                               2 * int(np.prod(shape)),
                                               raw_dtype=gguf.GGMLQuantizationType.BF16)
                    else:
                        writer.add_tensor_info(gname, shape, np.dtype(np.float32),
                                               4 * int(np.prod(shape)))
                writer.write_header_to_file()
                writer.write_kv_data_to_file()
                writer.write_ti_data_to_file()
                for gname, hf in plan.items():
                    writer.write_tensor_data(_tensor_data(snapshot, hf, bf16[gname]))
            finally:
                writer.close()

        return _staged(Path(out), write)


def write_f32_gguf(snapshot_dir: str | os.PathLike[str], out: str | os.PathLike[str], *,
                   tokenizer: dict[str, Any] | None = None, name: str | None = None) -> Path:
    """Write the F32 GGUF of the snapshot in ``snapshot_dir`` to ``out`` (:func:`write_gguf`)."""
    return write_gguf(snapshot_dir, out, weights="f32", tokenizer=tokenizer, name=name)


def write_bf16_gguf(snapshot_dir: str | os.PathLike[str], out: str | os.PathLike[str], *,
                    tokenizer: dict[str, Any] | None = None, name: str | None = None) -> Path:
    """Write the BF16 GGUF of the snapshot in ``snapshot_dir`` to ``out``: its bf16
    matrices as they are, the rest widened to F32 (:func:`write_gguf`)."""
    return write_gguf(snapshot_dir, out, weights="bf16", tokenizer=tokenizer, name=name)


# --------------------------------------------------------------------------
# Q8_0 through llama.cpp's quantizer


def _require_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise GGUFExportError("llama-cpp-python is not installed "
                              "(pip install -e '.[bench]')") from None
    return llama_cpp


def quantize_q8_0(f32_gguf: str | os.PathLike[str], out: str | os.PathLike[str], *,
                  threads: int = 0) -> Path:
    """Quantize an F32 GGUF to Q8_0 with llama.cpp's ``llama_model_quantize``.

    ``threads`` = 0 lets llama.cpp choose (its hardware concurrency).
    """
    llama_cpp = _require_llama_cpp()
    source = Path(f32_gguf)
    if not source.is_file():
        raise GGUFExportError(f"{source}: no such GGUF file")

    def write(partial: Path) -> None:
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = FTYPE_MOSTLY_Q8_0
        params.nthread = threads
        status = llama_cpp.llama_model_quantize(
            os.fsencode(source), os.fsencode(partial), ctypes.byref(params))
        if status != 0:
            raise GGUFExportError(f"llama.cpp failed to quantize {source} to Q8_0 "
                                  f"(status {status})")

    return _staged(Path(out), write)


def export(snapshot_dir: str | os.PathLike[str], out: str | os.PathLike[str], *,
           q8_0: bool = False, threads: int = 0, tokenizer: dict[str, Any] | None = None,
           name: str | None = None, bf16: bool = False) -> Path:
    """The F32 GGUF at ``out``; with ``bf16`` the BF16 one; with ``q8_0`` the F32 one's
    Q8_0 quantization (F32 as a temporary)."""
    out = Path(out)
    if bf16 and q8_0:
        raise GGUFExportError("choose one of bf16 and q8_0")
    if bf16:
        return write_bf16_gguf(snapshot_dir, out, tokenizer=tokenizer, name=name)
    if not q8_0:
        return write_f32_gguf(snapshot_dir, out, tokenizer=tokenizer, name=name)
    _require_llama_cpp()  # fail before writing 2 GB
    f32 = out.with_name(f"{out.name}.{os.getpid()}.f32.tmp")
    try:
        write_f32_gguf(snapshot_dir, f32, tokenizer=tokenizer, name=name)
        return quantize_q8_0(f32, out, threads=threads)
    finally:
        f32.unlink(missing_ok=True)


# --------------------------------------------------------------------------
# command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gguf_export",
        description="Write a llama.cpp GGUF (qwen2, F32, BF16 or Q8_0) from a nanocompile "
        "snapshot.")
    parser.add_argument("snapshot", metavar="SNAPSHOT_DIR", help="snapshot directory")
    parser.add_argument("out", metavar="OUT.gguf", help="the GGUF file to write")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--q8_0", action="store_true",
                      help="quantize to Q8_0 with llama.cpp's quantizer (needs llama-cpp-python)")
    kind.add_argument("--bf16", action="store_true",
                      help="keep the snapshot's bf16 matrices as BF16 (norms and biases F32)")
    parser.add_argument("--threads", type=int, default=0,
                        help="quantizer threads (default: llama.cpp's choice)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; user errors are one line on stderr and exit status 1."""
    args = _parser().parse_args(argv)
    if args.threads < 0:
        print("gguf_export: error: --threads must be >= 0", file=sys.stderr)
        return 1
    try:
        path = export(args.snapshot, args.out, q8_0=args.q8_0, threads=args.threads,
                      bf16=args.bf16)
    except (ValueError, OSError) as exc:  # GGUFExportError, SnapshotError, ConfigError, ...
        print(f"gguf_export: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("gguf_export: interrupted", file=sys.stderr)
        return 130
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB, "
          f"{'Q8_0' if args.q8_0 else 'BF16' if args.bf16 else 'F32'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

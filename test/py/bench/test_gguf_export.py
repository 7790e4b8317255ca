"""bench/gguf_export.py: the GGUF read back with ``gguf.GGUFReader`` equals the snapshot.

Checked on the tiny snapshot (real vocabulary, 2 layers) against expectations
built here independently of the exporter: the tensor names are spelled out
literally (llama.cpp's qwen2 names), the values are compared bit for bit with
the bf16 bits shifted into the high half of a u32 (not through
``Snapshot.f32``), the hyperparameters come from ``config.json`` read as JSON,
the vocabulary and merges from ``tokenizer.json`` read as JSON. Needs only the
``gguf`` package (skips without it); the Q8_0 path is in test_llama_engine.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

REPO = Path(__file__).resolve().parents[3]

from _gguf_reader import Reader  # noqa: E402

from bench import gguf_export  # noqa: E402
from nanocompile.checkpoint.safetensors import SafetensorsFile  # noqa: E402

LAYER_NAMES = {  # HF suffix -> llama.cpp qwen2 suffix, spelled out
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


def expected_names(layers: int) -> dict[str, str]:
    """GGUF name -> HF name for a tied-embedding Qwen2 of ``layers`` layers."""
    names = {"token_embd.weight": "model.embed_tokens.weight",
             "output_norm.weight": "model.norm.weight"}
    for i in range(layers):
        for hf, ours in LAYER_NAMES.items():
            names[f"blk.{i}.{ours}"] = f"model.layers.{i}.{hf}"
    return names


@pytest.fixture(scope="module")
def exported(tiny_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny snapshot exported through the command line, read back."""
    out = tmp_path_factory.mktemp("gguf") / "tiny-f32.gguf"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert gguf_export.main([str(tiny_snapshot), str(out)]) == 0
    assert printed.getvalue().startswith(f"wrote {out} (")
    assert "F32" in printed.getvalue()
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no .partial left
    return Reader(out)


def field(reader: Any, key: str) -> Any:
    assert key in reader.fields, f"missing key {key}"
    return reader.fields[key].contents()


def config_json(snapshot: Path) -> dict[str, Any]:
    return json.loads((snapshot / "config.json").read_text())


def tokenizer_json(snapshot: Path) -> dict[str, Any]:
    return json.loads((snapshot / "tokenizer.json").read_text(encoding="utf-8"))


# ---- tensors ----------------------------------------------------------------------


def test_tensor_names_are_llama_cpp_qwen2_names(exported: Any, tiny_snapshot: Path) -> None:
    layers = config_json(tiny_snapshot)["num_hidden_layers"]
    names = [t.name for t in exported.tensors]
    assert sorted(names) == sorted(expected_names(layers))
    assert len(names) == 2 + 12 * layers
    assert "output.weight" not in names  # tied: llama.cpp reuses token_embd


def test_every_tensor_reads_back_bit_for_bit(exported: Any, tiny_snapshot: Path) -> None:
    layers = config_json(tiny_snapshot)["num_hidden_layers"]
    names = expected_names(layers)
    with SafetensorsFile.open(tiny_snapshot / "model.safetensors") as st:
        for tensor in exported.tensors:
            hf = names[tensor.name]
            assert st.dtype(hf) == "BF16"
            assert tensor.tensor_type == gguf.GGMLQuantizationType.F32, tensor.name
            bits = st.raw(hf).astype(np.uint32) << 16  # exact widening, done here by hand
            want_shape = st.shape(hf)
            # GGUF lists dimensions innermost first; the reader hands back numpy order
            assert [int(d) for d in tensor.shape] == list(reversed(want_shape)), tensor.name
            got = np.asarray(tensor.data)
            assert got.dtype == np.float32, tensor.name
            assert got.shape == want_shape, tensor.name
            assert np.array_equal(got.view(np.uint32), bits), tensor.name


def test_tensor_data_is_aligned(exported: Any) -> None:
    for tensor in exported.tensors:
        assert tensor.data_offset % 32 == 0, tensor.name


# ---- metadata ---------------------------------------------------------------------


def test_hyperparameters_match_config_json(exported: Any, tiny_snapshot: Path) -> None:
    cfg = config_json(tiny_snapshot)
    assert field(exported, "general.architecture") == "qwen2"
    assert field(exported, "general.file_type") == 0  # LLAMA_FTYPE_ALL_F32
    assert field(exported, "qwen2.context_length") == cfg["max_position_embeddings"]
    assert field(exported, "qwen2.embedding_length") == cfg["hidden_size"]
    assert field(exported, "qwen2.block_count") == cfg["num_hidden_layers"]
    assert field(exported, "qwen2.feed_forward_length") == cfg["intermediate_size"]
    assert field(exported, "qwen2.attention.head_count") == cfg["num_attention_heads"]
    assert field(exported, "qwen2.attention.head_count_kv") == cfg["num_key_value_heads"]
    assert field(exported, "qwen2.rope.freq_base") == np.float32(cfg["rope_theta"])
    assert (field(exported, "qwen2.attention.layer_norm_rms_epsilon")
            == np.float32(cfg["rms_norm_eps"]))
    types = exported.fields["qwen2.rope.freq_base"].types
    assert types == [gguf.GGUFValueType.FLOAT32]


def test_special_ids_come_from_the_configs(exported: Any, tiny_snapshot: Path) -> None:
    cfg = config_json(tiny_snapshot)
    generation = json.loads((tiny_snapshot / "generation_config.json").read_text())
    assert field(exported, "tokenizer.ggml.bos_token_id") == cfg["bos_token_id"] == 151643
    assert field(exported, "tokenizer.ggml.eos_token_id") == cfg["eos_token_id"] == 151645
    assert field(exported, "tokenizer.ggml.padding_token_id") == generation["pad_token_id"]
    assert field(exported, "tokenizer.ggml.add_bos_token") is False
    template = json.loads((tiny_snapshot / "tokenizer_config.json").read_text())["chat_template"]
    assert field(exported, "tokenizer.chat_template") == template


def test_no_sampler_defaults_are_written(exported: Any) -> None:
    assert not [key for key in exported.fields if key.startswith("general.sampling")]


# ---- vocabulary -------------------------------------------------------------------


def test_vocabulary_matches_tokenizer_json(exported: Any, tiny_snapshot: Path) -> None:
    tok = tokenizer_json(tiny_snapshot)
    rows = config_json(tiny_snapshot)["vocab_size"]
    tokens = field(exported, "tokenizer.ggml.tokens")
    types = field(exported, "tokenizer.ggml.token_type")
    assert len(tokens) == len(types) == rows == 151_936
    for text, token_id in tok["model"]["vocab"].items():
        assert tokens[token_id] == text
        assert types[token_id] == gguf.TokenType.NORMAL
    added = {a["id"]: a for a in tok["added_tokens"]}
    for token_id, a in added.items():
        assert tokens[token_id] == a["content"]
    assert tokens[151643:151646] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert len(tok["model"]["vocab"]) + len(added) == 151_665
    for token_id in range(151_665, rows):  # the 271 padding rows
        assert tokens[token_id] == f"[PAD{token_id}]"
        assert types[token_id] == gguf.TokenType.UNUSED


def test_token_types_of_added_tokens(exported: Any, tiny_snapshot: Path) -> None:
    types = field(exported, "tokenizer.ggml.token_type")
    for a in tokenizer_json(tiny_snapshot)["added_tokens"]:
        content = a["content"]
        looks_special = content.startswith("<|") and content.endswith("|>")
        want = (gguf.TokenType.CONTROL if a["special"] or looks_special
                else gguf.TokenType.USER_DEFINED)
        assert types[a["id"]] == want, content
    ids = {a["content"]: a["id"] for a in tokenizer_json(tiny_snapshot)["added_tokens"]}
    assert types[ids["<|im_end|>"]] == gguf.TokenType.CONTROL
    assert types[ids["<|fim_prefix|>"]] == gguf.TokenType.CONTROL  # not special, looks it
    assert types[ids["<tool_call>"]] == gguf.TokenType.USER_DEFINED
    counts = np.bincount(np.asarray(types), minlength=6)
    assert counts[gguf.TokenType.NORMAL] == 151_643
    assert counts[gguf.TokenType.CONTROL] + counts[gguf.TokenType.USER_DEFINED] == 22
    assert counts[gguf.TokenType.UNUSED] == 271


def test_merges_match_tokenizer_json(exported: Any, tiny_snapshot: Path) -> None:
    merges = tokenizer_json(tiny_snapshot)["model"]["merges"]
    want = [m if isinstance(m, str) else " ".join(m) for m in merges]
    assert field(exported, "tokenizer.ggml.merges") == want
    assert len(want) == 151_643 - 256  # one merge per multi-byte token
    assert field(exported, "tokenizer.ggml.model") == "gpt2"
    assert field(exported, "tokenizer.ggml.pre") == "qwen2"


# ---- the vocabulary builder on its own ---------------------------------------------


def _bpe(vocab: dict[str, int], merges: list[Any], added: list[dict[str, Any]] | None = None,
         pattern: str = gguf_export.QWEN2_PATTERN) -> dict[str, Any]:
    split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated"}
    return {"model": {"type": "BPE", "vocab": vocab, "merges": merges},
            "added_tokens": added or [],
            "pre_tokenizer": {"type": "Sequence",
                              "pretokenizers": [split, {"type": "ByteLevel"}]}}


def test_vocabulary_accepts_both_merge_spellings() -> None:
    vocab = gguf_export.vocabulary(_bpe({"a": 0, "b": 1, "ab": 2}, [["a", "b"]]), 4)
    assert vocab.tokens == ["a", "b", "ab", "[PAD3]"]
    assert vocab.merges == ["a b"]
    assert gguf_export.vocabulary(_bpe({"a": 0, "b": 1, "ab": 2}, ["a b"]), 3).merges == ["a b"]


@pytest.mark.parametrize(("data", "message"), [
    ({"model": {"type": "WordPiece"}}, "not a BPE tokenizer"),
    (_bpe({"a": 0}, [], pattern=r"\p{N}{1,3}"), "not Qwen2's byte-level split"),
    (_bpe({"a": 5}, []), "outside the 3 embedding rows"),
    (_bpe({"a": 0, "b": 0}, []), "id 0 is both"),
    (_bpe({"a": 0}, ["a b c"]), "malformed BPE merge"),
    (_bpe({"a": 0}, [], [{"id": 1}]), "added token without content"),
])
def test_vocabulary_rejects(data: dict[str, Any], message: str) -> None:
    with pytest.raises(gguf_export.GGUFExportError, match=message):
        gguf_export.vocabulary(data, 3)


def test_gguf_name_rejects_unknown_tensors() -> None:
    assert gguf_export.gguf_name("model.layers.12.mlp.up_proj.weight") == "blk.12.ffn_up.weight"
    with pytest.raises(gguf_export.GGUFExportError, match=r"no llama\.cpp qwen2 name"):
        gguf_export.gguf_name("model.layers.0.mlp.extra.weight")


# ---- the command line -------------------------------------------------------------


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert gguf_export.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("gguf_export: error: "), err
    return err


def test_cli_user_errors(tiny_snapshot: Path, tmp_path: Path,
                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.gguf"
    assert "does not exist" in _one_line_error([str(tmp_path / "nope"), str(out)], capsys)
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors", "generation_config.json"):
        (bare / name).symlink_to(tiny_snapshot / name)
    assert "no tokenizer.json" in _one_line_error([str(bare), str(out)], capsys)
    assert "--threads" in _one_line_error([str(bare), str(out), "--threads", "-1"], capsys)
    assert not out.exists()
    assert not list(tmp_path.glob("*.partial"))


def test_q8_0_without_llama_cpp_is_one_line(tiny_snapshot: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails as if not installed
    out = tmp_path / "q.gguf"
    err = _one_line_error([str(tiny_snapshot), str(out), "--q8_0"], capsys)
    assert "llama-cpp-python is not installed" in err
    assert list(tmp_path.iterdir()) == []  # nothing written, not even the F32 temporary


# ---- the BF16 GGUF ------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported_bf16(tiny_snapshot: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The tiny snapshot's BF16 GGUF, written through the command line, read back."""
    out = tmp_path_factory.mktemp("gguf-bf16") / "tiny-bf16.gguf"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert gguf_export.main([str(tiny_snapshot), str(out), "--bf16"]) == 0
    assert printed.getvalue().startswith(f"wrote {out} (")
    assert "BF16" in printed.getvalue()
    assert [p.name for p in out.parent.iterdir()] == [out.name]
    return Reader(out)


def test_bf16_matrices_read_back_as_the_snapshots_bf16_bits(exported_bf16: Any,
                                                             tiny_snapshot: Path) -> None:
    """Matrices: BF16, the stored 16 bits exactly (those the bf16 engine binds);
    norms and biases: F32, the bf16 bits in the high half (llama.cpp keeps 1-D F32)."""
    from nanocompile.checkpoint.snapshot import Snapshot
    from nanocompile.inference.engine import SnapshotWeights

    layers = config_json(tiny_snapshot)["num_hidden_layers"]
    names = expected_names(layers)
    bound = SnapshotWeights(Snapshot.open(tiny_snapshot), "bf16")  # c-bf16's weights
    kinds = {}
    with SafetensorsFile.open(tiny_snapshot / "model.safetensors") as st:
        assert sorted(t.name for t in exported_bf16.tensors) == sorted(names)
        for tensor in exported_bf16.tensors:
            hf = names[tensor.name]
            want_shape = st.shape(hf)
            bits = st.raw(hf)
            assert bits.dtype == np.uint16
            assert np.array_equal(bound[hf], bits), tensor.name
            assert [int(d) for d in tensor.shape] == list(reversed(want_shape)), tensor.name
            got = np.asarray(tensor.data)
            kinds[tensor.name] = tensor.tensor_type
            if len(want_shape) >= 2:
                assert tensor.tensor_type == gguf.GGMLQuantizationType.BF16, tensor.name
                # the reader hands BF16 back as its bytes, 2 per element
                assert got.dtype == np.uint8
                assert got.shape == (*want_shape[:-1], 2 * want_shape[-1])
                assert np.array_equal(got.view("<u2"), bits), tensor.name
            else:
                assert tensor.tensor_type == gguf.GGMLQuantizationType.F32, tensor.name
                assert got.dtype == np.float32
                assert got.shape == want_shape
                assert np.array_equal(got.view(np.uint32), bits.astype(np.uint32) << 16)
            assert tensor.data_offset % 32 == 0, tensor.name
    assert kinds["token_embd.weight"] == gguf.GGMLQuantizationType.BF16  # tied: the LM head
    assert kinds["blk.0.attn_q.bias"] == gguf.GGMLQuantizationType.F32
    assert kinds["output_norm.weight"] == gguf.GGMLQuantizationType.F32


def test_bf16_file_type_and_the_f32_files_keys(exported_bf16: Any, exported: Any) -> None:
    assert field(exported_bf16, "general.file_type") == 32  # LLAMA_FTYPE_MOSTLY_BF16
    assert field(exported, "general.file_type") == 0  # LLAMA_FTYPE_ALL_F32
    for key, value in exported.fields.items():  # every other key as the F32 file's
        if key.startswith("general.file_type") or key.startswith("GGUF."):
            continue
        assert key in exported_bf16.fields, key
        if key not in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):  # long; checked above
            assert exported_bf16.fields[key].contents() == value.contents(), key


def test_bf16_and_q8_0_are_exclusive(tiny_snapshot: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        gguf_export.main([str(tiny_snapshot), str(tmp_path / "x.gguf"), "--bf16", "--q8_0"])
    assert "not allowed with" in capsys.readouterr().err
    with pytest.raises(gguf_export.GGUFExportError, match="one of bf16 and q8_0"):
        gguf_export.export(tiny_snapshot, tmp_path / "x.gguf", bf16=True, q8_0=True)
    assert list(tmp_path.iterdir()) == []

"""Snapshot: a snapshot directory (single file or shards) checked against its config."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from _reference_config import REAL

from nanocompile.checkpoint.config import ConfigError, Qwen2Config
from nanocompile.checkpoint.safetensors import (
    SafetensorsError,
    bf16_to_f32,
    f32_to_bf16,
    write_safetensors,
)
from nanocompile.checkpoint.snapshot import Snapshot, SnapshotError, expected_tensors

MICRO = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_act": "silu",
    "vocab_size": 32,
    "hidden_size": 8,
    "intermediate_size": 12,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "max_position_embeddings": 64,
    "tie_word_embeddings": True,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "bfloat16",
}

LAYER_SUFFIXES = [
    "input_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.q_proj.bias",
    "self_attn.k_proj.weight",
    "self_attn.k_proj.bias",
    "self_attn.v_proj.weight",
    "self_attn.v_proj.bias",
    "self_attn.o_proj.weight",
    "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
]


def _micro_tensors(config: dict, seed: int = 0) -> dict[str, tuple[str, np.ndarray]]:
    """Random bf16 tensors for the micro config, shapes written out by hand."""
    rng = np.random.default_rng(seed)
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * h // config["num_attention_heads"]
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    per_layer = [(h,), (h, h), (h,), (kv, h), (kv,), (kv, h), (kv,), (h, h), (h,),
                 (i, h), (i, h), (h, i)]  # fmt: skip
    for layer in range(config["num_hidden_layers"]):
        for suffix, shape in zip(LAYER_SUFFIXES, per_layer, strict=True):
            shapes[f"model.layers.{layer}.{suffix}"] = shape
    if not config["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (v, h)
    return {
        name: ("BF16", f32_to_bf16(rng.standard_normal(shape).astype(np.float32)))
        for name, shape in shapes.items()
    }


def _snapshot_dir(
    tmp_path: Path, config: dict | None = None, tensors: dict | None = None
) -> tuple[Path, dict]:
    config = MICRO if config is None else config
    tensors = _micro_tensors(config) if tensors is None else tensors
    (tmp_path / "config.json").write_text(json.dumps(config))
    write_safetensors(tmp_path / "model.safetensors", tensors, {"format": "pt"})
    return tmp_path, tensors


def _write_shards(tmp_path: Path, tensors: dict, shards: int = 2) -> dict[str, str]:
    names = sorted(tensors)
    weight_map = {}
    for k in range(shards):
        shard = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[k::shards]}
        write_safetensors(tmp_path / shard, part, {"format": "pt"})
        weight_map |= dict.fromkeys(part, shard)
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    return weight_map


def test_expected_tensors_of_qwen25_05b() -> None:
    shapes = expected_tensors(Qwen2Config.from_dict(REAL))
    assert len(shapes) == 290  # spec §1
    assert sum(int(np.prod(s)) for s in shapes.values()) == 494_032_768
    assert shapes["model.layers.23.self_attn.k_proj.weight"] == (128, 896)
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (896, 4864)
    assert "lm_head.weight" not in shapes


def test_open_single_file(tmp_path: Path) -> None:
    path, tensors = _snapshot_dir(tmp_path)
    with Snapshot.open(path) as snap:
        assert snap.config.hidden_size == 8
        assert set(snap.expected_tensors()) == set(tensors)
        assert len(snap.expected_tensors()) == 2 + 12 * 2
        name = "model.layers.1.self_attn.k_proj.weight"
        assert snap.dtype(name) == "BF16"
        assert snap.shape(name) == (4, 8)
        np.testing.assert_array_equal(snap.raw(name), tensors[name][1])
        np.testing.assert_array_equal(snap.f32(name), bf16_to_f32(tensors[name][1]))
        assert snap.load_seconds > 0
        assert snap.peak_rss_bytes > 0
        assert snap.nbytes() == (path / "model.safetensors").stat().st_size


def test_content_hash_is_the_sha256_of_config_and_weight_files(tmp_path: Path) -> None:
    """The hash (read through a mapping since session 26) is the sha256 of the
    names and bytes, computed here with read(), one and two shards."""
    import hashlib

    def expected(directory: Path, names: list[str]) -> str:
        digest = hashlib.sha256(b"nanocompile-snapshot/1")
        for name in names:
            digest.update(f"\0{name}\0".encode())
            digest.update((directory / name).read_bytes())
        return digest.hexdigest()

    (tmp_path / "one").mkdir()
    one, _ = _snapshot_dir(tmp_path / "one")
    with Snapshot.open(one) as snap:
        assert snap.content_hash() == expected(one, ["config.json", "model.safetensors"])
    two = tmp_path / "two"
    two.mkdir()
    (two / "config.json").write_text(json.dumps(MICRO))
    shards = sorted(set(_write_shards(two, _micro_tensors(MICRO)).values()))
    with Snapshot.open(two) as snap:
        assert snap.content_hash() == expected(two, ["config.json", *shards])


def test_open_sharded(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO)
    (tmp_path / "config.json").write_text(json.dumps(MICRO))
    weight_map = _write_shards(tmp_path, tensors)
    with Snapshot.open(tmp_path) as snap:
        assert len(snap.files) == 2
        assert snap.names == sorted(tensors)
        for name, (_, bits) in tensors.items():
            np.testing.assert_array_equal(snap.raw(name), bits)
            assert snap.files[weight_map[name]].path.name == weight_map[name]


def test_untied_needs_lm_head(tmp_path: Path) -> None:
    untied = MICRO | {"tie_word_embeddings": False}
    tensors = _micro_tensors(untied)
    del tensors["lm_head.weight"]
    with pytest.raises(SnapshotError, match=re.escape("'lm_head.weight'")):
        Snapshot.open(_snapshot_dir(tmp_path, untied, tensors)[0])


def test_untied_with_lm_head(tmp_path: Path) -> None:
    untied = MICRO | {"tie_word_embeddings": False}
    with Snapshot.open(_snapshot_dir(tmp_path, untied)[0]) as snap:
        assert "lm_head.weight" in snap.expected_tensors()


def test_missing_tensor(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO)
    del tensors["model.layers.1.mlp.up_proj.weight"]
    with pytest.raises(SnapshotError, match=r"missing tensor 'model\.layers\.1\.mlp\.up_proj"):
        Snapshot.open(_snapshot_dir(tmp_path, tensors=tensors)[0])


def test_missing_tensor_in_shards(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO)
    del tensors["model.norm.weight"]
    (tmp_path / "config.json").write_text(json.dumps(MICRO))
    _write_shards(tmp_path, tensors)
    with pytest.raises(SnapshotError, match=re.escape("'model.norm.weight'")):
        Snapshot.open(tmp_path)


def test_wrong_shape(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO)
    tensors["model.layers.0.self_attn.q_proj.bias"] = ("BF16", np.zeros(9, np.uint16))
    with pytest.raises(SnapshotError, match=r"shape \[9\], config implies \[8\]"):
        Snapshot.open(_snapshot_dir(tmp_path, tensors=tensors)[0])


def test_wrong_dtype(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO)
    tensors["model.norm.weight"] = ("I16", np.zeros(8, np.int16))
    with pytest.raises(SnapshotError, match="dtype I16"):
        Snapshot.open(_snapshot_dir(tmp_path, tensors=tensors)[0])


def test_f32_and_f16_weights_accepted(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO)
    norm = np.linspace(0, 1, 8, dtype=np.float32)
    tensors["model.norm.weight"] = ("F32", norm)
    tensors["model.layers.0.input_layernorm.weight"] = ("F16", np.full(8, 1.5, np.float16))
    with Snapshot.open(_snapshot_dir(tmp_path, tensors=tensors)[0]) as snap:
        np.testing.assert_array_equal(snap.f32("model.norm.weight"), norm)
        ln = snap.f32("model.layers.0.input_layernorm.weight")
        assert ln.dtype == np.float32
        np.testing.assert_array_equal(ln, 1.5)


def test_f32_into_a_given_array_for_each_stored_dtype(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO)
    norm = np.linspace(-1, 1, 8, dtype=np.float32)
    half = np.linspace(-2, 2, 8).astype(np.float16)
    tensors["model.norm.weight"] = ("F32", norm)
    tensors["model.layers.0.input_layernorm.weight"] = ("F16", half)
    with Snapshot.open(_snapshot_dir(tmp_path, tensors=tensors)[0]) as snap:
        for name, expected in (("model.norm.weight", norm),
                               ("model.layers.0.input_layernorm.weight", half.astype(np.float32)),
                               ("model.embed_tokens.weight", None)):
            out = np.full(snap.shape(name), np.nan, np.float32)
            assert snap.f32(name, out=out) is out
            if expected is None:  # BF16: the high halves of u32s, written out here
                wide = snap.raw(name).astype(np.uint32) << np.uint32(16)
                np.testing.assert_array_equal(out.view(np.uint32), wide)
            else:
                np.testing.assert_array_equal(out, expected)
        with pytest.raises(ValueError, match="out must be float32 of shape"):
            snap.f32("model.norm.weight", out=np.zeros(7, np.float32))


def test_extra_tensors_are_tolerated(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO) | {"rotary.inv_freq": ("F32", np.ones(2, np.float32))}
    with Snapshot.open(_snapshot_dir(tmp_path, tensors=tensors)[0]) as snap:
        assert "rotary.inv_freq" in snap.names
        assert "rotary.inv_freq" not in snap.expected_tensors()


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(SnapshotError, match="does not exist"):
        Snapshot.open(tmp_path / "nowhere")


def test_missing_config(tmp_path: Path) -> None:
    write_safetensors(tmp_path / "model.safetensors", _micro_tensors(MICRO))
    with pytest.raises(SnapshotError, match=re.escape("no config.json")):
        Snapshot.open(tmp_path)


def test_missing_weights(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(MICRO))
    with pytest.raises(SnapshotError, match=re.escape("no model.safetensors")):
        Snapshot.open(tmp_path)


def test_bad_config_propagates(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="hidden_act"):
        Snapshot.open(_snapshot_dir(tmp_path, MICRO | {"hidden_act": "relu"})[0])


def test_corrupt_weights_propagate(tmp_path: Path) -> None:
    path, _ = _snapshot_dir(tmp_path)
    blob = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(SafetensorsError, match="truncated"):
        Snapshot.open(path)


def test_index_names_missing_shard(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO)
    (tmp_path / "config.json").write_text(json.dumps(MICRO))
    _write_shards(tmp_path, tensors)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(SnapshotError, match="does not exist"):
        Snapshot.open(tmp_path)


def test_index_lists_absent_tensor(tmp_path: Path) -> None:
    tensors = _micro_tensors(MICRO)
    (tmp_path / "config.json").write_text(json.dumps(MICRO))
    weight_map = _write_shards(tmp_path, tensors)
    name = "model.norm.weight"
    other = next(s for s in sorted(set(weight_map.values())) if s != weight_map[name])
    index = {"weight_map": weight_map | {name: other}}  # points at a shard without it
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(SnapshotError, match=re.escape("index lists tensor 'model.norm.weight'")):
        Snapshot.open(tmp_path)


def test_index_shard_path_traversal(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(MICRO))
    index = {"weight_map": {"model.norm.weight": "../model.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(SnapshotError, match="bad shard name"):
        Snapshot.open(tmp_path)


def test_index_not_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(MICRO))
    (tmp_path / "model.safetensors.index.json").write_text("{")
    with pytest.raises(SnapshotError, match="cannot read index"):
        Snapshot.open(tmp_path)


def test_unknown_name(tmp_path: Path) -> None:
    with Snapshot.open(_snapshot_dir(tmp_path)[0]) as snap, pytest.raises(SnapshotError):
        snap.raw("model.layers.9.mlp.up_proj.weight")

"""Qwen2Config: parsing and validation of config.json."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from _reference_config import REAL

from nanocompile.checkpoint.config import ConfigError, Qwen2Config

REQUIRED = [
    "architectures",
    "hidden_act",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "rms_norm_eps",
    "rope_theta",
    "max_position_embeddings",
    "tie_word_embeddings",
    "bos_token_id",
    "eos_token_id",
    "torch_dtype",
]


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    return path


def _error(tmp_path: Path, **changes: object) -> str:
    data = {k: v for k, v in (REAL | changes).items() if v is not ...}
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError) as info:
        Qwen2Config.from_file(path)
    message = str(info.value)
    assert str(path) in message
    return message


def test_real_config(tmp_path: Path) -> None:
    c = Qwen2Config.from_file(_write(tmp_path, REAL))
    assert c == Qwen2Config(
        vocab_size=151936,
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        rope_theta=1e6,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        bos_token_id=151643,
        eos_token_id=151645,
        torch_dtype="bfloat16",
    )
    assert c.head_dim == 64
    assert c.kv_group == 7
    assert isinstance(c.rope_theta, float)


def test_config_is_frozen() -> None:
    c = Qwen2Config.from_dict(REAL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.hidden_size = 1  # type: ignore[misc]


def test_transformers_5_dtype_key(tmp_path: Path) -> None:
    data = {k: v for k, v in REAL.items() if k != "torch_dtype"} | {"dtype": "float32"}
    assert Qwen2Config.from_file(_write(tmp_path, data)).torch_dtype == "float32"


def test_wrong_architecture(tmp_path: Path) -> None:
    message = _error(tmp_path, architectures=["LlamaForCausalLM"])
    assert "architectures" in message
    assert "Qwen2ForCausalLM" in message


def test_architectures_not_a_list(tmp_path: Path) -> None:
    assert "architectures" in _error(tmp_path, architectures="Qwen2ForCausalLM")


def test_wrong_activation(tmp_path: Path) -> None:
    message = _error(tmp_path, hidden_act="gelu")
    assert "hidden_act" in message
    assert "gelu" in message


@pytest.mark.parametrize("field", REQUIRED)
def test_missing_field(tmp_path: Path, field: str) -> None:
    message = _error(tmp_path, **{field: ...})
    assert field in message
    assert "missing" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hidden_size", "896"),
        ("hidden_size", 896.0),
        ("hidden_size", True),
        ("hidden_size", 0),
        ("num_hidden_layers", -1),
        ("vocab_size", None),
        ("rms_norm_eps", "1e-6"),
        ("rms_norm_eps", 0),
        ("rope_theta", -1.0),
        ("rope_theta", False),
        ("tie_word_embeddings", 1),
        ("bos_token_id", 151936),
        ("eos_token_id", [151645]),
        ("eos_token_id", -1),
        ("torch_dtype", "int8"),
    ],
)
def test_ill_typed_field(tmp_path: Path, field: str, value: object) -> None:
    assert field in _error(tmp_path, **{field: value})


def test_hidden_not_divisible_by_heads(tmp_path: Path) -> None:
    message = _error(tmp_path, num_attention_heads=15)
    assert "hidden_size" in message


def test_heads_not_multiple_of_kv_heads(tmp_path: Path) -> None:
    message = _error(tmp_path, num_key_value_heads=3)
    assert "num_key_value_heads" in message


def test_odd_head_dim(tmp_path: Path) -> None:
    assert "even" in _error(tmp_path, hidden_size=882, num_attention_heads=14)


def test_explicit_head_dim_must_agree(tmp_path: Path) -> None:
    assert "head_dim" in _error(tmp_path, head_dim=128)


def test_sliding_window_rejected(tmp_path: Path) -> None:
    assert "use_sliding_window" in _error(tmp_path, use_sliding_window=True)


def test_rope_scaling_rejected(tmp_path: Path) -> None:
    assert "rope_scaling" in _error(tmp_path, rope_scaling={"type": "yarn", "factor": 4.0})


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{oops")
    with pytest.raises(ConfigError, match="not valid JSON"):
        Qwen2Config.from_file(path)


def test_not_an_object(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("[1]")
    with pytest.raises(ConfigError, match="object"):
        Qwen2Config.from_file(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        Qwen2Config.from_file(tmp_path / "config.json")

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


# --------------------------------------------------------------------------
# transformers >= 5 (issue 21): rope_theta nested in rope_parameters, layer_types


def _transformers_5(**changes: object) -> dict:
    """REAL as transformers 5 writes it (written out by hand: the oracle is the layout)."""
    data = {k: v for k, v in REAL.items() if k not in ("rope_theta", "torch_dtype")}
    data |= {"dtype": "bfloat16", "rope_parameters": {"rope_theta": 1000000.0,
                                                       "rope_type": "default"},
             "layer_types": ["full_attention"] * REAL["num_hidden_layers"]}
    return {k: v for k, v in (data | changes).items() if v is not ...}


def test_transformers_5_rope_parameters(tmp_path: Path) -> None:
    """Issue 21: 'rope_theta: missing' for the config transformers 5 writes."""
    c = Qwen2Config.from_file(_write(tmp_path, _transformers_5()))
    assert c == Qwen2Config.from_dict(REAL)
    assert c.rope_theta == 1e6


def test_rope_parameters_without_a_type_is_default(tmp_path: Path) -> None:
    data = _transformers_5(rope_parameters={"rope_theta": 10000})
    assert Qwen2Config.from_file(_write(tmp_path, data)).rope_theta == 10000.0


def test_rope_theta_in_both_places_must_agree(tmp_path: Path) -> None:
    assert Qwen2Config.from_dict(_transformers_5(rope_theta=1e6)).rope_theta == 1e6
    path = _write(tmp_path, _transformers_5(rope_theta=1e4))
    with pytest.raises(ConfigError, match=r"rope_theta: 10000.0 != rope_parameters.rope_theta"):
        Qwen2Config.from_file(path)


@pytest.mark.parametrize(("changes", "field", "message"), [
    ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}},
     "rope_parameters.rope_type", "only 'default' RoPE is supported (no scaling), got 'yarn'"),
    ({"rope_parameters": {"rope_type": "default"}}, "rope_parameters.rope_theta", "missing"),
    ({"rope_parameters": {"rope_theta": -1.0}}, "rope_parameters.rope_theta",
     "must be a positive number, got -1.0"),
    ({"rope_parameters": {"rope_theta": "1e6"}}, "rope_parameters.rope_theta",
     "must be a positive number, got '1e6'"),
    ({"rope_parameters": 1e6}, "rope_parameters", "must be an object, got 1000000.0"),
    ({"layer_types": ["full_attention", "sliding_attention"]}, "layer_types",
     "only 'full_attention' layers are supported, got 'sliding_attention'"),
    ({"layer_types": "full_attention"}, "layer_types",
     "must be a list, got 'full_attention'"),
])
def test_transformers_5_fields_checked(tmp_path: Path, changes: dict, field: str,
                                       message: str) -> None:
    path = _write(tmp_path, _transformers_5(**changes))
    with pytest.raises(ConfigError) as info:
        Qwen2Config.from_file(path)
    assert str(info.value) == f"{path}: {field}: {message}"


@pytest.mark.oracle
@pytest.mark.slow  # ~3 s: imports transformers (the hand-written layout above is the fast check)
def test_the_config_transformers_writes_is_read(tmp_path: Path) -> None:
    """Whatever layout the installed transformers writes (the dev extra's is 5.x: nested)."""
    transformers = pytest.importorskip("transformers")
    fields = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
              "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
              "max_position_embeddings", "tie_word_embeddings", "bos_token_id", "eos_token_id")
    hf = transformers.Qwen2Config(**{k: REAL[k] for k in fields}, rope_theta=REAL["rope_theta"])
    hf.architectures = ["Qwen2ForCausalLM"]
    hf.dtype = "bfloat16"
    hf.save_pretrained(tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())
    if int(transformers.__version__.split(".")[0]) >= 5:
        assert "rope_theta" not in written
        assert written["rope_parameters"]["rope_theta"] == REAL["rope_theta"]
    assert Qwen2Config.from_file(tmp_path / "config.json") == Qwen2Config.from_dict(REAL)

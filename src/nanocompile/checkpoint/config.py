"""The Qwen2 model configuration, parsed and validated from ``config.json``.

Only what nanocompile computes is accepted: ``Qwen2ForCausalLM`` with SiLU,
plain RoPE (no ``rope_scaling``) and full attention (no sliding window).
Every field is checked for presence and type; a failure names the field and
the file.

Both layouts transformers writes are read: before version 5, ``rope_theta``
(and ``rope_scaling``, ``torch_dtype``) at the top level; from version 5,
``rope_parameters: {"rope_type": "default", "rope_theta": ...}`` (a
``rope_type`` other than ``"default"`` is a RoPE scaling), ``dtype`` and
``layer_types`` (every layer ``"full_attention"``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nanocompile.checkpoint.jsonfile import JSONFileError, read_json

ARCHITECTURE = "Qwen2ForCausalLM"
TORCH_DTYPES = ("bfloat16", "float16", "float32")


class ConfigError(ValueError):
    """``config.json`` is missing, malformed, or describes an unsupported model."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Reader:
    """Typed field access on a config dict; errors name the field and source."""

    def __init__(self, data: dict[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def error(self, field: str, message: str) -> ConfigError:
        return ConfigError(f"{self.source}: {field}: {message}")

    def get(self, field: str) -> Any:
        if field not in self.data:
            raise self.error(field, "missing")
        return self.data[field]

    def positive_int(self, field: str) -> int:
        value = self.get(field)
        if not _is_int(value) or value <= 0:
            raise self.error(field, f"must be a positive integer, got {value!r}")
        return value

    def token_id(self, field: str, vocab_size: int) -> int:
        value = self.get(field)
        if not _is_int(value) or not 0 <= value < vocab_size:
            raise self.error(field, f"must be a token id in [0, {vocab_size}), got {value!r}")
        return value

    def positive_float(self, field: str) -> float:
        value = self.get(field)
        if not _is_number(value) or not value > 0:
            raise self.error(field, f"must be a positive number, got {value!r}")
        return float(value)

    def boolean(self, field: str) -> bool:
        value = self.get(field)
        if not isinstance(value, bool):
            raise self.error(field, f"must be true or false, got {value!r}")
        return value


@dataclass(frozen=True)
class Qwen2Config:
    """The architecture facts of a Qwen2 causal LM (spec §1)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    bos_token_id: int
    eos_token_id: int
    torch_dtype: str

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden_size // self.num_attention_heads

    @property
    def kv_group(self) -> int:
        """Query heads served by one KV head."""
        return self.num_attention_heads // self.num_key_value_heads

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Qwen2Config:
        """Read and validate ``config.json`` at ``path``."""
        path = Path(path)
        try:
            data = read_json(path)
        except JSONFileError as exc:
            raise ConfigError(f"{path}: cannot read config ({exc})") from None
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: object, source: str = "<config>") -> Qwen2Config:
        """Validate a parsed config; ``source`` names it in error messages."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: config must be a JSON object")
        r = _Reader(data, source)
        _check_model_kind(r)
        vocab = r.positive_int("vocab_size")
        config = cls(
            vocab_size=vocab,
            hidden_size=r.positive_int("hidden_size"),
            intermediate_size=r.positive_int("intermediate_size"),
            num_hidden_layers=r.positive_int("num_hidden_layers"),
            num_attention_heads=r.positive_int("num_attention_heads"),
            num_key_value_heads=r.positive_int("num_key_value_heads"),
            rms_norm_eps=r.positive_float("rms_norm_eps"),
            rope_theta=_rope_theta(r),
            max_position_embeddings=r.positive_int("max_position_embeddings"),
            tie_word_embeddings=r.boolean("tie_word_embeddings"),
            bos_token_id=r.token_id("bos_token_id", vocab),
            eos_token_id=r.token_id("eos_token_id", vocab),
            torch_dtype=_torch_dtype(r),
        )
        _check_heads(r, config)
        return config


def _check_model_kind(r: _Reader) -> None:
    archs = r.get("architectures")
    if not isinstance(archs, list) or ARCHITECTURE not in archs:
        raise r.error("architectures", f"must contain {ARCHITECTURE!r}, got {archs!r}")
    act = r.get("hidden_act")
    if act != "silu":
        raise r.error("hidden_act", f"only 'silu' is supported, got {act!r}")
    if r.data.get("use_sliding_window", False) is not False:
        raise r.error("use_sliding_window", "sliding-window attention is not supported")
    if r.data.get("rope_scaling") is not None:
        raise r.error("rope_scaling", "RoPE scaling is not supported")
    layer_types = r.data.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list):
            raise r.error("layer_types", f"must be a list, got {layer_types!r}")
        other = sorted({str(t) for t in layer_types if t != "full_attention"})
        if other:
            raise r.error("layer_types", f"only 'full_attention' layers are supported, got "
                          f"{', '.join(repr(t) for t in other)}")


def _rope_theta(r: _Reader) -> float:
    """``rope_theta`` at the top level (transformers < 5) or in ``rope_parameters`` (>= 5)."""
    params = r.data.get("rope_parameters")
    if params is None:
        return r.positive_float("rope_theta")
    if not isinstance(params, dict):
        raise r.error("rope_parameters", f"must be an object, got {params!r}")
    kind = params.get("rope_type", "default")
    if kind != "default":
        raise r.error("rope_parameters.rope_type",
                      f"only 'default' RoPE is supported (no scaling), got {kind!r}")
    if "rope_theta" not in params:
        if "rope_theta" in r.data:
            return r.positive_float("rope_theta")
        raise r.error("rope_parameters.rope_theta", "missing")
    theta = params["rope_theta"]
    if not _is_number(theta) or not theta > 0:
        raise r.error("rope_parameters.rope_theta", f"must be a positive number, got {theta!r}")
    theta = float(theta)
    if "rope_theta" in r.data and r.positive_float("rope_theta") != theta:
        raise r.error("rope_theta", f"{r.data['rope_theta']!r} != rope_parameters.rope_theta "
                      f"{theta!r}")
    return theta


def _torch_dtype(r: _Reader) -> str:
    # transformers >= 5 writes "dtype"; older versions (and Qwen's hub files) "torch_dtype".
    field = "torch_dtype" if "torch_dtype" in r.data or "dtype" not in r.data else "dtype"
    value = r.get(field)
    if value not in TORCH_DTYPES:
        raise r.error(field, f"must be one of {', '.join(TORCH_DTYPES)}, got {value!r}")
    return value


def _check_heads(r: _Reader, c: Qwen2Config) -> None:
    heads, kv = c.num_attention_heads, c.num_key_value_heads
    if c.hidden_size % heads:
        raise r.error(
            "hidden_size",
            f"{c.hidden_size} is not num_attention_heads ({heads}) x head_dim",
        )
    if heads % kv:
        raise r.error(
            "num_key_value_heads",
            f"num_attention_heads ({heads}) is not a multiple of {kv}",
        )
    if c.head_dim % 2:
        raise r.error("hidden_size", f"head_dim {c.head_dim} must be even for RoPE")
    head_dim = r.data.get("head_dim")
    if head_dim is not None and head_dim != c.head_dim:
        raise r.error("head_dim", f"{head_dim!r} != hidden_size / num_attention_heads")

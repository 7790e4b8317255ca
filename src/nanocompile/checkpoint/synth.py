"""The deterministic synthetic Qwen2 checkpoint (spec §1.2).

``write_synthetic_snapshot`` writes a complete snapshot directory with the
exact Qwen2.5-0.5B-Instruct architecture (or a tiny two-layer config), the HF
tensor names and shapes, bf16 storage in one ``model.safetensors``, and the
real ``config.json`` / ``generation_config.json`` fields.

Determinism: every tensor draws from its own ``PCG64`` stream seeded by a
SHA-256 of ``(version, seed, tensor name)``, so tensors do not depend on the
order they are generated in. Only raw 64-bit generator output is used (its
stream is fixed by definition, unlike NumPy's distribution algorithms), and
every float operation after it is a single correctly rounded IEEE add,
multiply or divide on float32 (no transcendental functions, no reductions):
the same seed gives byte-identical files on any machine.

Values: a standard normal is approximated by the Irwin-Hall sum of the four
16-bit pieces of one raw draw (bounded at ±3.46σ, excess kurtosis −0.3).
See ``docs/checkpoint.md`` for the distributions and why they were chosen.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.safetensors import f32_to_bf16, write_safetensors_stream
from nanocompile.checkpoint.snapshot import expected_tensors

SYNTH_VERSION = "v1"
CHUNK_ELEMENTS = 1 << 21

# Tokens of the real vocabulary: 151,643 BPE tokens + 22 special tokens.
# Embedding rows from here up to vocab_size are padding with no token.
NUM_TOKENS = 151_665

Progress = Callable[[str, int, int], None]

FULL_CONFIG: dict[str, object] = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "hidden_act": "silu",
    "hidden_size": 896,
    "initializer_range": 0.02,
    "intermediate_size": 4864,
    "max_position_embeddings": 32768,
    "max_window_layers": 21,
    "model_type": "qwen2",
    "num_attention_heads": 14,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

TINY_OVERRIDES: dict[str, object] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_window_layers": 2,
}

GENERATION_CONFIG: dict[str, object] = {
    "bos_token_id": 151643,
    "pad_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "repetition_penalty": 1.1,
    "temperature": 0.7,
    "top_p": 0.8,
    "top_k": 20,
    "transformers_version": "4.43.1",
}


# --------------------------------------------------------------------------
# the weight design (see docs/checkpoint.md)


@dataclass(frozen=True)
class Design:
    """Scales of the synthetic weights; σ of a projection is gain / sqrt(fan_in)."""

    embed_gain: float = 0.9  # embedding σ = embed_gain / sqrt(hidden)
    embed_row_log_sigma: float = 0.5  # row norms ≈ lognormal(0, 0.5)
    padding_row_scale: float = 1 / 16  # padding rows (no token) are small
    norm_spread: float = 0.15  # RMSNorm weights ≈ mean · (1 + 0.15 z)
    final_norm_mean: float = 3.0
    qkv_gain: float = 1.25
    o_gain: float = 0.3
    gate_up_gain: float = 0.9
    down_gain: float = 0.8
    depth_growth: float = 1.0  # o/down gains grow by (1 + growth · layer / layers)
    bias_sigma: float = 0.1  # q and k bias background
    v_bias_sigma: float = 0.02
    q_massive: tuple[float, float] = (1.0, 3.0)  # |value| range of q's large bias channels
    k_massive: tuple[float, float] = (2.0, 6.0)  # same for k (Qwen2's k biases are large)
    massive_per_head: int = 2  # large channels per head, in the low-frequency RoPE dims


DESIGN = Design()


def _seed_int(seed: int, name: str) -> int:
    digest = hashlib.sha256(f"nanocompile-synth/{SYNTH_VERSION}/{seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:16], "little")


class _Stream:
    """Deterministic draws for one tensor, from raw PCG64 output only."""

    # Sum of four uniform u16: mean 4 · 32767.5, variance 4 · (65536² − 1) / 12.
    _MEAN = 131070
    _STD = math.sqrt(4 * (65536.0**2 - 1) / 12)

    def __init__(self, seed: int, name: str) -> None:
        self._bits = np.random.PCG64(_seed_int(seed, name))

    def _raw(self, n: int) -> np.ndarray:
        return self._bits.random_raw(n).astype("<u8", copy=False)

    def normal(self, n: int, sigma: float = 1.0) -> np.ndarray:
        """``n`` approximately N(0, sigma²) float32 values (Irwin-Hall of 4)."""
        parts = self._raw(n).view("<u2").reshape(n, 4)
        total = parts[:, 0].astype(np.int32)
        for k in (1, 2, 3):
            total += parts[:, k]
        total -= self._MEAN
        return total.astype(np.float32) * np.float32(sigma / self._STD)

    def uniform(self, n: int) -> np.ndarray:
        """``n`` float32 values uniform on [0, 1) (24 random bits each)."""
        top = (self._raw(n) >> np.uint64(40)).astype(np.float32)
        return top * np.float32(2.0**-24)

    def integers(self, n: int, high: int) -> np.ndarray:
        """``n`` integers in [0, high) (high ≤ 2**32; modulo bias is negligible)."""
        return ((self._raw(n) >> np.uint64(32)) % np.uint64(high)).astype(np.int64)


def _approx_exp(x: np.ndarray) -> np.ndarray:
    """exp(x) as (1 + x/16)^16 by squaring: only correctly rounded multiplies."""
    y = np.float32(1) + x * np.float32(1 / 16)
    for _ in range(4):
        y = y * y
    return y


def _chunked(stream: _Stream, count: int, sigma: float) -> Iterator[np.ndarray]:
    for start in range(0, count, CHUNK_ELEMENTS):
        yield stream.normal(min(CHUNK_ELEMENTS, count - start), sigma)


class _Generator:
    """Produces each tensor of the synthetic checkpoint as bf16 chunks."""

    def __init__(self, config: Qwen2Config, seed: int, design: Design | None = None) -> None:
        self.config = config
        self.seed = seed
        self.design = design if design is not None else DESIGN

    def chunks(self, name: str, shape: tuple[int, ...]) -> Iterator[np.ndarray]:
        """bf16 bits of ``name``, in chunks, row-major."""
        for values in self._values(name, shape):
            yield f32_to_bf16(values)

    def _values(self, name: str, shape: tuple[int, ...]) -> Iterator[np.ndarray]:
        stream = _Stream(self.seed, name)
        count = math.prod(shape)
        kind = name.rsplit(".", 2)[-2] + "." + name.rsplit(".", 1)[-1]
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            return self._embedding(stream, shape)
        if kind.endswith("layernorm.weight") or name == "model.norm.weight":
            return iter([self._norm(stream, name, count)])
        if kind in ("q_proj.bias", "k_proj.bias"):
            return iter([self._qk_bias(stream, kind, count)])
        if kind == "v_proj.bias":
            return iter([stream.normal(count, self.design.v_bias_sigma)])
        return _chunked(stream, count, self._projection_sigma(name, shape))

    def _layer(self, name: str) -> int:
        return int(name.split(".")[2])

    def _projection_sigma(self, name: str, shape: tuple[int, ...]) -> float:
        d = self.design
        fan_in = shape[1]
        depth = 1 + d.depth_growth * self._layer(name) / self.config.num_hidden_layers
        gains = {
            "q_proj": d.qkv_gain,
            "k_proj": d.qkv_gain,
            "v_proj": d.qkv_gain,
            "o_proj": d.o_gain * depth,
            "gate_proj": d.gate_up_gain,
            "up_proj": d.gate_up_gain,
            "down_proj": d.down_gain * depth,
        }
        return gains[name.split(".")[-2]] / math.sqrt(fan_in)

    def _norm(self, stream: _Stream, name: str, count: int) -> np.ndarray:
        mean = self.design.final_norm_mean if name == "model.norm.weight" else 1.0
        spread = stream.normal(count, self.design.norm_spread)
        return np.float32(mean) * (np.float32(1) + spread)

    def _qk_bias(self, stream: _Stream, kind: str, count: int) -> np.ndarray:
        d = self.design
        values = stream.normal(count, d.bias_sigma)
        low, high = d.q_massive if kind.startswith("q") else d.k_massive
        head_dim = self.config.head_dim
        heads = count // head_dim
        # Large channels sit in the slowest-rotating RoPE pairs (the top of each half).
        quarter = max(1, head_dim // 8)
        picks = stream.integers(heads * d.massive_per_head, quarter)
        halves = stream.integers(heads * d.massive_per_head, 2)
        size = np.float32(low) + stream.uniform(heads * d.massive_per_head) * np.float32(
            high - low
        )
        sign = np.where(stream.integers(heads * d.massive_per_head, 2) == 1, 1, -1)
        head = np.repeat(np.arange(heads), d.massive_per_head)
        channel = head * head_dim + halves * (head_dim // 2) + (head_dim // 2 - 1 - picks)
        values[channel] = size * sign.astype(np.float32)
        return values

    def _embedding(self, stream: _Stream, shape: tuple[int, ...]) -> Iterator[np.ndarray]:
        d = self.design
        rows, width = shape
        sigma = d.embed_gain / math.sqrt(width)
        scale_stream = _Stream(self.seed, "model.embed_tokens.weight/row_scale")
        row_scale = _approx_exp(scale_stream.normal(rows, d.embed_row_log_sigma))
        row_scale[NUM_TOKENS:] = np.float32(d.padding_row_scale)
        per_chunk = max(1, CHUNK_ELEMENTS // width)
        for start in range(0, rows, per_chunk):
            stop = min(rows, start + per_chunk)
            block = stream.normal((stop - start) * width, sigma).reshape(stop - start, width)
            yield block * row_scale[start:stop, None]


# --------------------------------------------------------------------------
# the snapshot directory


def synthetic_config(tiny: bool = False) -> dict[str, object]:
    """The ``config.json`` contents of the full (or tiny) synthetic model."""
    config = dict(FULL_CONFIG)
    if tiny:
        config |= TINY_OVERRIDES
    return config


def _write_json(path: Path, data: dict[str, object]) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def write_synthetic_snapshot(
    out_dir: Path,
    *,
    tiny: bool = False,
    seed: int = 0,
    progress: Progress | None = None,
    tokenizer: bool = True,
) -> Path:
    """Write a deterministic synthetic Qwen2 snapshot into ``out_dir``; return it.

    ``tiny`` selects the two-layer test config (same vocabulary). ``progress``
    is called as ``progress(what, done, total)`` after each file and tensor.
    ``tokenizer=False`` skips ``tokenizer.json`` / ``tokenizer_config.json``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    config_data = synthetic_config(tiny)
    config = Qwen2Config.from_dict(config_data, source="synthetic config")
    specs = {name: ("BF16", shape) for name, shape in expected_tensors(config).items()}
    total = len(specs) + 2 + int(tokenizer)
    done = 0

    def report(what: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(what, done, total)

    _write_json(out_dir / "config.json", config_data)
    _write_json(out_dir / "generation_config.json", GENERATION_CONFIG)
    report("config.json, generation_config.json")

    generator = _Generator(config, seed)

    def chunks(name: str) -> Iterator[np.ndarray]:
        yield from generator.chunks(name, specs[name][1])
        report(f"model.safetensors: {name}")

    write_safetensors_stream(out_dir / "model.safetensors", specs, chunks, {"format": "pt"})
    if tokenizer:
        from nanocompile.tokenizer.build import write_tokenizer_files

        write_tokenizer_files(out_dir)
        report("tokenizer.json, tokenizer_config.json")
    report("done")
    return out_dir

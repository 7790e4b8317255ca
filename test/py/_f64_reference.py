"""A float64 evaluation of a Qwen2 model, in NumPy: the reference of the accuracy tests.

Written from spec §2.3, independently of nanocompile's frontend and
interpreter; the weights come from any mapping of the snapshot's tensor names
(the tests pass transformers' own f32 parameters, the bf16 values widened
exactly), widened to f64 exactly, one layer at a time.

Why not transformers loaded with ``dtype=torch.float64``: that model does not
compute in f64 throughout (transformers 5.x, ``modeling_qwen2.py``).
``Qwen2RMSNorm`` rounds its input to f32 (``hidden_states.to(torch.float32)``)
before normalizing, so every norm's output carries f32 rounding, and the
rotary embedding computes ``cos``/``sin`` in f32 and casts them afterwards.
Measured on the full-size synthetic model, its logits differ from this
reference by 7.7e-5 (277-token prompt), a fifth of transformers f32's error.

What stays f32 here is what defines the model rather than rounds it: the bf16
weights (exact in f64), and the RoPE angles as spec §2.3 defines them (the
inverse frequencies an f32 power, each angle one f32 product of position and
inverse frequency), as nanocompile's frontend and transformers compute them
(transformers' torch power differs from NumPy's by 1-2 ulp in 7 of the 32
inverse frequencies; its table here moves the accuracy figures by under 1 %,
exact f64 angles raise every engine's error by about 40 %). The cosine and
sine of those angles, and every other operation, are float64.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def rope_angles_f32(seq: int, head_dim: int, theta: float) -> np.ndarray:
    """``[seq, head_dim // 2]`` angles: ``f32(position) * (1 / theta ** (2i / d))``, all f32."""
    exponent = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    inv = np.float32(1.0) / np.power(np.float32(theta), exponent)
    positions = np.arange(seq, dtype=np.float32)
    return positions[:, None] * inv[None, :]


def _rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _silu(x: np.ndarray) -> np.ndarray:
    return x * (0.5 * (1.0 + np.tanh(0.5 * x)))  # x * sigmoid(x), no overflow


class Qwen2F64:
    """A Qwen2 causal LM evaluated in float64 (no cache: every position of one prompt)."""

    def __init__(self, config: Mapping[str, Any], weights: Mapping[str, np.ndarray]) -> None:
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.kv_heads = int(config["num_key_value_heads"])
        self.head_dim = int(config.get("head_dim") or config["hidden_size"] // self.heads)
        self.eps = float(config["rms_norm_eps"])
        self.theta = float(config["rope_theta"])
        self.tied = bool(config.get("tie_word_embeddings", False))
        self.weights = weights

    def _w(self, name: str) -> np.ndarray:
        return np.asarray(self.weights[name], dtype=np.float64)

    def _heads(self, x: np.ndarray, n: int) -> np.ndarray:
        """``[seq, n * d] -> [n, seq, d]``."""
        return x.reshape(x.shape[0], n, self.head_dim).transpose(1, 0, 2)

    def _attention(self, p: str, h: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        seq = h.shape[0]
        proj = {n: h @ self._w(f"{p}self_attn.{n}_proj.weight").T
                + self._w(f"{p}self_attn.{n}_proj.bias") for n in "qkv"}
        q = _rotate(self._heads(proj["q"], self.heads), cos, sin)
        k = _rotate(self._heads(proj["k"], self.kv_heads), cos, sin)
        v = self._heads(proj["v"], self.kv_heads)
        group = self.heads // self.kv_heads  # KV head j serves query heads group*j ...
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        mask = np.triu(np.full((seq, seq), -np.inf), 1)
        w = _softmax(q @ k.transpose(0, 2, 1) / np.sqrt(self.head_dim) + mask)
        ctx = (w @ v).transpose(1, 0, 2).reshape(seq, self.heads * self.head_dim)
        return ctx @ self._w(f"{p}self_attn.o_proj.weight").T

    def _mlp(self, p: str, h: np.ndarray) -> np.ndarray:
        gate = h @ self._w(f"{p}mlp.gate_proj.weight").T
        up = h @ self._w(f"{p}mlp.up_proj.weight").T
        return (_silu(gate) * up) @ self._w(f"{p}mlp.down_proj.weight").T

    def logits(self, token_ids: Sequence[int]) -> np.ndarray:
        """float64 logits ``[seq, vocab]`` at every position of ``token_ids``."""
        ids = np.asarray(token_ids, dtype=np.int64)
        embed = self._w("model.embed_tokens.weight")
        x = embed[ids]
        angles = rope_angles_f32(len(ids), self.head_dim, self.theta).astype(np.float64)
        both = np.concatenate([angles, angles], axis=-1)
        cos, sin = np.cos(both), np.sin(both)
        for i in range(self.layers):
            p = f"model.layers.{i}."
            x = x + self._attention(p, _rms_norm(x, self._w(p + "input_layernorm.weight"),
                                                 self.eps), cos, sin)
            x = x + self._mlp(p, _rms_norm(x, self._w(p + "post_attention_layernorm.weight"),
                                           self.eps))
        x = _rms_norm(x, self._w("model.norm.weight"), self.eps)
        head = embed if self.tied else self._w("lm_head.weight")
        return x @ head.T

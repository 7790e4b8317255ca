"""A hand-written NumPy Qwen2 engine: the benchmark's "careful person" peer.

What somebody writes without a compiler: float32 throughout, a preallocated KV
cache, every projection a BLAS call on a *transposed view* of the HF
``[out, in]`` weight (``x @ W.T`` hands OpenBLAS a transposed operand; no
weight is ever copied or re-laid out), attention as batched matmuls over the
KV groups (no ``repeat_kv`` copy), and in-place elementwise work where it
saves a temporary. Weights are read through ``Snapshot.f32`` (exact bf16 →
f32 widening), like every other engine.

It is a peer, not an oracle: ``test/py/bench/test_numpy_engine.py`` checks it
against transformers (greedy tokens identical, logits close on the tiny
synthetic snapshot). Its float32 operation order differs from the spec's
(BLAS blocking, ``1/sqrt`` applied once), so it agrees within rounding,
never bitwise.

Usage::

    engine = NumpyQwen2.from_snapshot(Snapshot.open(directory))
    cache = engine.new_cache(64)
    logits = engine.forward(prompt_ids, cache)        # [1, vocab]: last position
    logits = engine.forward([next_id], cache)         # one decode step
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.snapshot import Snapshot

F32 = np.float32


@dataclass
class NumpyCache:
    """Post-RoPE keys and values ``[layers, kv_heads, capacity, head_dim]``."""

    keys: np.ndarray
    values: np.ndarray
    length: int = 0

    @property
    def capacity(self) -> int:
        """Positions the cache can hold."""
        return int(self.keys.shape[2])


@dataclass(frozen=True)
class _Layer:
    """One decoder block's weights (HF layout, f32)."""

    input_norm: np.ndarray
    wq: np.ndarray
    bq: np.ndarray
    wk: np.ndarray
    bk: np.ndarray
    wv: np.ndarray
    bv: np.ndarray
    wo: np.ndarray
    post_norm: np.ndarray
    w_gate: np.ndarray
    w_up: np.ndarray
    w_down: np.ndarray


def rope_inverse_frequencies(head_dim: int, theta: float) -> np.ndarray:
    """``1 / theta ** (arange(0, d, 2) / d)`` in float32 (as transformers computes it)."""
    exponent = np.arange(0, head_dim, 2, dtype=F32) / F32(head_dim)
    return (F32(1.0) / np.power(F32(theta), exponent)).astype(F32)


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """``x / sqrt(mean(x²) + eps) * w`` row by row, float32."""
    ms = np.einsum("ij,ij->i", x, x) / F32(x.shape[-1])
    r = F32(1.0) / np.sqrt(ms + F32(eps))
    out = x * r[:, None]
    out *= weight
    return out


def _silu_mul(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """``silu(gate) * up`` in place in ``gate`` (``exp`` overflow gives -0, as it should)."""
    with np.errstate(over="ignore"):
        denom = np.exp(-gate)
    denom += F32(1.0)
    gate /= denom
    gate *= up
    return gate


class NumpyQwen2:
    """Qwen2 causal LM forward pass with a KV cache, in NumPy float32."""

    def __init__(self, config: Qwen2Config, weights: Mapping[str, np.ndarray]) -> None:
        """``weights`` maps HF tensor names to float32 arrays (C-contiguous)."""
        self.config = config

        def w(name: str) -> np.ndarray:
            arr = np.ascontiguousarray(weights[name], dtype=F32)
            return arr

        self.embed = w("model.embed_tokens.weight")
        self.lm_head = self.embed if config.tie_word_embeddings else w("lm_head.weight")
        self.norm = w("model.norm.weight")
        self.layers: list[_Layer] = []
        for i in range(config.num_hidden_layers):
            p = f"model.layers.{i}."
            self.layers.append(_Layer(
                input_norm=w(p + "input_layernorm.weight"),
                wq=w(p + "self_attn.q_proj.weight"), bq=w(p + "self_attn.q_proj.bias"),
                wk=w(p + "self_attn.k_proj.weight"), bk=w(p + "self_attn.k_proj.bias"),
                wv=w(p + "self_attn.v_proj.weight"), bv=w(p + "self_attn.v_proj.bias"),
                wo=w(p + "self_attn.o_proj.weight"),
                post_norm=w(p + "post_attention_layernorm.weight"),
                w_gate=w(p + "mlp.gate_proj.weight"), w_up=w(p + "mlp.up_proj.weight"),
                w_down=w(p + "mlp.down_proj.weight"),
            ))
        self.inv_freq = rope_inverse_frequencies(config.head_dim, config.rope_theta)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> NumpyQwen2:
        """Load every tensor of ``snapshot`` widened to float32 (``Snapshot.f32``)."""
        names = snapshot.expected_tensors()
        return cls(snapshot.config, {name: snapshot.f32(name) for name in names})

    @property
    def weight_bytes(self) -> int:
        """Bytes of float32 weights the engine holds (tied LM head counted once)."""
        arrays = [self.embed, self.norm] + [
            a for layer in self.layers for a in vars(layer).values()
        ]
        if self.lm_head is not self.embed:
            arrays.append(self.lm_head)
        return sum(a.nbytes for a in arrays)

    def new_cache(self, capacity: int) -> NumpyCache:
        """An empty KV cache for ``capacity`` positions."""
        cfg = self.config
        shape = (cfg.num_hidden_layers, cfg.num_key_value_heads, capacity, cfg.head_dim)
        return NumpyCache(np.zeros(shape, F32), np.zeros(shape, F32))

    def _rope_tables(self, start: int, seq: int) -> tuple[np.ndarray, np.ndarray]:
        """``cos``/``sin`` ``[seq, head_dim]`` for positions ``start .. start + seq - 1``."""
        positions = np.arange(start, start + seq, dtype=F32)
        angles = positions[:, None] * self.inv_freq[None, :]
        both = np.concatenate([angles, angles], axis=-1)
        return np.cos(both), np.sin(both)

    @staticmethod
    def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """``x * cos + rotate_half(x) * sin`` for ``x: [heads, seq, head_dim]``."""
        half = x.shape[-1] // 2
        rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        rotated *= sin
        out = x * cos
        out += rotated
        return out

    def _attention(self, layer: _Layer, h: np.ndarray, index: int, cache: NumpyCache,
                   cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """Self-attention of ``h: [seq, hidden]``; writes this step's K/V into the cache."""
        cfg = self.config
        seq, d = h.shape[0], cfg.head_dim
        nh, nkv, group = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.kv_group
        past, total = cache.length, cache.length + seq

        q = h @ layer.wq.T
        q += layer.bq
        k = h @ layer.wk.T
        k += layer.bk
        v = h @ layer.wv.T
        v += layer.bv
        q = self._rope(q.reshape(seq, nh, d).transpose(1, 0, 2), cos, sin)
        cache.keys[index, :, past:total] = self._rope(
            k.reshape(seq, nkv, d).transpose(1, 0, 2), cos, sin)
        cache.values[index, :, past:total] = v.reshape(seq, nkv, d).transpose(1, 0, 2)
        keys = cache.keys[index, :, :total]  # [nkv, total, d] views, no copy
        values = cache.values[index, :, :total]

        # Query heads g*j .. g*j + g - 1 share KV head j: stack them as rows.
        qg = q.reshape(nkv, group * seq, d)
        scores = qg @ keys.transpose(0, 2, 1)  # [nkv, group * seq, total]
        scores *= F32(d ** -0.5)
        if seq > 1:  # query i (position past + i) sees keys j <= past + i
            rows = np.arange(seq)[:, None] + past
            hidden = np.arange(total)[None, :] > rows
            scores.reshape(nkv, group, seq, total)[:, :, hidden] = -np.inf
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = scores @ values  # [nkv, group * seq, d] = [nh, seq, d]
        merged = context.reshape(nh, seq, d).transpose(1, 0, 2).reshape(seq, nh * d)
        return merged @ layer.wo.T

    def _mlp(self, layer: _Layer, h: np.ndarray) -> np.ndarray:
        """``down(silu(gate(h)) * up(h))``."""
        return _silu_mul(h @ layer.w_gate.T, h @ layer.w_up.T) @ layer.w_down.T

    def forward(self, token_ids: Sequence[int] | np.ndarray, cache: NumpyCache | None = None,
                *, all_logits: bool = False) -> np.ndarray:
        """Logits for ``token_ids`` following the cache's tokens; the cache is extended.

        Returns ``[1, vocab]`` (the last position) unless ``all_logits``.
        """
        ids = np.asarray(token_ids, dtype=np.int64).reshape(-1)
        if ids.size == 0:
            raise ValueError("forward needs at least one token")
        if cache is None:
            cache = self.new_cache(ids.size)
        if cache.length + ids.size > cache.capacity:
            raise ValueError(f"KV cache full: {cache.length} + {ids.size} tokens exceed its "
                             f"capacity {cache.capacity}")
        eps = self.config.rms_norm_eps
        cos, sin = self._rope_tables(cache.length, ids.size)
        x = self.embed[ids]  # [seq, hidden] (a copy: fancy indexing)
        for index, layer in enumerate(self.layers):
            x += self._attention(layer, _rms_norm(x, layer.input_norm, eps), index, cache,
                                 cos, sin)
            x += self._mlp(layer, _rms_norm(x, layer.post_norm, eps))
        cache.length += ids.size
        if not all_logits:
            x = x[-1:]
        return _rms_norm(x, self.norm, eps) @ self.lm_head.T

    def greedy(self, prompt_ids: Sequence[int], n_tokens: int) -> list[int]:
        """``n_tokens`` argmax tokens after the prompt, with the cache."""
        cache = self.new_cache(len(prompt_ids) + n_tokens)
        out: list[int] = []
        step: Sequence[int] = prompt_ids
        for _ in range(n_tokens):
            token = int(np.argmax(self.forward(step, cache)[-1]))
            out.append(token)
            step = [token]
        return out

"""``ModelWeights.load(dir)``: a snapshot's tensors widened to f32, in spec §7's fields."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

import numpy as np

from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.snapshot import Snapshot

# field -> the HF tensor name after "model.layers.{i}."
LAYER_TENSORS = {
    "input_layernorm": "input_layernorm.weight",
    "post_attention_layernorm": "post_attention_layernorm.weight",
    "q_proj_weight": "self_attn.q_proj.weight",
    "q_proj_bias": "self_attn.q_proj.bias",
    "k_proj_weight": "self_attn.k_proj.weight",
    "k_proj_bias": "self_attn.k_proj.bias",
    "v_proj_weight": "self_attn.v_proj.weight",
    "v_proj_bias": "self_attn.v_proj.bias",
    "o_proj_weight": "self_attn.o_proj.weight",
    "gate_proj_weight": "mlp.gate_proj.weight",
    "up_proj_weight": "mlp.up_proj.weight",
    "down_proj_weight": "mlp.down_proj.weight",
}


@dataclass(frozen=True)
class LayerWeights:
    """One decoder block, HF ``[out, in]`` layout, f32."""

    input_layernorm: np.ndarray
    post_attention_layernorm: np.ndarray
    q_proj_weight: np.ndarray
    q_proj_bias: np.ndarray
    k_proj_weight: np.ndarray
    k_proj_bias: np.ndarray
    v_proj_weight: np.ndarray
    v_proj_bias: np.ndarray
    o_proj_weight: np.ndarray
    gate_proj_weight: np.ndarray
    up_proj_weight: np.ndarray
    down_proj_weight: np.ndarray


@dataclass(frozen=True)
class ModelWeights:
    """Every tensor of a Qwen2 snapshot, widened exactly to f32 (``Snapshot.f32``)."""

    config: Qwen2Config
    embed_tokens: np.ndarray
    final_norm: np.ndarray
    tied: bool
    lm_head: np.ndarray  # the embedding itself when tied
    layers: list[LayerWeights]

    @classmethod
    def load(cls, model_dir: str | os.PathLike[str]) -> ModelWeights:
        """Read the snapshot in ``model_dir``."""
        snap = Snapshot.open(model_dir)
        cfg = snap.config

        def f32(name: str) -> np.ndarray:
            return np.ascontiguousarray(snap.f32(name), dtype=np.float32)

        embed = f32("model.embed_tokens.weight")
        layers = [LayerWeights(**{field: f32(f"model.layers.{i}.{name}")
                                  for field, name in LAYER_TENSORS.items()})
                  for i in range(cfg.num_hidden_layers)]
        tied = cfg.tie_word_embeddings
        return cls(cfg, embed, f32("model.norm.weight"), tied,
                   embed if tied else f32("lm_head.weight"), layers)

    def hf_tensors(self) -> dict[str, np.ndarray]:
        """The same arrays under their HF names (what ``NumpyQwen2`` takes)."""
        out = {"model.embed_tokens.weight": self.embed_tokens,
               "model.norm.weight": self.final_norm}
        if not self.tied:
            out["lm_head.weight"] = self.lm_head
        for i, layer in enumerate(self.layers):
            for f in fields(layer):
                out[f"model.layers.{i}.{LAYER_TENSORS[f.name]}"] = getattr(layer, f.name)
        return out

"""Qwen2 as a Graph dialect program (spec §2.3), from any Qwen2 ``config.json``.

One graph serves prefill (``past = 0``) and every decode step (``seq = 1``):

    inputs   token_ids   i64[seq]
             past_keys   f32[layers, kv_heads, past, head_dim]   (post-RoPE)
             past_values f32[layers, kv_heads, past, head_dim]
    outputs  logits      f32[seq, vocab]   ([1, vocab] with last_only)
             keys        f32[layers, kv_heads, seq, head_dim]    (new tokens only)
             values      f32[layers, kv_heads, seq, head_dim]

With ``kv = "state"`` (``Qwen2GraphOptions``) the KV cache is the program's
own state of ``capacity`` positions, and ``past`` is a scalar (the caller's
count of cached positions, not a shape):

    inputs   token_ids   i64[seq];  scalar past
             key_cache   f32[layers, kv_heads, capacity, head_dim]   (post-RoPE)
             value_cache f32[layers, kv_heads, capacity, head_dim]
    outputs  logits      f32[seq, vocab]   ([1, vocab] with last_only)
             key_cache, value_cache   (positions past .. past + seq written)

Each layer writes its new keys and values into the cache first
(``graph.update_slice`` at ``[layer, 0, past, 0]``: the compiled program does
it in place) and then attends over positions ``0 .. past + seq`` of the
cache: the same values in the same order as the concatenation of the inputs
form, so the same bits.

Weights are ``graph.weight`` nodes named as in the HF checkpoint. With tied
embeddings the LM head reads the embedding (one weight node, read twice);
untied configs get ``lm_head.weight``.

Weight formats (``Qwen2GraphOptions.weights``): ``"f32"`` declares every
weight f32 (the caller widens the snapshot's values); ``"bf16"`` declares
each weight bf16, as the snapshot stores it, followed by the exact
``graph.cast`` to f32, which fusion puts into the kernels that read it (they
load 2 bytes per element and widen in registers: the same f32 values, so the
same bits as the f32 format). Weights the snapshot stores otherwise (f32,
f16), named in ``wide``, stay f32 weights (widened by the caller).

int8 (spec §5) is not built here: the ``quantize-int8`` pass rewrites the
projections (and the embedding) of the graph built in either format
(``compiler.int8_pass``; the compiler runs it before fusion).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.frontend import composites as C
from nanocompile.frontend.tensor import GraphBuilder, Tensor, concat, gather, update_slice
from nanocompile.ir.symbolic import Expr, ExprLike

SEQ, PAST, CAPACITY = Expr.sym("seq"), Expr.sym("past"), Expr.sym("capacity")


WEIGHT_FORMATS = ("f32", "bf16")
KV_FORMS = ("inputs", "state")  # the KV cache as past/new tensors, or as the program's state


@dataclass(frozen=True)
class Qwen2GraphOptions:
    """What to build: how many layers (default: all), whether only the last
    position's logits are computed, the weights' format (``weights``:
    ``"f32"`` or ``"bf16"``; with bf16, the names in ``wide`` are f32
    weights: stored otherwise than bf16) and the KV cache's form (``kv``:
    ``"inputs"``, past keys in and new keys out, or ``"state"``, a cache of
    ``capacity`` positions updated in place)."""

    n_layers: int | None = None
    last_only: bool = False
    name: str = "qwen2"
    weights: str = "f32"
    wide: frozenset[str] = frozenset()
    kv: str = "inputs"

    def __post_init__(self) -> None:
        if self.kv not in KV_FORMS:
            raise ValueError(f"kv must be one of {', '.join(KV_FORMS)}, got {self.kv!r}")
        if self.weights not in WEIGHT_FORMATS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHT_FORMATS)}, "
                             f"got {self.weights!r}")

    def dtype(self, name: str) -> str:
        """The storage dtype of weight ``name`` in the graph."""
        return "bf16" if self.weights == "bf16" and name not in self.wide else "f32"


@dataclass
class _Context:
    gb: GraphBuilder
    cfg: Qwen2Config
    opts: Qwen2GraphOptions
    cos: Tensor
    sin: Tensor
    mask: Tensor
    past_keys: Tensor  # kv="state": the caches, updated layer by layer
    past_values: Tensor


def _w(ctx: _Context, name: str, *shape: int) -> Tensor:
    return weight(ctx.gb, ctx.opts, name, *shape)


def weight(gb: GraphBuilder, opts: Qwen2GraphOptions, name: str, *shape: int) -> Tensor:
    """Weight ``name`` as f32: a bf16 weight widened, or an f32 weight."""
    dtype = opts.dtype(name)
    w = gb.weight(name, list(shape), dtype)
    return w.cast("f32") if dtype != "f32" else w


def _attention(ctx: _Context, i: int, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    cfg, p = ctx.cfg, f"model.layers.{i}.self_attn"
    d, nh, nkv, hidden = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads, \
        cfg.hidden_size
    q = C.linear(h, _w(ctx, f"{p}.q_proj.weight", nh * d, hidden),
                 _w(ctx, f"{p}.q_proj.bias", nh * d))
    k = C.linear(h, _w(ctx, f"{p}.k_proj.weight", nkv * d, hidden),
                 _w(ctx, f"{p}.k_proj.bias", nkv * d))
    v = C.linear(h, _w(ctx, f"{p}.v_proj.weight", nkv * d, hidden),
                 _w(ctx, f"{p}.v_proj.bias", nkv * d))
    q = C.apply_rope(C.split_heads(q, nh, d), ctx.cos, ctx.sin)
    k = C.apply_rope(C.split_heads(k, nkv, d), ctx.cos, ctx.sin).named(f"k{i}")
    v = C.split_heads(v, nkv, d).named(f"v{i}")
    if ctx.opts.kv == "state":
        at: list[ExprLike] = [i, 0, PAST, 0]
        ctx.past_keys = update_slice(ctx.past_keys, k.reshape(1, nkv, SEQ, d), at)
        ctx.past_values = update_slice(ctx.past_values, v.reshape(1, nkv, SEQ, d), at)
        keys = ctx.past_keys.slice(0, i, i + 1).slice(2, 0, PAST + SEQ)
        values = ctx.past_values.slice(0, i, i + 1).slice(2, 0, PAST + SEQ)
        k_all = C.repeat_kv(keys.reshape(nkv, PAST + SEQ, d), cfg.kv_group)
        v_all = C.repeat_kv(values.reshape(nkv, PAST + SEQ, d), cfg.kv_group)
    else:
        old_k = ctx.past_keys.slice(0, i, i + 1).reshape(nkv, PAST, d)
        old_v = ctx.past_values.slice(0, i, i + 1).reshape(nkv, PAST, d)
        k_all = C.repeat_kv(concat([old_k, k], 1), cfg.kv_group)
        v_all = C.repeat_kv(concat([old_v, v], 1), cfg.kv_group)
    ctx_heads = C.attention(q, k_all, v_all, ctx.mask, scale=float(d) ** -0.5)
    out = C.merge_heads(ctx_heads) @ _w(ctx, f"{p}.o_proj.weight", hidden, nh * d).T
    return out, k, v


def _mlp(ctx: _Context, i: int, h: Tensor) -> Tensor:
    cfg, p = ctx.cfg, f"model.layers.{i}.mlp"
    hidden, inter = cfg.hidden_size, cfg.intermediate_size
    gate = C.linear(h, _w(ctx, f"{p}.gate_proj.weight", inter, hidden))
    up = C.linear(h, _w(ctx, f"{p}.up_proj.weight", inter, hidden))
    return C.linear(C.silu(gate) * up, _w(ctx, f"{p}.down_proj.weight", hidden, inter))


def _block(ctx: _Context, i: int, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    cfg, p = ctx.cfg, f"model.layers.{i}"
    eps = cfg.rms_norm_eps
    h = C.rms_norm(x, _w(ctx, f"{p}.input_layernorm.weight", cfg.hidden_size), eps)
    attn, k, v = _attention(ctx, i, h)
    x = x + attn
    h = C.rms_norm(x, _w(ctx, f"{p}.post_attention_layernorm.weight", cfg.hidden_size), eps)
    x = (x + _mlp(ctx, i, h)).named(f"x{i + 1}")
    return x, k, v


def build_qwen2(cfg: Qwen2Config, options: Qwen2GraphOptions | None = None) -> ModuleOp:
    """The Qwen2 forward pass with its KV cache as one ``graph.func``."""
    opts = options or Qwen2GraphOptions()
    layers = cfg.num_hidden_layers if opts.n_layers is None else opts.n_layers
    if not 0 < layers <= cfg.num_hidden_layers:
        raise ValueError(f"n_layers must be in [1, {cfg.num_hidden_layers}], got {layers}")
    d, nkv, hidden = cfg.head_dim, cfg.num_key_value_heads, cfg.hidden_size

    gb = GraphBuilder(opts.name)
    ids = gb.input("token_ids", "i64", [SEQ])
    if opts.kv == "state":
        gb.scalar("past")
        past_keys = gb.input("key_cache", "f32", [layers, nkv, CAPACITY, d])
        past_values = gb.input("value_cache", "f32", [layers, nkv, CAPACITY, d])
    else:
        past_keys = gb.input("past_keys", "f32", [layers, nkv, PAST, d])
        past_values = gb.input("past_values", "f32", [layers, nkv, PAST, d])
    embed = weight(gb, opts, "model.embed_tokens.weight", cfg.vocab_size, hidden)
    x = gather(embed, ids).named("x0")
    cos, sin = C.rope_tables(gb, SEQ, PAST, d, cfg.rope_theta)
    mask = C.causal_mask(gb, SEQ, PAST).named("mask")
    ctx = _Context(gb, cfg, opts, cos.named("cos"), sin.named("sin"), mask, past_keys, past_values)

    new_keys, new_values = [], []
    for i in range(layers):
        x, k, v = _block(ctx, i, x)
        new_keys.append(k.reshape(1, nkv, SEQ, d))
        new_values.append(v.reshape(1, nkv, SEQ, d))

    x = C.rms_norm(x, weight(gb, opts, "model.norm.weight", hidden), cfg.rms_norm_eps)
    if opts.last_only:
        x = x.slice(0, SEQ - 1, SEQ)
    head = embed if cfg.tie_word_embeddings else weight(
        gb, opts, "lm_head.weight", cfg.vocab_size, hidden)
    logits = (x @ head.T).named("logits")
    gb.output("logits", logits)
    if opts.kv == "state":
        gb.output("key_cache", ctx.past_keys)
        gb.output("value_cache", ctx.past_values)
    else:
        gb.output("keys", concat(new_keys, 0).named("keys"))
        gb.output("values", concat(new_values, 0).named("values"))
    return gb.finish_module()

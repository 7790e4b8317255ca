"""The nanoinfer oracle, through spec §7's interface facts and nothing else.

A nanoinfer checkout lives at ``$NANOINFER_PATH`` or ``../nanoinfer`` beside
this repository and is recognised by ``nanoinfer/model.py``; finding and
importing it is :mod:`bench.nanoinfer_engine`'s (one definition for the tests
and the bench). This module wraps what the differential tests call:

* :meth:`NanoinferOracle.open`: ``Qwen2.from_model_dir(dir)``, and lazily
  ``Tokenizer.from_model_dir(dir)`` and ``ModelWeights.load(dir)``;
* ``forward(ids, positions=None, last_only=False, cache=None)`` for logits,
  ``new_cache(capacity)``, ``next_token_logits(ids, cache)`` for greedy steps;
* :func:`pinned_blas_threads`: every BLAS pool of the process at one thread
  count (threadpoolctl), for the bitwise comparisons.

Two things the tests need are *not* in spec §7, and are assumed here (an
:class:`AdapterError` names what was found when the assumption fails):
``Tokenizer.encode(text)`` returns the token ids, and the cache holds its
keys and values as attributes (``keys``/``values``, ``k``/``v``,
``key_cache``/``value_cache`` or ``k_cache``/``v_cache``), each one array or a
per-layer list laid out ``[layers, kv_heads, positions, head_dim]`` or
``[layers, positions, kv_heads, head_dim]``.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from bench.nanoinfer_engine import import_nanoinfer, locate_checkout

REPO = Path(__file__).resolve().parents[3]  # the repository root (bench/ lives there)
STANDIN_ROOT = Path(__file__).resolve().parent / "standin"  # the test suite's stand-in
CACHE_ATTRIBUTES = (("keys", "values"), ("k", "v"), ("key_cache", "value_cache"),
                    ("k_cache", "v_cache"))
LAYER_FIELDS = {  # spec §7's layer field -> HF tensor name after "model.layers.{i}."
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


class AdapterError(RuntimeError):
    """nanoinfer answered in a form the adapter does not understand."""


class CheckoutMissing(LookupError):
    """No nanoinfer checkout: the message is the one-line skip reason."""


def find_checkout(environ: Mapping[str, str] | None = None) -> Path:
    """The checkout's root, or :class:`CheckoutMissing` with the one-line reason."""
    root, reason = locate_checkout(environ)
    if root is None:
        raise CheckoutMissing(reason)
    return root


def drop_imported_nanoinfer() -> None:
    """Forget every imported ``nanoinfer`` module (after a stand-in test)."""
    for name in [m for m in sys.modules if m == "nanoinfer" or m.startswith("nanoinfer.")]:
        del sys.modules[name]


@contextlib.contextmanager
def pinned_blas_threads(n: int) -> Iterator[None]:
    """Within the block every BLAS pool of the process uses ``n`` threads.

    Bitwise comparisons run both engines inside one such block: a BLAS
    result may depend on its thread count (how the work is split), never on
    which caller asked.
    """
    import threadpoolctl

    with threadpoolctl.threadpool_limits(limits=n, user_api="blas"):
        pools = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        if not pools:
            raise AdapterError("threadpoolctl finds no BLAS library: threads cannot be pinned")
        wrong = [p["filepath"] for p in pools if p["num_threads"] != n]
        if wrong:
            raise AdapterError(f"BLAS pools not at {n} threads: {', '.join(wrong)}")
        yield


def _f32(value: Any, what: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype != np.float32:
        raise AdapterError(f"nanoinfer's {what} is {arr.dtype}, not float32")
    return arr


def _cache_attributes(cache: Any) -> tuple[Any, Any]:
    for k_name, v_name in CACHE_ATTRIBUTES:
        if hasattr(cache, k_name) and hasattr(cache, v_name):
            return getattr(cache, k_name), getattr(cache, v_name)
    shown = sorted(a for a in dir(cache) if not a.startswith("_"))
    raise AdapterError(f"cannot find keys/values in nanoinfer's cache {type(cache).__name__} "
                       f"(attributes: {', '.join(shown)}); extend _adapter.CACHE_ATTRIBUTES")


def _layout(array: Any, length: int, heads: int, head_dim: int, what: str) -> np.ndarray:
    """``array`` as ``[layers, heads, length, head_dim]`` (a view when possible)."""
    if isinstance(array, list | tuple):
        array = np.stack([np.asarray(a) for a in array])
    arr = _f32(array, f"cache {what}")
    if arr.ndim == 4 and arr.shape[1] == heads and arr.shape[3] == head_dim:
        return arr[:, :, :length]
    if arr.ndim == 4 and arr.shape[2] == heads and arr.shape[3] == head_dim:
        return arr[:, :length].transpose(0, 2, 1, 3)
    raise AdapterError(f"nanoinfer's cache {what} has shape {arr.shape}: expected "
                       f"[layers, {heads}, positions, {head_dim}] or "
                       f"[layers, positions, {heads}, {head_dim}]")


@dataclass
class NanoinferOracle:
    """A nanoinfer checkout's model (and, lazily, tokenizer and weights) on one snapshot."""

    root: Path
    model_dir: Path
    modules: dict[str, ModuleType]  # "model", "tokenizer", "weights": nanoinfer's modules
    model: Any
    _tokenizer: Any = None

    @classmethod
    def open(cls, model_dir: Path, environ: Mapping[str, str] | None = None) -> NanoinferOracle:
        """Find and import the checkout, then ``Qwen2.from_model_dir(model_dir)``.

        The three modules are imported now, while the checkout is first on
        ``sys.path``, and kept (a later import could meet another checkout).
        """
        root = find_checkout(environ)
        modules = {"model": import_nanoinfer(root)}
        for name in ("tokenizer", "weights"):
            modules[name] = importlib.import_module(f"nanoinfer.{name}")
        model = modules["model"].Qwen2.from_model_dir(str(model_dir))
        return cls(root, Path(model_dir), modules, model)

    # -- tokenizer --------------------------------------------------------

    @property
    def tokenizer(self) -> Any:
        """``nanoinfer.tokenizer.Tokenizer.from_model_dir(model_dir)``, built once."""
        if self._tokenizer is None:
            tokenizer = self.modules["tokenizer"].Tokenizer
            self._tokenizer = tokenizer.from_model_dir(str(self.model_dir))
        return self._tokenizer

    def encode(self, text: str) -> list[int]:
        """nanoinfer's token ids of ``text``."""
        return [int(t) for t in np.asarray(self.tokenizer.encode(text)).reshape(-1)]

    # -- the model --------------------------------------------------------

    def new_cache(self, capacity: int) -> Any:
        """``Qwen2.new_cache(capacity)``."""
        return self.model.new_cache(capacity)

    def logits(self, ids: Sequence[int], cache: Any = None) -> np.ndarray:
        """``forward(ids, cache=cache)``: logits ``[seq, vocab]`` f32 of every position."""
        out = _f32(self.model.forward(list(ids), positions=None, last_only=False, cache=cache),
                   "forward() result")
        if out.ndim != 2 or out.shape[0] != len(ids):
            raise AdapterError(f"forward() of {len(ids)} tokens gave shape {out.shape}, "
                               "not [seq, vocab]")
        return out

    def greedy(self, ids: Sequence[int], n_tokens: int) -> list[int]:
        """``n_tokens`` argmax tokens after ``ids``, stepping ``next_token_logits`` with a cache."""
        cache = self.new_cache(len(ids) + n_tokens)
        out: list[int] = []
        step = list(ids)
        for _ in range(n_tokens):
            logits = _f32(self.model.next_token_logits(step, cache=cache), "next_token_logits")
            out.append(int(np.argmax(logits[-1] if logits.ndim == 2 else logits)))
            step = [out[-1]]
        return out

    @staticmethod
    def cache_arrays(cache: Any, length: int, kv_heads: int,
                     head_dim: int) -> tuple[np.ndarray, np.ndarray]:
        """The cache's first ``length`` positions, keys and values
        ``[layers, kv_heads, length, head_dim]`` (assumed layouts: module docstring)."""
        keys, values = _cache_attributes(cache)
        return (_layout(keys, length, kv_heads, head_dim, "keys"),
                _layout(values, length, kv_heads, head_dim, "values"))

    # -- weights ----------------------------------------------------------

    def weights(self) -> dict[str, np.ndarray]:
        """``ModelWeights.load(model_dir)`` under HF tensor names (as nanoinfer holds them:
        its orientation is not in spec §7)."""
        loaded = self.modules["weights"].ModelWeights.load(str(self.model_dir))
        out = {"model.embed_tokens.weight": np.asarray(loaded.embed_tokens),
               "model.norm.weight": np.asarray(loaded.final_norm)}
        if not loaded.tied:
            out["lm_head.weight"] = np.asarray(loaded.lm_head)
        for i, layer in enumerate(loaded.layers):
            for name, hf in LAYER_FIELDS.items():
                out[f"model.layers.{i}.{hf}"] = np.asarray(getattr(layer, name))
        return out


def standin_environ(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` with ``NANOINFER_PATH`` pointing at the test suite's stand-in."""
    env = dict(os.environ if base is None else base)
    env["NANOINFER_PATH"] = str(STANDIN_ROOT)
    return env

"""The Qwen2 model with bf16 weights (issue 17): the kernels read the
snapshot's bf16 tensors where they lie (read-only mapped, zero copies) and
widen them in registers, computing the bits of the f32 format (weights
widened at load).

Claims:

* ``SnapshotWeights(snap, "bf16")`` hands out the mapped file's bytes as
  read-only uint16 views (no copy, nothing widened); with ``"f32"`` the
  widened arrays;
* bf16 = f32 bit for bit: every position's logits of the prompt, each cached
  step's, and the KV cache, at 1, 2 and 3 threads, on every arch this CPU
  runs (tiny model; the full-size model in a slow test);
* a snapshot storing some tensors otherwise (an f32 norm, an f16 bias): those
  stay f32 weights (widened), the rest bf16, and the bits are the same.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from _arches import arch_params
from _prompts import prompt_ids

from nanocompile.backend.runtime import CompiledBackend, CompiledProgram
from nanocompile.checkpoint.safetensors import bf16_to_f32, write_safetensors
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import CompileOptions, Pipeline, compile_loop
from nanocompile.inference.engine import (
    Engine,
    F32Weights,
    SnapshotWeights,
    default_weights,
    wide_weights,
)
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.targets.arch import Arch

THREADS = (1, 2, 3)


def _program(snap: Snapshot, weights: str, arch: Arch, last_only: bool = False
             ) -> CompiledProgram:
    opts = Qwen2GraphOptions(last_only=last_only, weights=weights,
                             wide=wide_weights(snap) if weights == "bf16" else frozenset())
    graph = build_qwen2(snap.config, opts)
    kernels = Pipeline(graph, CompileOptions(arch=arch.name)).kernels
    return compile_loop(kernels, SnapshotWeights(snap, weights))


def _bitwise(directory: Path, arch: Arch, steps: list[int]) -> str:
    """bf16 = f32 bit for bit at each thread count; returns the bf16 C."""
    snap = Snapshot.open(directory)
    f32 = _program(snap, "f32", arch)
    bf16 = _program(snap, "bf16", arch)
    ids = prompt_ids(directory, "chat")
    chunks = [ids, *[[s] for s in steps]]
    for threads in THREADS:
        assert f32.set_threads(threads) == threads
        assert bf16.set_threads(threads) == threads
        e32, e16 = Engine(snap.config, CompiledBackend(f32)), Engine(snap.config,
                                                                     CompiledBackend(bf16))
        c32, c16 = e32.new_cache(len(ids) + len(steps)), e16.new_cache(len(ids) + len(steps))
        for i, chunk in enumerate(chunks):
            want, got = e32.forward(chunk, c32), e16.forward(chunk, c16)
            assert want.shape == (len(chunk), snap.config.vocab_size)  # every position
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32),
                                          err_msg=f"{arch.name}, step {i}, {threads} threads")
        n = c32.length
        assert c16.length == n == len(ids) + len(steps)
        for got_c, want_c in ((c16.keys, c32.keys), (c16.values, c32.values)):
            np.testing.assert_array_equal(got_c[:, :, :n].view(np.uint32),
                                          want_c[:, :, :n].view(np.uint32),
                                          err_msg=f"{arch.name} cache, {threads} threads")
    return bf16.source


def test_bf16_weights_are_the_mapped_bytes(tiny_snapshot: Path) -> None:
    snap = Snapshot.open(tiny_snapshot)
    assert default_weights(snap) == "bf16"
    assert wide_weights(snap) == frozenset()  # the synthetic snapshot is all bf16
    weights = SnapshotWeights(snap, "bf16")
    assert set(weights) == set(snap.expected_tensors())
    for name in weights:
        arr = weights[name]
        assert arr.dtype == np.uint16, name
        assert not arr.flags.writeable, name  # the read-only mapping itself
        assert not arr.flags.owndata, name
        raw = snap.raw(name)
        assert np.shares_memory(arr, raw), name  # no copy
        assert arr.shape == snap.expected_tensors()[name]
    assert weights.widened_bytes() == 0
    f32 = SnapshotWeights(snap, "f32")
    name = "model.norm.weight"
    np.testing.assert_array_equal(f32[name], F32Weights(snap)[name])
    assert f32[name].dtype == np.float32
    with pytest.raises(KeyError):
        weights["no.such.weight"]
    with pytest.raises(ValueError, match="weights must be one of f32, bf16, got 'f16'"):
        SnapshotWeights(snap, "f16")


def test_graph_declares_bf16_weights_widened() -> None:
    from nanocompile.checkpoint.config import Qwen2Config
    from nanocompile.checkpoint.synth import synthetic_config
    from nanocompile.dialects import graph as g

    cfg = Qwen2Config.from_dict(synthetic_config(tiny=True))
    wide = frozenset({"model.norm.weight"})
    module = build_qwen2(cfg, Qwen2GraphOptions(weights="bf16", wide=wide))
    weights = [op for op in module.walk() if isinstance(op, g.WeightOp)]
    for op in weights:
        dtype = op.result.type.dtype.data
        assert dtype == ("f32" if op.weight_name.data in wide else "bf16"), op.weight_name.data
        uses = [u.operation for u in op.result.uses]
        if dtype == "bf16":  # every use is the widening
            assert all(isinstance(u, g.CastOp) and u.result.type.dtype.data == "f32"
                       for u in uses), op.weight_name.data
    f32 = [op for op in build_qwen2(cfg, Qwen2GraphOptions()).walk()
           if isinstance(op, g.WeightOp)]
    assert [op.weight_name.data for op in f32] == [op.weight_name.data for op in weights]
    assert all(op.result.type.dtype.data == "f32" for op in f32)
    with pytest.raises(ValueError, match="weights must be one of f32, bf16, got 'int8'"):
        Qwen2GraphOptions(weights="int8")


def _host_and_scalar_quick() -> list[object]:
    """arch_params(), the archs other than the host's and scalar marked slow."""
    from nanocompile.targets.arch import host_arch

    quick = ("scalar", host_arch().name)
    return [p if p.values[0].name in quick
            else pytest.param(*p.values, id=p.id, marks=[*p.marks, pytest.mark.slow])
            for p in arch_params()]


# the non-slow suite's 3-minute budget; the full suite runs it: the host's arch
# and scalar in the quick suite (test_bf16_weights.py has every arch's bf16 kernels quickly)
@pytest.mark.parametrize("arch", _host_and_scalar_quick())
def test_tiny_model_bf16_is_bitwise_f32(tiny_snapshot: Path, arch: Arch) -> None:
    source = _bitwise(tiny_snapshot, arch, [11, 42])
    if arch.vector:
        assert "_cvtepu16_epi32(" in source  # the kernels widen in registers
    assert "uint16_t *const b" in source  # weights bound as bf16


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_tiny_last_only_bf16_is_bitwise_f32(tiny_snapshot: Path) -> None:
    """The generation graph (last position only), host arch."""
    from nanocompile.targets.arch import host_arch

    snap = Snapshot.open(tiny_snapshot)
    arch = host_arch()
    e32 = Engine(snap.config, CompiledBackend(_program(snap, "f32", arch, last_only=True)))
    e16 = Engine(snap.config, CompiledBackend(_program(snap, "bf16", arch, last_only=True)))
    ids = prompt_ids(tiny_snapshot, "fibonacci")
    assert e16.greedy(ids, 5) == e32.greedy(ids, 5)
    np.testing.assert_array_equal(e16.forward(ids).view(np.uint32),
                                  e32.forward(ids).view(np.uint32))


def _mixed_snapshot(source: Path, out: Path) -> tuple[Path, dict[str, str]]:
    """``source`` with the final norm stored as F32 and a q bias as F16 (the
    values exact in both: widened from the bf16 bits)."""
    shutil.copytree(source, out)
    snap = Snapshot.open(out)
    changed = {"model.norm.weight": "F32", "model.layers.0.self_attn.q_proj.bias": "F16"}
    tensors = {}
    for name in snap.names:
        raw = np.array(snap.raw(name))
        if name in changed:
            wide = bf16_to_f32(raw)
            raw = wide if changed[name] == "F32" else wide.astype(np.float16)
            assert np.array_equal(raw.astype(np.float32), wide), name  # exact in f16
        tensors[name] = (changed.get(name, snap.dtype(name)), raw)
    snap.close()
    write_safetensors(out / "model.safetensors", tensors)
    return out, changed


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
def test_snapshot_with_f32_and_f16_tensors(tiny_snapshot: Path, tmp_path: Path) -> None:
    """Tensors stored otherwise than bf16 stay f32 weights (widened); the rest
    are bf16; the logits are those of the f32 format."""
    from nanocompile.targets.arch import host_arch

    directory, changed = _mixed_snapshot(tiny_snapshot, tmp_path / "mixed")
    snap = Snapshot.open(directory)
    assert wide_weights(snap) == frozenset(changed)
    weights = SnapshotWeights(snap, "bf16")
    assert weights["model.norm.weight"].dtype == np.float32
    assert weights["model.layers.0.self_attn.q_proj.bias"].dtype == np.float32
    assert weights["model.layers.0.self_attn.k_proj.bias"].dtype == np.uint16
    arch = host_arch()
    e32 = Engine(snap.config, CompiledBackend(_program(snap, "f32", arch)))
    e16 = Engine(snap.config, CompiledBackend(_program(snap, "bf16", arch)))
    ids = prompt_ids(directory, "france")
    np.testing.assert_array_equal(e16.forward(ids).view(np.uint32),
                                  e32.forward(ids).view(np.uint32))
    # copies: the F16 bias widened; the F32 norm is the mapped view itself
    bias = "model.layers.0.self_attn.q_proj.bias"
    assert weights.widened_bytes() == 4 * int(np.prod(snap.shape(bias)))
    assert np.shares_memory(weights["model.norm.weight"], snap.raw("model.norm.weight"))


@pytest.mark.slow
@pytest.mark.parametrize("arch", arch_params())
def test_full_size_model_bf16_is_bitwise_f32(full_snapshot: Path, arch: Arch) -> None:
    """The full-size model: every position's logits of the prompt, a cached step
    and the cache, at 1, 2 and 3 threads."""
    _bitwise(full_snapshot, arch, [11])

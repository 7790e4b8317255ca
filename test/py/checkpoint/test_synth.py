"""The deterministic synthetic checkpoint (spec §1.2)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from _reference_config import REAL

from nanocompile.checkpoint import synth
from nanocompile.checkpoint.config import Qwen2Config
from nanocompile.checkpoint.safetensors import SafetensorsFile
from nanocompile.checkpoint.snapshot import Snapshot, expected_tensors
from nanocompile.checkpoint.synth import (
    NUM_TOKENS,
    synthetic_config,
    write_synthetic_snapshot,
)

GENERATED = ("config.json", "generation_config.json", "model.safetensors")

# SHA-256 of the tiny seed-0 model.safetensors. Pins the bytes across machines
# and NumPy versions; change it only together with SYNTH_VERSION.
TINY_SEED0_SHA256 = "109296c476340a61aa282155e932a3464b84cf7e6967051a251e262377bf4048"
FULL_SEED0_SHA256 = "15ca5e04b3431b5ee2b4118ec09c1b8312758780ed517cfc7238b2fbba8f589c"

# Spec §1.3 / §1.2 probes: "The capital of France is", "def fibonacci(n):", a ChatML
# prefix, and ids spread over the whole vocabulary.
PROBES = [
    [785, 6722, 315, 9625, 374],
    [750, 75698, 1445, 1648],
    [151644, 8948, 198, 2610, 525, 1207, 16948, 11, 3465, 553, 54364, 14817, 13, 151645,
     198, 151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198],
    [int(i) for i in np.random.default_rng(7).integers(0, NUM_TOKENS, 48)],
]  # fmt: skip


def _sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------
# determinism


def test_same_seed_byte_identical(tiny_snapshot: Path, tmp_path: Path) -> None:
    again = write_synthetic_snapshot(tmp_path, tiny=True, seed=0, tokenizer=False)
    for name in GENERATED:
        assert (again / name).read_bytes() == (tiny_snapshot / name).read_bytes(), name


def test_pinned_bytes(tiny_snapshot: Path) -> None:
    assert _sha(tiny_snapshot / "model.safetensors") == TINY_SEED0_SHA256


def test_other_seed_changes_every_tensor(tiny_snapshot: Path, tmp_path: Path) -> None:
    other = write_synthetic_snapshot(tmp_path, tiny=True, seed=1, tokenizer=False)
    assert (other / "config.json").read_bytes() == (tiny_snapshot / "config.json").read_bytes()
    with SafetensorsFile.open(tiny_snapshot / "model.safetensors") as a, SafetensorsFile.open(
        other / "model.safetensors"
    ) as b:
        assert a.names == b.names
        for name in a.names:
            assert not np.array_equal(a.raw(name), b.raw(name)), name


def test_tensors_independent_of_order_and_chunking(
    tiny_snapshot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Generating one tensor alone, in small chunks, gives the stored bytes."""
    monkeypatch.setattr(synth, "CHUNK_ELEMENTS", 1000)
    config = Qwen2Config.from_dict(synthetic_config(tiny=True))
    generator = synth._Generator(config, seed=0)
    with SafetensorsFile.open(tiny_snapshot / "model.safetensors") as f:
        for name in ("model.layers.1.mlp.up_proj.weight", "model.embed_tokens.weight"):
            alone = np.concatenate([c.ravel() for c in generator.chunks(name, f.shape(name))])
            np.testing.assert_array_equal(alone, f.raw(name).ravel())


# --------------------------------------------------------------------------
# layout and files


def test_full_config_is_the_real_one() -> None:
    assert synthetic_config() == REAL


def test_full_size_parameter_budget() -> None:
    shapes = expected_tensors(Qwen2Config.from_dict(synthetic_config()))
    assert len(shapes) == 290
    assert sum(int(np.prod(s)) for s in shapes.values()) == 494_032_768


def test_tiny_snapshot_layout(tiny_snapshot: Path) -> None:
    config = json.loads((tiny_snapshot / "config.json").read_text())
    assert config == REAL | {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_window_layers": 2,
    }
    with Snapshot.open(tiny_snapshot) as snap:
        assert snap.config.head_dim == 16
        assert list(snap.files) == ["model.safetensors"]
        assert snap.files["model.safetensors"].metadata == {"format": "pt"}
        assert snap.names == sorted(snap.expected_tensors())
        assert {snap.dtype(n) for n in snap.names} == {"BF16"}


def test_generation_config(tiny_snapshot: Path) -> None:
    gen = json.loads((tiny_snapshot / "generation_config.json").read_text())
    assert gen["bos_token_id"] == 151643
    assert gen["eos_token_id"] == [151645, 151643]
    assert gen["pad_token_id"] == 151643
    assert gen["do_sample"] is True
    assert (gen["temperature"], gen["top_k"], gen["top_p"]) == (0.7, 20, 0.8)
    assert gen["repetition_penalty"] == 1.1


def test_tokenizer_files_written(tiny_snapshot: Path) -> None:
    assert (tiny_snapshot / "tokenizer.json").is_file()
    config = json.loads((tiny_snapshot / "tokenizer_config.json").read_text())
    assert "chat_template" in config


def test_progress_reports_every_step(tmp_path: Path) -> None:
    calls: list[tuple[str, int, int]] = []
    write_synthetic_snapshot(
        tmp_path, tiny=True, tokenizer=False, progress=lambda *a: calls.append(a)
    )
    n_tensors = len(expected_tensors(Qwen2Config.from_dict(synthetic_config(tiny=True))))
    assert [done for _, done, _ in calls] == list(range(1, n_tensors + 3))
    assert {total for _, _, total in calls} == {n_tensors + 2}
    assert sum("model.safetensors:" in what for what, _, _ in calls) == n_tensors


# --------------------------------------------------------------------------
# the values


def test_normal_draws() -> None:
    z = synth._Stream(0, "probe").normal(1 << 20)
    assert z.dtype == np.float32
    assert abs(float(z.mean())) < 0.005
    assert abs(float(z.std()) - 1) < 0.005
    assert float(np.abs(z).max()) <= np.sqrt(12) + 1e-6  # Irwin-Hall(4) bound


def test_tiny_weight_statistics(tiny_snapshot: Path) -> None:
    with Snapshot.open(tiny_snapshot) as snap:
        for name in snap.names:
            assert np.isfinite(snap.f32(name)).all(), name
        embed = snap.f32("model.embed_tokens.weight")
        norms = np.linalg.norm(embed, axis=1)
        real, padding = norms[:NUM_TOKENS], norms[NUM_TOKENS:]
        assert padding.max() < 0.2 * np.median(real)  # padding rows never win
        assert np.percentile(real, 99) > 2 * np.percentile(real, 50)  # row-norm spread
        for layer in range(2):
            ln = snap.f32(f"model.layers.{layer}.input_layernorm.weight")
            assert 0.9 < ln.mean() < 1.1
            assert 0.05 < ln.std() < 0.3
            k_bias = snap.f32(f"model.layers.{layer}.self_attn.k_proj.bias")
            assert np.abs(k_bias).max() > 10 * np.median(np.abs(k_bias))  # a few large channels
        assert 2.5 < snap.f32("model.norm.weight").mean() < 3.5


# --------------------------------------------------------------------------
# transformers reads the same bytes


def _hf_probe(directory: Path) -> dict[str, np.ndarray]:
    """Load with transformers; forward the probes; per-position logit stats."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.Qwen2ForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    stds, margins, rms = [], [], []
    with torch.no_grad():
        for ids in PROBES:
            out = model(torch.tensor([ids]), output_hidden_states=True)
            hidden = [h[0].numpy() for h in out.hidden_states[:-1]]  # last is post-norm
            assert all(np.isfinite(h).all() for h in hidden)
            rms.append([float(np.sqrt(np.mean(h * h))) for h in hidden])
            logits = out.logits[0].numpy()
            assert np.isfinite(logits).all()
            top2 = np.sort(logits, axis=1)[:, -2:]
            stds.extend(logits.std(axis=1))
            margins.extend(top2[:, 1] - top2[:, 0])
    return {"std": np.array(stds), "margin": np.array(margins), "rms": np.mean(rms, axis=0)}


def _report(stats: dict[str, np.ndarray]) -> str:
    q = np.percentile(stats["margin"], [5, 10, 25, 50, 75, 90])
    return (
        f"logit std min {stats['std'].min():.2f} median {np.median(stats['std']):.2f}; "
        f"top1-top2 margin p5/10/25/50/75/90 {np.round(q, 3).tolist()}; "
        f"margin > 0.1: {np.mean(stats['margin'] > 0.1):.1%}"
    )


@pytest.mark.oracle
def test_transformers_loads_tiny_bitwise(tiny_snapshot: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = transformers.Qwen2ForCausalLM.from_pretrained(tiny_snapshot, dtype=torch.float32)
    state = model.state_dict()
    with Snapshot.open(tiny_snapshot) as snap:
        for name in snap.names:
            np.testing.assert_array_equal(state[name].numpy(), snap.f32(name), err_msg=name)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


@pytest.mark.oracle
def test_tiny_logits_spread(tiny_snapshot: Path) -> None:
    stats = _hf_probe(tiny_snapshot)
    print(_report(stats))
    assert stats["std"].min() >= 1
    assert np.mean(stats["margin"] > 0.1) >= 0.8
    assert stats["rms"][-1] > 2 * stats["rms"][0]


@pytest.mark.slow
@pytest.mark.oracle
def test_full_size_forward_finite_growing_and_spread(full_snapshot: Path) -> None:
    assert _sha(full_snapshot / "model.safetensors") == FULL_SEED0_SHA256
    with Snapshot.open(full_snapshot) as snap:
        assert len(snap.names) == 290
        assert snap.nbytes() > 494_032_768 * 2
    stats = _hf_probe(full_snapshot)
    print(_report(stats))
    print("residual rms by layer", np.round(stats["rms"], 3).tolist())
    assert stats["std"].min() >= 1
    assert np.mean(stats["margin"] > 0.1) >= 0.8
    assert np.median(stats["margin"]) > 0.5
    steps = np.diff(stats["rms"])
    assert (steps > 0).sum() >= 20  # grows along the residual stream
    assert stats["rms"][-1] > 20 * stats["rms"][0]

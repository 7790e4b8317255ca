"""bench/engines.py: the engine list, the bf16 engines, their descriptions and work.

``c-bf16`` is the scheduled C program of the bf16-weight graph bound to the
snapshot's mapped bf16 tensors; its work counters are its own IR's. The
expected byte difference from the f32 program is derived here from the
snapshot's tensor shapes (every weight element read at 2 bytes instead of 4:
all of them once per decode step, the tied embedding whole for the LM head,
plus the one embedding row the gather reads), not from the counter.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]

from bench import engines  # noqa: E402
from bench.engines import ENGINES, EngineUnavailable, Shared  # noqa: E402
from nanocompile.checkpoint.safetensors import SafetensorsFile  # noqa: E402
from nanocompile.checkpoint.snapshot import Snapshot  # noqa: E402
from nanocompile.targets.arch import host_arch  # noqa: E402


def test_the_bf16_engines_are_listed_beside_their_f32_peers() -> None:
    names = engines.ALL_ENGINE_NAMES
    assert names.index("c-bf16") == names.index("c-phase4") + 1
    assert names.index("llama-bf16") == names.index("llama-f32") + 1
    assert tuple(ENGINES) == names
    assert {"c-bf16", "llama-bf16"} <= set(engines.ENGINE_NAMES)  # in a default run
    assert ENGINES["c-bf16"].work_is_own is True
    assert ENGINES["llama-bf16"].work_is_own is False


def test_descriptions_name_the_weights_and_the_arch_used() -> None:
    arch = host_arch().name
    f32, bf16 = ENGINES["c-phase4"].description, ENGINES["c-bf16"].description
    for text in (f32, bf16):
        assert f"{arch} register tiles" in text or (arch == "scalar" and "scalar" in text)
        assert "no packed weight copies" in text
        assert "packed weights" not in text
    assert "f32 weights widened at load" in f32
    assert "bf16 weights" in bf16
    assert "BF16 GGUF" in ENGINES["llama-bf16"].description


def _weight_elements(snapshot_dir: Path) -> int:
    total = 0
    with SafetensorsFile.open(snapshot_dir / "model.safetensors") as st:
        for name in st.names:
            assert st.dtype(name) == "BF16", name  # the synthetic snapshot: all bf16
            total += int(np.prod(st.shape(name)))
    return total


def test_bf16_work_is_its_own_ir_with_half_the_weight_bytes(tiny_snapshot: Path) -> None:
    shared = Shared(Snapshot.open(tiny_snapshot))
    f32 = ENGINES["c-phase4"].work(shared)
    bf16 = ENGINES["c-bf16"].work(shared)
    assert (f32.program, bf16.program) == ("fused", "fused-bf16")
    assert ENGINES["llama-bf16"].work(shared) is bf16
    assert bf16.launches == f32.launches
    hidden = shared.config.hidden_size
    for past in (0, 16):
        saved = f32.decode_bytes(past) - bf16.decode_bytes(past)
        assert saved == 2 * _weight_elements(tiny_snapshot) + 2 * hidden, past


def test_c_bf16_binds_the_mapped_bf16_tensors(tiny_snapshot: Path) -> None:
    """Built, c-bf16 widened nothing and generates c-phase4's greedy tokens (the same bits)."""
    shared = Shared(Snapshot.open(tiny_snapshot))
    bf16 = ENGINES["c-bf16"].build(shared)
    assert shared.bf16_weights.widened_bytes() == 0
    view = shared.bf16_weights["model.layers.0.mlp.up_proj.weight"]
    assert view.dtype == np.uint16
    assert not view.flags.writeable
    f32 = ENGINES["c-phase4"].build(shared)
    facts = bf16.details()  # type: ignore[attr-defined]
    assert facts == {"arch": host_arch().name, "weights": "bf16"}
    assert f32.details()["weights"] == "f32"  # type: ignore[attr-defined]
    from bench.run import timed_generation

    ids = engines.prompt_ids(shared.config, 6)
    assert timed_generation(bf16, ids, 6).tokens == timed_generation(f32, ids, 6).tokens


def test_bf16_engines_need_a_bf16_snapshot(tiny_snapshot: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = Snapshot.open(tiny_snapshot)
    monkeypatch.setattr(snapshot, "dtype", lambda name: "F32")  # as if it stored f32
    shared = Shared(snapshot)
    with pytest.raises(EngineUnavailable, match="stores no tensor in bf16"):
        ENGINES["c-bf16"].build(shared)
    with pytest.raises(EngineUnavailable, match="stores no tensor in bf16"):
        ENGINES["c-bf16"].work(shared)


def test_c_int8_is_listed_with_its_own_work(tiny_snapshot: Path) -> None:
    """c-int8 follows c-bf16; its bytes are its own IR's: per int8 matrix 1 byte per
    weight and 4 per row scale instead of bf16's 2 per weight (derived here from the
    shapes), the lookup's row in int8 plus its scale, and the MLP's three kernels."""
    names = engines.ALL_ENGINE_NAMES
    assert names.index("c-int8") == names.index("c-bf16") + 1
    assert "c-int8" in engines.ENGINE_NAMES
    assert ENGINES["c-int8"].work_is_own is True
    assert "kernel A (W8A32)" in ENGINES["c-int8"].description
    shared = Shared(Snapshot.open(tiny_snapshot))
    bf16, int8 = ENGINES["c-bf16"].work(shared), ENGINES["c-int8"].work(shared)
    assert int8.program == "fused-int8"
    cfg = shared.config
    shapes = [shared.snapshot.shape(f"model.layers.{i}.{p}.weight")
              for i in range(cfg.num_hidden_layers)
              for p in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                        "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")]
    shapes.append((cfg.vocab_size, cfg.hidden_size))  # the int8 embedding, as the LM head
    # kernel A's gate and up are two kernels and its SiLU a third (fuse.py's
    # _exp_apart): per layer the gate and up kernels each read x (4 H bytes,
    # once in bf16's shared k loop) and store their sums (4 I each), which the
    # SiLU kernel reads back (8 I)
    apart = cfg.num_hidden_layers * (4 * cfg.hidden_size + 16 * cfg.intermediate_size)
    for past in (0, 16):
        saved = bf16.decode_bytes(past) - int8.decode_bytes(past)
        assert saved == sum(n * k - 4 * n for n, k in shapes) + cfg.hidden_size - 4 - apart, past


@pytest.mark.slow  # two compiles of the tiny int8 model (~4 s): the 3-minute budget
def test_c_int8_binds_the_cached_int8_weights(tiny_snapshot: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Built, c-int8 reads the int8 cache of NANOCOMPILE_HOME and generates the greedy
    tokens of the API's int8 model (the same program)."""
    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path))
    shared = Shared(Snapshot.open(tiny_snapshot), log=lambda line: None)
    model = ENGINES["c-int8"].build(shared)
    facts = model.details()  # type: ignore[attr-defined]
    assert facts["weights"] == "int8"
    assert facts["quantize"] == engines.INT8_PASS
    assert facts["int8_quantized_at_build"] == 2 * 7 + 1
    q = shared.int8_weights["model.layers.0.mlp.up_proj.weight.int8"]
    assert q.dtype == np.int8
    assert not q.flags.writeable  # mapped from the cache
    from bench.run import timed_generation
    from nanocompile.api import load

    ids = engines.prompt_ids(shared.config, 6)
    api = load(tiny_snapshot, weights="int8")
    assert timed_generation(model, ids, 6).tokens == api.engine.greedy(ids, 6)

"""The Python API (``nanocompile.api``) and the generation loop, on the tiny model.

Independent checks: greedy generation against ``Engine.greedy`` (plain argmax,
cached and uncached), the two backends against each other, streamed pieces
against ``Tokenizer.decode``, stop tokens forced through a backend wrapper,
the work report against ``count_work`` on a separately built graph.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from nanocompile import api
from nanocompile.analysis.work import count_work
from nanocompile.api import Model, load
from nanocompile.backend.runtime import CompiledBackend
from nanocompile.checkpoint.snapshot import Snapshot
from nanocompile.compiler import lower_to_loop, optimize_graph
from nanocompile.inference.engine import Engine
from nanocompile.inference.generate import ContextLengthError, generate_tokens
from nanocompile.inference.sampling import Sampler, SamplingParams
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2
from nanocompile.tokenizer.chat import render_chat
from nanocompile.tokenizer.tokenizer import byte_to_unicode

DOCS = Path(__file__).resolve().parents[2] / "docs" / "usage.md"
PROMPTS = ("The capital of France is", "def fibonacci(n):", "日本の首都は")
HOT = SamplingParams(temperature=3.0, seed=7)  # hot enough to vary on the tiny model


@pytest.fixture(scope="module")
def c_model(tiny_snapshot: Path) -> Model:
    return load(tiny_snapshot, backend="c")


@pytest.fixture(scope="module")
def interp_model(tiny_snapshot: Path) -> Model:
    return load(tiny_snapshot, backend="interpreter")


class Forcing:
    """A backend wrapper that makes ``token`` the top logit on forward call ``at``."""

    def __init__(self, inner: object, token: int, at: int) -> None:
        self.inner, self.token, self.at = inner, token, at
        self.calls: list[np.ndarray] = []

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = self.inner.run(inputs)  # type: ignore[attr-defined]
        self.calls.append(np.array(inputs["token_ids"]))
        if len(self.calls) == self.at:
            out["logits"] = out["logits"].copy()
            out["logits"][-1, self.token] = out["logits"][-1].max() + 100
        return out


# --------------------------------------------------------------------------
# the README example


README = DOCS.parents[1] / "README.md"


def _tested_block(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    found = re.search(r"<!-- This block is run by .*?-->\n```python\n(.*?)```", text, re.S)
    assert found, f"no tested python block in {path}"
    return found.group(1)


def readme_example() -> str:
    """The README's example; docs/usage.md carries the same block."""
    block = _tested_block(README)
    assert _tested_block(DOCS) == block, "README.md and docs/usage.md examples differ"
    return block


def test_readme_example(tiny_snapshot: Path, monkeypatch: pytest.MonkeyPatch,
                        capsys: pytest.CaptureFixture[str]) -> None:
    # The example's load() is the embedded default; here it is the tiny model.
    monkeypatch.setattr(api, "ensure_default_snapshot", lambda progress=None: tiny_snapshot)
    exec(compile(readme_example(), str(DOCS), "exec"), {})
    out = capsys.readouterr().out
    assert re.search(r"^32 tokens, prefill [\d.]+ s, decode [\d.]+ tok/s, stop: max_tokens$",
                     out, re.M), out
    assert re.search(r"^\(\d+, 151936\) \d+ kernel launches per decode step$", out, re.M)
    assert "loop.kernel" in out


# --------------------------------------------------------------------------
# generation


def test_fixed_seed_reproduces_text(c_model: Model) -> None:
    a = c_model.generate(PROMPTS[0], max_tokens=24, sampling=HOT)
    b = c_model.generate(PROMPTS[0], max_tokens=24, sampling=HOT)
    other = c_model.generate(PROMPTS[0], max_tokens=24,
                             sampling=SamplingParams(temperature=3.0, seed=8))
    assert a.token_ids == b.token_ids
    assert a.text == b.text
    assert other.token_ids != a.token_ids  # the seed matters, so the check above can fail


def test_a_sampler_carries_its_state_across_calls(c_model: Model) -> None:
    sampler = Sampler(HOT)
    first = c_model.generate(PROMPTS[0], max_tokens=12, sampling=sampler)
    second = c_model.generate(PROMPTS[0], max_tokens=12, sampling=sampler)
    assert first.token_ids == c_model.generate(PROMPTS[0], max_tokens=12,
                                               sampling=HOT).token_ids
    assert second.token_ids != first.token_ids


@pytest.mark.parametrize("prompt", PROMPTS)
def test_temperature_zero_equals_greedy(c_model: Model, prompt: str) -> None:
    ids = c_model.tokenizer.encode(prompt)
    n = 12
    argmax = c_model.engine.greedy(ids, n)
    assert argmax == c_model.engine.greedy(ids, n, cached=False)
    zero = SamplingParams(temperature=0.0, top_k=3, top_p=0.5, seed=123)
    for sampling in (None, zero):
        result = c_model.generate(prompt, max_tokens=n, sampling=sampling, stop_at_eos=False)
        assert result.token_ids == argmax


def test_backends_give_the_same_greedy_tokens(c_model: Model, interp_model: Model) -> None:
    for prompt in PROMPTS:
        c = c_model.generate(prompt, max_tokens=16, stop_at_eos=False)
        i = interp_model.generate(prompt, max_tokens=16, stop_at_eos=False)
        assert c.token_ids == i.token_ids, prompt
        assert c.text == i.text


def test_result_fields(c_model: Model) -> None:
    result = c_model.generate(PROMPTS[1], max_tokens=10)
    assert result.prompt_tokens == len(c_model.tokenizer.encode(PROMPTS[1]))
    assert len(result.token_ids) == 10
    assert result.stop_reason == "max_tokens"
    assert result.decode_steps == 9
    assert result.prefill_seconds > 0
    assert result.decode_seconds > 0
    assert result.decode_tok_per_s == pytest.approx(9 / result.decode_seconds)


def test_streamed_pieces_are_the_decoded_text(c_model: Model) -> None:
    pieces: list[str] = []
    result = c_model.generate(PROMPTS[2], max_tokens=40, sampling=HOT, on_token=pieces.append)
    assert "".join(pieces) == result.text == c_model.tokenizer.decode(result.token_ids)
    assert all(pieces)
    assert any(ord(ch) > 0x7F for ch in result.text)  # the check covers multi-byte text


def test_a_character_split_across_tokens_streams_whole(c_model: Model) -> None:
    tok = c_model.tokenizer
    script = [tok.id_of(byte_to_unicode()[b]) for b in "é中".encode()] + [tok.id_of("!")]

    class Scripted:
        """Logits whose argmax is the next scripted token; empty KV rows."""

        def __init__(self) -> None:
            self.step = 0

        def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            cfg = c_model.config
            seq = inputs["token_ids"].shape[0]
            logits = np.zeros((1, cfg.vocab_size), np.float32)
            logits[0, script[self.step]] = 1
            self.step += 1
            kv = np.zeros((cfg.num_hidden_layers, cfg.num_key_value_heads, seq, cfg.head_dim),
                          np.float32)
            return {"logits": logits, "keys": kv, "values": kv}

    pieces: list[str] = []
    result = generate_tokens(Engine(c_model.config, Scripted()), tok, [1, 2], max_tokens=6,
                             sampler=Sampler(SamplingParams(temperature=0)),
                             context=100, on_token=pieces.append)
    assert pieces == ["é", "中", "!"]
    assert result.token_ids == script
    assert result.text == "é中!"


def test_repetition_penalty_reaches_the_sampler(c_model: Model) -> None:
    penalized = SamplingParams(temperature=0.0, repetition_penalty=1e6)
    ids = c_model.tokenizer.encode(PROMPTS[0])
    out = c_model.generate(PROMPTS[0], max_tokens=10, sampling=penalized).token_ids
    assert len(set(out)) == len(out)
    assert not set(out) & set(ids)
    plain = c_model.generate(PROMPTS[0], max_tokens=10).token_ids
    assert len(set(plain)) < len(plain)  # without it the tiny model repeats itself


# --------------------------------------------------------------------------
# stop tokens and chat


def test_chat_stops_at_im_end(interp_model: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = interp_model.tokenizer
    im_end = tok.id_of("<|im_end|>")
    forcing = Forcing(interp_model.engine.backend, im_end, at=3)
    monkeypatch.setattr(interp_model.engine, "backend", forcing)
    messages = [{"role": "user", "content": "Hello!"}]
    result = interp_model.chat(messages, max_tokens=10)
    assert result.stop_reason == "stop_token"
    assert len(result.token_ids) == 2
    assert "<|im_end|>" not in result.text
    prompt = tok.encode(render_chat(messages, add_generation_prompt=True,
                                    snapshot_dir=interp_model.path))
    assert forcing.calls[0].tolist() == prompt
    assert tok.decode(prompt).endswith("<|im_start|>assistant\n")
    assert result.prompt_tokens == len(prompt)


def test_plain_generation_does_not_stop_at_im_end(interp_model: Model,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    im_end = interp_model.tokenizer.id_of("<|im_end|>")
    monkeypatch.setattr(interp_model.engine, "backend",
                        Forcing(interp_model.engine.backend, im_end, at=2))
    result = interp_model.generate("Hello", max_tokens=5)
    assert result.stop_reason == "max_tokens"
    assert result.token_ids[1] == im_end
    assert "<|im_end|>" in result.text


def test_plain_generation_stops_at_endoftext(interp_model: Model,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    eot = interp_model.tokenizer.id_of("<|endoftext|>")
    forcing = Forcing(interp_model.engine.backend, eot, at=2)
    monkeypatch.setattr(interp_model.engine, "backend", forcing)
    result = interp_model.generate("Hello", max_tokens=5)
    assert result.stop_reason == "stop_token"
    assert len(result.token_ids) == 1
    forcing.calls.clear()
    ignored = interp_model.generate("Hello", max_tokens=5, stop_at_eos=False)
    assert ignored.token_ids[1] == eot
    assert len(ignored.token_ids) == 5


def test_chat_flag_of_generate_is_one_user_turn(interp_model: Model) -> None:
    a = interp_model.generate("Hi there", chat=True, max_tokens=6)
    b = interp_model.chat([{"role": "user", "content": "Hi there"}], max_tokens=6)
    assert (a.token_ids, a.text, a.prompt_tokens, a.stop_reason) == \
        (b.token_ids, b.text, b.prompt_tokens, b.stop_reason)


# --------------------------------------------------------------------------
# context and argument errors


@pytest.mark.parametrize("ids", [[1.5], ["3"], [True], [np.float64(2.0)], [None], [7, "x"]],
                         ids=repr)
def test_generate_ids_takes_integers_only(interp_model: Model, ids: list[object]) -> None:
    """Issue 14, point 9: ``int(i)`` accepted 1.5 (as 1) and "3" (as 3)."""
    with pytest.raises(ValueError, match="token ids must be integers"):
        interp_model.generate_ids(ids, max_tokens=1)  # type: ignore[arg-type]


def test_generate_ids_takes_numpy_integers(interp_model: Model) -> None:
    ids = interp_model.tokenizer.encode("Hello")
    want = interp_model.generate_ids(ids, max_tokens=2)
    assert interp_model.generate_ids(np.array(ids, np.int32), max_tokens=2).token_ids == (
        want.token_ids)


@pytest.mark.parametrize("threads", [-1, 257, 1000, True, 2.0])
def test_set_threads_rejects_counts_outside_the_range(c_model: Model, threads: object) -> None:
    """Issue 14, point 9: -1 and 1000 were silently ignored."""
    backend = c_model.engine.backend
    assert isinstance(backend, CompiledBackend)
    before = backend.program.threads()
    with pytest.raises(ValueError, match=re.escape("expected a thread count in 0..256 "
                                                   "(0: the default)")):
        backend.program.set_threads(threads)  # type: ignore[arg-type]
    assert backend.program.threads() == before
    assert backend.program.set_threads(1) == 1
    backend.program.set_threads(0)  # the default again


def test_prompt_longer_than_the_context(tiny_snapshot: Path) -> None:
    model = load(tiny_snapshot, backend="interpreter", context=8)
    with pytest.raises(ContextLengthError, match="prompt has 8 tokens but the context holds 8"):
        model.generate_ids(list(range(8)), max_tokens=4)
    result = model.generate_ids(list(range(6)), max_tokens=4)
    assert len(result.token_ids) == 2
    assert result.stop_reason == "context"
    with pytest.raises(ContextLengthError):
        model.logits(np.zeros(model.config.max_position_embeddings + 1, np.int64))


def test_prompt_longer_than_max_position_embeddings(interp_model: Model) -> None:
    n = interp_model.config.max_position_embeddings
    with pytest.raises(ContextLengthError, match=f"holds {n}"):
        interp_model.generate_ids([0] * n, max_tokens=1)


@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda m: m.generate("x", max_tokens=0), ValueError, "max_tokens"),
    (lambda m: m.generate("", max_tokens=2), ValueError, "prompt is empty"),
    (lambda m: m.generate("x", sampling={"temperature": 1}), TypeError, "sampling"),
    (lambda m: m.generate(b"x"), TypeError, "prompt must be a str"),
    (lambda m: m.generate_ids([-1]), ValueError, "outside the vocabulary"),
    (lambda m: m.logits([]), ValueError, "non-empty"),
    (lambda m: m.logits([151936]), ValueError, "must be in"),
    (lambda m: m.logits([0.5]), ValueError, "integers"),
    (lambda m: m.ir("bogus"), ValueError, "stage must be one of"),
])
def test_bad_arguments(interp_model: Model, call, error: type, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=message):
        call(interp_model)


def test_bad_load_options(tiny_snapshot: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="backend must be one of"):
        load(tiny_snapshot, backend="gpu")
    with pytest.raises(ValueError, match="context must be"):
        load(tiny_snapshot, backend="interpreter", context=1)
    with pytest.raises(ValueError, match="does not exist"):
        load(tmp_path / "absent")


# --------------------------------------------------------------------------
# logits, IR, compile report


def test_logits_all_positions_match_the_interpreter(c_model: Model,
                                                    interp_model: Model) -> None:
    ids = c_model.tokenizer.encode(PROMPTS[1])
    ours = c_model.logits(ids)
    ref = interp_model.logits(ids)
    assert ours.shape == ref.shape == (len(ids), c_model.config.vocab_size)
    assert np.abs(ours - ref).max() <= 1e-5 * np.abs(ref).max()
    last = c_model.engine.forward(ids)
    assert last.shape == (1, c_model.config.vocab_size)
    assert np.abs(last[0] - ours[-1]).max() <= 1e-5 * np.abs(ref).max()


def test_ir_stages(c_model: Model) -> None:
    graph, fused, loop_ir, c = (c_model.ir(s, n_layers=1)
                                for s in ("graph", "fused", "loop", "c"))
    graph_op = re.compile(r"^\s*(%\S+ = )?\"?graph\.", re.M)
    assert "graph.func @qwen2" in graph
    assert "graph.fused" not in graph
    assert "model.layers.0." in graph
    assert "model.layers.1." not in graph
    assert "graph.fused" in fused
    assert "loop.program" in loop_ir
    assert graph_op.search(loop_ir) is None
    assert "nc_run_qwen2" in c
    assert "#include" in c
    assert "model.layers.1." in c_model.ir("graph")


def test_compile_report(c_model: Model, tiny_snapshot: Path) -> None:
    report = c_model.compile_report()
    cfg = Snapshot.open(tiny_snapshot).config
    graph = build_qwen2(cfg, Qwen2GraphOptions(last_only=True, weights="bf16",
                                               kv="state"))  # the default
    work = count_work(lower_to_loop(optimize_graph(graph)))
    assert report["launches_per_step"] == work.launches
    assert work.launches < count_work(lower_to_loop(graph)).launches  # fused: fewer kernels
    assert report["distinct_kernels"] == work.distinct_kernels
    assert report["bytes_per_step"] == str(work.bytes_moved)
    assert report["bytes_per_decode_step"] == work.bytes_moved.evaluate({"past": 0, "seq": 1})
    assert Path(report["library"]).is_file()
    assert report["compile_seconds"] > 0
    stages = report["compile_stages"]
    assert list(stages) == ["lower", "schedule", "emit", "gcc", "load", "weights"]
    assert report["compile_seconds"] == pytest.approx(sum(stages.values()))
    assert isinstance(report["cache_hit"], bool)
    again = load(tiny_snapshot, backend="c").compile_report()
    assert again["cache_hit"] is True
    assert again["library"] == report["library"]


def test_interpreter_report_has_no_compile_fields(interp_model: Model,
                                                  c_model: Model) -> None:
    report = interp_model.compile_report()
    compiled = c_model.compile_report()
    for key in ("launches_per_step", "distinct_kernels", "bytes_per_step"):
        assert report[key] == compiled[key]
    assert report["library"] is None
    assert report["compile_seconds"] is None


# --------------------------------------------------------------------------
# the default model's directory (with a fake, fast generator)


def test_home_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    monkeypatch.delenv("NANOCOMPILE_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert api.default_model_dir() == tmp_path / "h/.cache/nanocompile" / api.DEFAULT_NAME
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert api.home_dir() == tmp_path / "x/nanocompile"
    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path / "n"))
    assert api.home_dir() == tmp_path / "n"
    assert api.DEFAULT_NAME == "synthetic-qwen2.5-0.5b-seed0"


def test_default_snapshot_is_generated_once_and_atomically(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path))
    calls: list[Path] = []

    def fake_writer(out: Path, *, seed: int, progress) -> Path:  # type: ignore[no-untyped-def]
        calls.append(out)
        assert out.parent == tmp_path
        assert out.name.startswith(".")
        (out / "config.json").write_text("{}")
        progress("tensor", 1, 2)
        if len(calls) == 2:
            raise OSError("disk full")
        progress("tensor", 2, 2)
        return out

    monkeypatch.setattr(api, "write_synthetic_snapshot", fake_writer)
    events: list[tuple[str, int, int]] = []
    target = api.ensure_default_snapshot(lambda *e: events.append(e))
    assert target == tmp_path / api.DEFAULT_NAME
    assert (target / "config.json").is_file()
    assert [e[1:] for e in events] == [(1, 2), (2, 2)]
    assert "synthetic" in events[0][0]
    assert api.ensure_default_snapshot() == target
    assert len(calls) == 1
    marker = target / api.MARKER
    marker.write_text(json.dumps({"synth_version": "v0"}))  # an older generator's output
    with pytest.raises(OSError, match="disk full"):
        api.ensure_default_snapshot()
    assert [p.name for p in tmp_path.iterdir()] == [api.DEFAULT_NAME]  # no staging left
    api.ensure_default_snapshot()
    assert len(calls) == 3
    assert json.loads(marker.read_text())["synthetic"] is True



def test_stale_snapshot_staging_is_removed(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    """A ~1 GB staging directory left by a generator killed with SIGKILL (its pid is
    gone), or older than any generation, is removed by the next run, even one that
    finds the snapshot already in place; a young one of a live process stays."""
    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path))
    target = tmp_path / api.DEFAULT_NAME
    target.mkdir()
    (target / api.MARKER).write_text(json.dumps(api._marker()))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead = tmp_path / f".{api.DEFAULT_NAME}.{child.pid}-k1"
    old = tmp_path / f".{api.DEFAULT_NAME}.abc123"  # the name before pids were in it
    live = tmp_path / f".{api.DEFAULT_NAME}.{os.getpid()}-k2"
    for d in (dead, old, live):
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"partial")
    os.utime(old, (time.time() - api.STAGING_MAX_AGE - 60,) * 2)
    assert api.ensure_default_snapshot() == target
    assert not dead.exists()
    assert not old.exists()
    assert live.exists()

def test_import_nanocompile_stays_light() -> None:
    code = ("import sys, nanocompile; assert 'xdsl' not in sys.modules; "
            "from nanocompile import api; "
            "assert nanocompile.load is api.load and nanocompile.Model is api.Model; "
            "assert 'load' in dir(nanocompile)")
    subprocess.run([sys.executable, "-c", code], check=True)

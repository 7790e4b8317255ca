"""The int8 weight format for the user (issue 18): ``load(..., weights="int8")``,
``int8_embedding=False``, the CLI's ``--weights int8`` / ``--f32-embedding``, the
compile report, and the int8 weights quantized at load and kept on disk.

Claims:

* the int8 cache (``checkpoint.snapshot.Int8Cache``) holds spec §5's int8
  format of each matrix, equal to the tests' own ``_int8_reference.quantize_rows``
  of the exactly widened values; the second load quantizes nothing and hands
  out read-only views of the mapped files; a damaged entry (a flipped bit, a
  truncated file, garbage, another tensor's file, a directory in its place)
  is quantized again, never a crash; a changed snapshot gets another entry; a
  cache that cannot be written costs only time; the same int8 weights come
  from a snapshot storing bf16 or f32;
* an int8 model loads and generates on both backends, the same tokens and
  logits bit for bit (the interpreter runs the int8 graph exactly);
* the report's bytes per step are ``count_work`` of a separately quantized
  graph (the pass applied directly), and they differ from bf16's by exactly
  the bytes int8 saves (1 byte per weight instead of 2, plus 4 per row
  scale); ``int8_embedding=False`` reads the embedding's bf16 bits instead;
* the first quantization shows on the progress reporter, the second load does not;
* bad values are one-line errors (API ``ValueError``; CLI one stderr line, no
  traceback).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _int8_reference import quantize_rows

from nanocompile.analysis.work import count_work
from nanocompile.api import Int8Weights, Model, int8_cache_dir, load
from nanocompile.backend import program_cache
from nanocompile.checkpoint.safetensors import write_safetensors
from nanocompile.checkpoint.snapshot import QUANTIZING, Int8Cache, Snapshot, entry_group
from nanocompile.compiler import int8_pass, lower_to_loop, optimize_graph
from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
               "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
EMBED = "model.embed_tokens.weight"


def matrices(snap: Snapshot, embedding: bool = True) -> list[str]:
    """The tensors spec §5 makes int8: the seven projections of every layer and,
    with ``embedding``, the tied embedding (written here from the spec)."""
    names = [f"model.layers.{i}.{p}.weight" for i in range(snap.config.num_hidden_layers)
             for p in PROJECTIONS]
    return [*names, EMBED] if embedding else names


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh nanocompile home (so a fresh int8 cache) for one test."""
    monkeypatch.setenv("NANOCOMPILE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


# --------------------------------------------------------------------------
# the int8 cache


def test_cache_holds_spec_quantization_and_maps_it_the_second_time(
        tiny_snapshot: Path, tmp_path: Path) -> None:
    snap = Snapshot.open(tiny_snapshot)
    names = matrices(snap)
    seen: list[tuple[str, int, int]] = []
    first = Int8Cache(snap, tmp_path).load(names, lambda *a: seen.append(a))
    assert set(first) == set(names)
    assert {what for what, _, _ in seen} == {QUANTIZING}
    assert seen[-1][1:] == (len(names), len(names))
    for name in names:
        want_q, want_scale = quantize_rows(snap.f32(name))  # the tests' own spec §5
        q, scale = first[name]
        assert (q.dtype, scale.dtype) == (np.int8, np.float32), name
        np.testing.assert_array_equal(q, want_q, err_msg=name)
        np.testing.assert_array_equal(scale.view(np.uint32), want_scale.view(np.uint32),
                                      err_msg=name)
    again = Int8Cache(snap, tmp_path)
    quiet: list[object] = []
    second = again.load(names, lambda *a: quiet.append(a))
    assert (again.quantized, quiet) == (0, [])
    for name in names:
        q, scale = second[name]
        assert not q.flags.writeable, name  # the mapped file
        assert not q.flags.owndata, name
        assert q.ctypes.data % 64 == 0, name  # the int8 rows start on a cache line
        np.testing.assert_array_equal(q, first[name][0])
        np.testing.assert_array_equal(scale, first[name][1])
    # a file per decoder layer, the embedding alone
    layers = sorted({".".join(n.split(".")[:3]) for n in names if n.startswith("model.layers.")})
    assert len(layers) == 2
    assert sorted(p.name for p in again.directory.iterdir()) == \
        sorted(f"{g}.safetensors" for g in [*layers, "model.embed_tokens.weight"])
    for name in names:
        assert again.path(name).name == f"{entry_group(name)}.safetensors"
        assert second[name][1].ctypes.data % 64 == 0, name  # the scales too


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-7])


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a safetensors file")


def _directory(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _stale_metadata(path: Path) -> None:  # a valid file whose data does not match its hash
    from nanocompile.checkpoint.safetensors import SafetensorsFile

    with SafetensorsFile.open(path) as f:
        tensors = {n: (f.dtype(n), np.array(f.raw(n))) for n in f.names}
        meta = dict(f.metadata)
    q = tensors[min(n for n in tensors if n.endswith(".int8"))][1]
    q[0, 0] = -q[0, 0] if q[0, 0] else 1
    write_safetensors(path, tensors, meta, data_alignment=64)


@pytest.mark.parametrize("damage", [_flip_last_byte, _truncate, _garbage, _directory,
                                    _stale_metadata, "other"])
def test_damaged_entry_is_quantized_again(tiny_snapshot: Path, tmp_path: Path,
                                          damage: object) -> None:
    snap = Snapshot.open(tiny_snapshot)
    layers = matrices(snap, embedding=False)
    names = layers[:3] + layers[-1:]  # q, k, v of layer 0 (one entry), and a layer-1 matrix
    assert len({entry_group(n) for n in names}) == 2
    cache = Int8Cache(snap, tmp_path)
    good = {n: (np.array(q), np.array(s)) for n, (q, s) in cache.load(names).items()}
    victim = cache.path(names[0])
    if damage == "other":  # another layer's (valid) entry in this one's place
        shutil.copyfile(cache.path(names[-1]), victim)
    else:
        assert callable(damage)
        damage(victim)
    again = Int8Cache(snap, tmp_path)
    got = again.load(names)
    assert again.quantized == 3  # the damaged entry's matrices, not the other layer's
    for name in names:
        np.testing.assert_array_equal(got[name][0], good[name][0], err_msg=name)
        np.testing.assert_array_equal(got[name][1], good[name][1], err_msg=name)
    assert victim.is_file()
    third = Int8Cache(snap, tmp_path)
    third.load(names)
    assert third.quantized == 0  # rebuilt for good


def test_changed_snapshot_gets_another_entry(tiny_snapshot: Path, tmp_path: Path) -> None:
    changed = tmp_path / "changed"
    shutil.copytree(tiny_snapshot, changed)
    name = matrices(Snapshot.open(changed))[0]
    with Snapshot.open(changed) as snap:
        tensors = {n: (snap.dtype(n), np.array(snap.raw(n))) for n in snap.names}
    tensors[name][1][0, 0] ^= 0x0100  # one bit of one bf16 weight
    original = Int8Cache(Snapshot.open(tiny_snapshot), tmp_path / "cache")
    same = Int8Cache(Snapshot.open(tiny_snapshot), tmp_path / "cache")
    assert same.directory == original.directory  # the memoized content hash
    write_safetensors(changed / "model.safetensors", tensors)
    other = Int8Cache(Snapshot.open(changed), tmp_path / "cache")
    assert other.directory != original.directory


def test_unwritable_cache_and_bad_memo_still_quantize(tiny_snapshot: Path,
                                                      tmp_path: Path) -> None:
    """A cache root that cannot be created (a file in its path) costs only the next
    load; a damaged content-hash memo is hashed again."""
    snap = Snapshot.open(tiny_snapshot)
    names = matrices(snap, embedding=False)[:2]
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = Int8Cache(snap, blocker / "int8")
    got = cache.load(names)
    assert cache.quantized == 2
    np.testing.assert_array_equal(got[names[0]][0], quantize_rows(snap.f32(names[0]))[0])
    good = Int8Cache(snap, tmp_path / "cache")
    memos = list((tmp_path / "cache" / "snapshots").iterdir())
    assert len(memos) == 1
    for damage in (b"{", b'{"stamp": [], "sha256": "x"}', b"[]"):
        memos[0].write_bytes(damage)
        assert Int8Cache(snap, tmp_path / "cache").directory == good.directory


# --------------------------------------------------------------------------
# the model


@pytest.fixture(scope="module")
def int8_models(tiny_snapshot: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> dict[str, Model]:
    """The tiny model as int8 (both backends), int8 without the int8 embedding, and bf16."""
    mp = pytest.MonkeyPatch()
    mp.setenv("NANOCOMPILE_HOME", str(tmp_path_factory.mktemp("int8-home")))
    try:
        return {"c": load(tiny_snapshot, weights="int8", last_only=False),
                "interpreter": load(tiny_snapshot, weights="int8", backend="interpreter"),
                "f32-embedding": load(tiny_snapshot, weights="int8", int8_embedding=False,
                                      last_only=False),
                "bf16": load(tiny_snapshot, last_only=False)}
    finally:
        mp.undo()


def test_int8_generates_the_same_on_both_backends(int8_models: dict[str, Model]) -> None:
    """Greedy text of the C and of the interpreter (the int8 graph run exactly: the
    logits' bits are compared position by position in models/test_int8_model.py)."""
    c, interp = int8_models["c"], int8_models["interpreter"]
    assert (c.weights, c.int8_embedding, c.graph_weights) == ("int8", True, "bf16")
    assert "weights='int8', int8_embedding=True" in repr(c)
    ids = c.tokenizer.encode("The capital of France is")
    assert not np.array_equal(c.logits(ids), int8_models["bf16"].logits(ids))  # quantized
    text = c.generate("def fibonacci(n):", max_tokens=4, stop_at_eos=False)
    assert len(text.token_ids) == 4
    assert interp.generate("def fibonacci(n):", max_tokens=4, stop_at_eos=False).token_ids == \
        text.token_ids


def _separately_quantized_work(snap: Snapshot, embedding: str, last_only: bool) -> object:
    """count_work of the bf16 graph after QuantizeInt8Pass applied directly."""
    from xdsl.context import Context

    from nanocompile.passes.quantize_int8 import QuantizeInt8Pass

    graph = build_qwen2(snap.config, Qwen2GraphOptions(last_only=last_only, weights="bf16",
                                                       kv="state"))
    QuantizeInt8Pass(kernel="a", embedding=embedding).apply(Context(), graph)
    return count_work(lower_to_loop(optimize_graph(graph))).bytes_moved


@pytest.mark.slow  # the non-slow suite's 3-minute budget; the full suite runs it
@pytest.mark.parametrize("key", ["c", "f32-embedding"])  # ~2 s each
def test_report_counts_the_int8_program(int8_models: dict[str, Model], tiny_snapshot: Path,
                                        key: str) -> None:
    snap = Snapshot.open(tiny_snapshot)
    hidden = snap.config.hidden_size
    bf16 = int8_models["bf16"].compile_report()
    embedding = key == "c"
    r = int8_models[key].compile_report()
    assert (r["weights"], r["int8_kernel"], r["int8_embedding"]) == ("int8", "a", embedding)
    names = matrices(snap, embedding)
    assert r["int8_matrices"] == len(names)
    shapes = [snap.shape(n) for n in names]
    assert r["int8_weight_bytes"] == sum(n * k + 4 * n for n, k in shapes)
    assert (r["widened_weights"], r["widened_weight_bytes"]) == (0, 0)
    # the fixture loads "c" first, into an empty int8 cache; then every matrix is there
    assert r["int8_quantized"] == (len(names) if embedding else 0)
    assert (r["int8_quantize_seconds"] > 0) == embedding
    moved = _separately_quantized_work(snap, "int8" if embedding else "f32",
                                       int8_models[key].last_only)
    assert r["bytes_per_step"] == str(moved)
    # per matrix read once: 1 byte per weight and 4 per row scale instead of 2 per
    # weight; the lookup reads one embedding row (and its scale) per token
    saved = sum(n * k - 4 * n for n, k in shapes)
    if embedding:  # the lookup's row: int8 and one scale instead of bf16
        saved += hidden - 4
    # kernel A's gate, up and SiLU are three kernels (bf16's SwiGLU one): per layer
    # x is read by both projections (4 H more) and their sums stored and read back
    # (4 I + 4 I, then 8 I)
    cfg = snap.config
    saved -= cfg.num_hidden_layers * (4 * hidden + 16 * cfg.intermediate_size)
    assert bf16["bytes_per_decode_step"] - r["bytes_per_decode_step"] == saved


def test_embedding_switch_changes_the_weights_read(int8_models: dict[str, Model]) -> None:
    with_int8 = int8_models["c"]._compiled(last_only=False).program
    without = int8_models["f32-embedding"]._compiled(last_only=False).program
    assert with_int8 is not None
    assert without is not None
    read = {n for n, _ in with_int8.signature.weights}
    read_f32 = {n for n, _ in without.signature.weights}
    assert {f"{EMBED}.int8", f"{EMBED}.scale"} <= read
    assert EMBED not in read
    assert EMBED in read_f32
    assert not {n for n in read_f32 if n.startswith(EMBED + ".")}
    assert read - read_f32 == {f"{EMBED}.int8", f"{EMBED}.scale"}
    ids = int8_models["c"].tokenizer.encode("Hello")
    assert not np.array_equal(int8_models["c"].logits(ids),
                              int8_models["f32-embedding"].logits(ids))


def test_weights_are_the_cached_quantization(int8_models: dict[str, Model],
                                             tiny_snapshot: Path) -> None:
    weights = int8_models["c"]._weights
    assert isinstance(weights, Int8Weights)
    snap = Snapshot.open(tiny_snapshot)
    name = "model.layers.1.mlp.down_proj.weight"
    want_q, want_scale = quantize_rows(snap.f32(name))
    np.testing.assert_array_equal(weights[f"{name}.int8"], want_q)
    np.testing.assert_array_equal(weights[f"{name}.scale"], want_scale)
    assert name not in set(weights)  # the bf16 matrix is not a weight of the program
    assert weights["model.norm.weight"].dtype == np.uint16  # the rest: mapped bf16


def test_second_load_uses_the_cache_and_says_nothing(tiny_snapshot: Path, home: Path) -> None:
    # the steps as reported to the progress callback: StderrProgress prints a step's
    # summary only when its timer thread showed the step before it ended, a race on a
    # step as short as the tiny model's quantization (delay 0 does not remove it)
    first_steps: list[tuple[str, int, int]] = []
    first = load(tiny_snapshot, weights="int8", backend="interpreter",
                 progress=lambda what, done, total: first_steps.append((what, done, total)))
    assert isinstance(first._weights, Int8Weights)
    assert first._weights.quantized == len(first._weights.tensors) == 15
    quantizing = [(done, total) for what, done, total in first_steps if what == QUANTIZING]
    assert quantizing
    assert quantizing[-1] == (15, 15)
    assert int8_cache_dir().is_relative_to(home)
    entries = sorted(int8_cache_dir().glob("*/*.safetensors"))
    assert len(entries) == 3  # a file per decoder layer and the embedding's
    written = [p.stat().st_mtime_ns for p in entries]
    second_steps: list[tuple[str, int, int]] = []
    second = load(tiny_snapshot, weights="int8", backend="interpreter",
                  progress=lambda what, done, total: second_steps.append((what, done, total)))
    assert QUANTIZING not in {what for what, _, _ in second_steps}
    assert isinstance(second._weights, Int8Weights)
    assert second._weights.quantized == 0
    assert [p.stat().st_mtime_ns for p in entries] == written  # read, not rewritten


@pytest.mark.slow  # a snapshot rewritten and two loads (~2 s): the 3-minute budget
def test_int8_of_an_f32_snapshot_is_the_same(tiny_snapshot: Path, tmp_path: Path,
                                             home: Path) -> None:
    """The matrices are quantized from their exact f32 values, however stored: the tiny
    snapshot rewritten as F32 gives the same int8 weights (its other weights: f32)."""
    f32_dir = tmp_path / "f32"
    shutil.copytree(tiny_snapshot, f32_dir)
    with Snapshot.open(f32_dir) as snap:
        tensors = {name: ("F32", np.array(snap.f32(name))) for name in snap.names}
    write_safetensors(f32_dir / "model.safetensors", tensors)
    wide = load(f32_dir, weights="int8", backend="interpreter")
    assert wide.graph_weights == "f32"
    bf16 = load(tiny_snapshot, weights="int8", backend="interpreter")
    a, b = wide._weights, bf16._weights
    assert isinstance(a, Int8Weights)
    assert isinstance(b, Int8Weights)
    assert a.sources == b.sources
    for name in a.sources:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert a["model.norm.weight"].dtype == np.float32


# --------------------------------------------------------------------------
# options and errors


def test_int8_pass_text_and_program_key() -> None:
    from bench.engines import INT8_PASS

    assert int8_pass() == INT8_PASS == "quantize-int8{kernel=a embedding=int8}"
    assert int8_pass(embedding=False) == "quantize-int8{kernel=a embedding=f32}"
    assert int8_pass(kernel="b") == "quantize-int8{kernel=b embedding=int8}"
    assert int8_pass(kernel="b", head="a") == "quantize-int8{kernel=b embedding=int8}"
    assert int8_pass(kernel="b", head="b") == "quantize-int8{kernel=b embedding=int8 head=b}"
    with pytest.raises(ValueError, match="quantize-int8: expected kernel a or b, got 'c'"):
        int8_pass(kernel="c")
    for bad in ({"head": "b"}, {"kernel": "b", "embedding": False, "head": "b"}):
        with pytest.raises(ValueError, match=r"quantize-int8: head=b \(the LM head kernel B\) "
                                             r"needs kernel=b and embedding=int8"):
            int8_pass(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="quantize-int8: expected head a or b, got 'c'"):
        int8_pass(kernel="b", head="c")
    base = {"graph_text": "g", "fuse": True, "schedule": True, "arch": "a"}
    keys = {program_cache.program_key(**base, quantize=q)  # type: ignore[arg-type]
            for q in ("", int8_pass(), int8_pass(embedding=False), int8_pass(kernel="b"),
                      int8_pass(kernel="b", head="b"))}
    assert len(keys) == 5


@pytest.mark.parametrize(("options", "message"), [
    ({"weights": "int4"}, r"weights must be one of f32, bf16, int8, int8-dot \(or None: the "
                          r"snapshot's\), got 'int4'"),
    ({"weights": "int8", "int8_embedding": "no"},
     r"int8_embedding must be True or False, got 'no'"),
    ({"weights": "bf16", "int8_embedding": False},
     r"int8_embedding=False needs weights='int8' or 'int8-dot', got weights='bf16'"),
    ({"int8_embedding": False},
     r"int8_embedding=False needs weights='int8' or 'int8-dot', got weights=None"),
    ({"weights": "int8", "int8_dot_head": True},
     r"int8_dot_head=True needs weights='int8-dot', got weights='int8'"),
    ({"weights": "int8-dot", "int8_dot_head": 1},
     r"int8_dot_head must be True or False, got 1"),
    ({"weights": "int8-dot", "int8_dot_head": True, "int8_embedding": False},
     r"int8_dot_head=True needs the int8 embedding \(int8_embedding=True\): with "
     r"int8_embedding=False the LM head is not int8"),
])
def test_bad_options_are_value_errors(tiny_snapshot: Path, options: dict[str, object],
                                      message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        load(tiny_snapshot, backend="interpreter", **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("int8-env")
    out = dict(os.environ)
    out.update(NANOCOMPILE_CACHE_DIR=str(root / "kernels"), NANOCOMPILE_HOME=str(root / "home"))
    out.pop("NANOCOMPILE_TRACEBACK", None)
    return out


def run(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nanocompile.cli", *map(str, args)],
                          capture_output=True, text=True, encoding="utf-8", env=env,
                          timeout=600)


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--weights", "int4"], 2, "argument --weights: invalid choice: 'int4'"),
    (["--f32-embedding"], 1, "--f32-embedding needs --weights int8 or int8-dot, got --weights "
                             "(the snapshot default)"),
    (["--weights", "bf16", "--f32-embedding"], 1,
     "--f32-embedding needs --weights int8 or int8-dot, got --weights bf16"),
    (["--weights", "int8", "--int8-dot-head"], 1,
     "--int8-dot-head needs --weights int8-dot, got --weights int8"),
    (["--int8-dot-head"], 1,
     "--int8-dot-head needs --weights int8-dot, got --weights (the snapshot default)"),
    (["--weights", "int8-dot", "--int8-dot-head", "--f32-embedding"], 1,
     "--int8-dot-head and --f32-embedding exclude each other"),
])
def test_cli_bad_int8_flags_are_one_line(tiny_snapshot: Path, args: list[str], code: int,
                                         message: str, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process (``cli.main``; the subprocess tests of the other flags show the same
    path ends the process with this one line): argparse's errors are printed, ours are
    the exit message."""
    from nanocompile import cli

    monkeypatch.delenv("NANOCOMPILE_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as exc:
        cli.main(["compile", "--model", str(tiny_snapshot), *args])
    printed = capsys.readouterr()
    lines = (printed.err if code == 2 else str(exc.value.code)).splitlines()
    assert exc.value.code == code if code == 2 else isinstance(exc.value.code, str)
    assert len(lines) == 1, lines
    assert lines[0].startswith("nanocompile: error: ")
    assert message in lines[0]
    assert printed.out == ""


@pytest.mark.slow  # three CLI runs that load the tiny model (~10 s): the 3-minute budget
def test_cli_compile_and_generate_int8(env: dict[str, str], tiny_snapshot: Path,
                                       int8_models: dict[str, Model]) -> None:
    proc = run(env, "compile", "--model", tiny_snapshot, "--weights", "int8")
    assert proc.returncode == 0, proc.stderr
    r = int8_models["c"].compile_report()  # the same int8 matrices
    assert re.search(r"^weights\s+int8 \(0 widened to f32, 0\.0 MiB\)$", proc.stdout, re.M)
    assert re.search(rf"^  int8\s+kernel A \(W8A32\): 15 matrices, int8 values \+ f32 row "
                     rf"scales, {r['int8_weight_bytes'] / 2**20:.1f} MiB \(quantized at this "
                     rf"load in [\d.]+ s\); embedding and LM head int8; the other weights "
                     rf"bf16$", proc.stdout, re.M), proc.stdout
    moved = _separately_quantized_work(Snapshot.open(tiny_snapshot), "int8", True)
    assert str(moved) in proc.stdout
    decode = moved.evaluate({"past": 0, "seq": 1})  # type: ignore[attr-defined]
    assert f"{decode:,}" in proc.stdout
    again = run(env, "compile", "--model", tiny_snapshot, "--weights", "int8",
                "--f32-embedding")
    assert again.returncode == 0, again.stderr
    assert "(mapped from the int8 cache); embedding and LM head bf16 (--f32-embedding)" in \
        again.stdout
    gen = run(env, "generate", "Hello", "--model", tiny_snapshot, "--weights", "int8",
              "--max-tokens", "5", "--ignore-eos", "--greedy")
    assert gen.returncode == 0, gen.stderr
    want = int8_models["c"].generate("Hello", max_tokens=5, stop_at_eos=False).text
    assert gen.stdout == want + "\n"


@pytest.mark.slow  # two loads and a scalar kernel-B compile (~6 s): the 3-minute budget
def test_int8_dot_is_kernel_b_on_both_backends(tiny_snapshot: Path, home: Path) -> None:
    """``weights="int8-dot"``: the projections in kernel B (graph.matmul_i8), the LM head
    kernel A; the C program generates the exact interpreter's tokens and logits, and
    the report says kernel B."""
    c = load(tiny_snapshot, weights="int8-dot")
    interp = load(tiny_snapshot, weights="int8-dot", backend="interpreter")
    assert c.compile_report()["int8_kernel"] == "b"
    assert "weights='int8-dot'" in repr(c)
    ids = c.tokenizer.encode("The capital of France is")
    np.testing.assert_array_equal(c.logits(ids).view(np.uint32),
                                  interp.logits(ids).view(np.uint32))
    a = load(tiny_snapshot, weights="int8")
    assert not np.array_equal(a.logits(ids), c.logits(ids))  # kernel B is not kernel A
    assert c.generate("Hello", max_tokens=4, stop_at_eos=False).token_ids == \
        interp.generate("Hello", max_tokens=4, stop_at_eos=False).token_ids


@pytest.mark.slow  # two loads and kernel-B compiles (~6 s): the 3-minute budget
def test_int8_dot_head_is_kernel_b_on_both_backends(tiny_snapshot: Path, home: Path) -> None:
    """``int8_dot_head=True`` (spec §5's switch): the LM head on kernel B too; the C
    program gives the exact interpreter's logits bit for bit at every position, other
    logits than kernel A's LM head, and the report and repr say so."""
    c = load(tiny_snapshot, weights="int8-dot", int8_dot_head=True, last_only=False)
    interp = load(tiny_snapshot, weights="int8-dot", int8_dot_head=True, backend="interpreter")
    report = c.compile_report()
    assert (report["int8_kernel"], report["int8_head_kernel"]) == ("b", "b")
    assert "weights='int8-dot', int8_embedding=True, int8_dot_head=True" in repr(c)
    ids = c.tokenizer.encode("The capital of France is")
    got = c.logits(ids)
    assert got.shape[0] == len(ids)
    np.testing.assert_array_equal(got.view(np.uint32), interp.logits(ids).view(np.uint32))
    head_a = load(tiny_snapshot, weights="int8-dot", last_only=False)
    assert head_a.compile_report()["int8_head_kernel"] == "a"
    assert not np.array_equal(head_a.logits(ids), got)  # the LM head's activations quantized
    assert c.generate("Hello", max_tokens=4, stop_at_eos=False).token_ids == \
        interp.generate("Hello", max_tokens=4, stop_at_eos=False).token_ids


@pytest.mark.slow  # a CLI run that loads the tiny model: the 3-minute budget
def test_cli_compile_says_int8_dot_head(env: dict[str, str], tiny_snapshot: Path) -> None:
    proc = run(env, "compile", "--model", tiny_snapshot, "--weights", "int8-dot",
               "--int8-dot-head")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^  int8\s+kernel B \(W8A8, integer dot products; LM head kernel B too "
                     r"\(--int8-dot-head\)\): ", proc.stdout, re.M), proc.stdout
    plain = run(env, "compile", "--model", tiny_snapshot, "--weights", "int8-dot")
    assert plain.returncode == 0, plain.stderr
    assert "integer dot products; LM head kernel A)" in plain.stdout

"""Every JSON file the tool reads goes through one loader (issue 14, points 6 and 9).

A snapshot's JSON comes from whoever made the snapshot: 100,000 nested
brackets must be an error of the file's own kind (``ConfigError``,
``ChatTemplateError``, ``GenerationConfigError``, ``SnapshotError``), never a
``RecursionError``; a FIFO (or a directory) in a JSON file's place must be
refused at once, never read (a FIFO blocks forever).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from nanocompile.checkpoint.config import ConfigError, Qwen2Config
from nanocompile.checkpoint.snapshot import Snapshot, SnapshotError
from nanocompile.inference.sampling import GenerationConfigError, from_generation_config
from nanocompile.tokenizer.chat import ChatTemplateError, render_chat

SRC = Path(__file__).resolve().parents[3] / "src" / "nanocompile"
DEEP = "[" * 100_000 + "]" * 100_000
USER = [{"role": "user", "content": "x"}]


def _copy(tiny: Path, out: Path, without: str | None = None) -> Path:
    shutil.copytree(tiny, out)
    if without is not None:
        (out / without).unlink()
    return out


def _chat(d: Path) -> object:
    return render_chat(USER, add_generation_prompt=True, snapshot_dir=d)


READERS: dict[str, tuple[Callable[[Path], object], type[Exception], str | None]] = {
    "config.json": (lambda d: Qwen2Config.from_file(d / "config.json"), ConfigError, None),
    "tokenizer_config.json": (_chat, ChatTemplateError, None),
    "generation_config.json": (from_generation_config, GenerationConfigError, None),
    "model.safetensors.index.json": (Snapshot.open, SnapshotError, "model.safetensors"),
}


@pytest.mark.parametrize("name", list(READERS))
def test_deeply_nested_json_is_an_error_of_its_kind(tiny_snapshot: Path, tmp_path: Path,
                                                    name: str) -> None:
    read, error, without = READERS[name]
    d = _copy(tiny_snapshot, tmp_path / "s", without)
    (d / name).write_text(DEEP, encoding="utf-8")
    with pytest.raises(error, match="nested too deeply") as info:
        read(d)
    assert name in str(info.value)


@pytest.mark.parametrize("name", list(READERS))
def test_a_json_file_that_is_a_directory_is_an_error(tiny_snapshot: Path, tmp_path: Path,
                                                     name: str) -> None:
    read, error, without = READERS[name]
    d = _copy(tiny_snapshot, tmp_path / "s", without)
    (d / name).unlink(missing_ok=True)
    (d / name).mkdir()
    # Snapshot.open looks for a weight *file* or index *file* before reading any
    expected = ("no model.safetensors or model.safetensors.index.json"
                if name == "model.safetensors.index.json" else "not a regular file")
    with pytest.raises(error, match=expected):
        read(d)


def test_a_fifo_is_refused_without_blocking(tiny_snapshot: Path, tmp_path: Path) -> None:
    """Reading a FIFO's writer-less end blocks forever; run it in a child with a timeout."""
    d = _copy(tiny_snapshot, tmp_path / "s")
    (d / "generation_config.json").unlink()
    os.mkfifo(d / "generation_config.json")
    code = ("import sys\nfrom nanocompile.inference.sampling import from_generation_config\n"
            "try:\n    from_generation_config(sys.argv[1])\n"
            "except ValueError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(d)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "generation_config.json: not readable JSON (not a regular file" in proc.stdout


def test_read_json_limits(tmp_path: Path) -> None:
    from nanocompile.checkpoint.jsonfile import MAX_JSON_BYTES, JSONFileError, parse_json, read_json

    good = tmp_path / "good.json"
    good.write_text('{"a": [1, 2, {"b": null}]}', encoding="utf-8")
    assert read_json(good) == {"a": [1, 2, {"b": None}]}
    with pytest.raises(JSONFileError, match="no such file"):
        read_json(tmp_path / "absent.json")
    big = tmp_path / "big.json"
    with big.open("wb") as fh:
        fh.truncate(MAX_JSON_BYTES + 1)
    with pytest.raises(JSONFileError, match="larger than"):
        read_json(big)
    latin = tmp_path / "latin.json"
    latin.write_bytes('{"a": "café"}'.encode("latin-1"))
    with pytest.raises(JSONFileError, match="not UTF-8"):
        read_json(latin)
    with pytest.raises(JSONFileError, match="not valid JSON"):
        parse_json("{oops")
    with pytest.raises(JSONFileError, match="nested too deeply"):
        parse_json(DEEP.encode())
    assert parse_json(b"[" * 50 + b"]" * 50) == json.loads("[" * 50 + "]" * 50)


def test_nested_default_model_marker_is_not_current(tmp_path: Path) -> None:
    from nanocompile.api import MARKER, _is_current

    (tmp_path / MARKER).write_text(DEEP, encoding="utf-8")
    assert _is_current(tmp_path) is False


def test_no_json_is_read_around_the_loader() -> None:
    """One loader: no other module of the package parses JSON itself."""
    parse = re.compile(r"\bjson\.loads?\(")
    found = [f"{p.relative_to(SRC)}:{i}" for p in sorted(SRC.rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if parse.search(line) and p.name != "jsonfile.py"]
    assert found == []

"""A Hugging Face snapshot directory of a Qwen2 model, opened and checked.

``Snapshot.open(dir)`` reads ``config.json``, maps ``model.safetensors`` (or
the shards named by ``model.safetensors.index.json``) and checks that every
tensor the config implies is present with the right shape and a float dtype
that widens exactly to f32. Nothing is copied: ``raw`` returns views on the
mapped files. The same code opens the real checkpoint and the synthetic one.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path
from types import TracebackType

import numpy as np

from nanocompile.checkpoint.config import ConfigError, Qwen2Config
from nanocompile.checkpoint.jsonfile import JSONFileError, read_json
from nanocompile.checkpoint.safetensors import (
    EXACT_F32_DTYPES,
    SafetensorsError,
    SafetensorsFile,
)

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"


class SnapshotError(ValueError):
    """A snapshot directory is missing pieces or does not match its config."""


def expected_tensors(config: Qwen2Config) -> dict[str, tuple[int, ...]]:
    """Every tensor name the config implies, with its shape (HF layout)."""
    h, i, v = config.hidden_size, config.intermediate_size, config.vocab_size
    kv = config.num_key_value_heads * config.head_dim
    out: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (v, h),
        "model.norm.weight": (h,),
    }
    for layer in range(config.num_hidden_layers):
        p = f"model.layers.{layer}."
        out |= {
            p + "input_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (h, h),
            p + "self_attn.q_proj.bias": (h,),
            p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.k_proj.bias": (kv,),
            p + "self_attn.v_proj.weight": (kv, h),
            p + "self_attn.v_proj.bias": (kv,),
            p + "self_attn.o_proj.weight": (h, h),
            p + "post_attention_layernorm.weight": (h,),
            p + "mlp.gate_proj.weight": (i, h),
            p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i),
        }
    if not config.tie_word_embeddings:
        out["lm_head.weight"] = (v, h)
    return out


def _peak_rss_bytes() -> int:
    # ru_maxrss is KiB on Linux (bytes on macOS; nanocompile targets Linux).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _read_index(directory: Path) -> dict[str, str]:
    """The ``weight_map`` of a sharded snapshot, validated."""
    path = directory / INDEX_NAME
    try:
        index = read_json(path)
    except JSONFileError as exc:
        raise SnapshotError(f"{path}: cannot read index ({exc})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise SnapshotError(f"{path}: missing or empty 'weight_map' object")
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or Path(shard).name != shard or shard in ("", ".", ".."):
            raise SnapshotError(f"{path}: tensor {name!r} maps to bad shard name {shard!r}")
    return weight_map


class Snapshot:
    """An opened, validated snapshot: config plus memory-mapped weights."""

    def __init__(
        self,
        path: Path,
        config: Qwen2Config,
        files: dict[str, SafetensorsFile],
        locations: dict[str, SafetensorsFile],
    ) -> None:
        self.path = path
        self.config = config
        self.files = files
        self._where = locations
        self._expected = expected_tensors(config)
        self.load_seconds = 0.0
        self.peak_rss_bytes = 0

    @classmethod
    def open(cls, directory: str | os.PathLike[str]) -> Snapshot:
        """Open and validate the snapshot in ``directory``.

        Raises ``SnapshotError`` (or ``ConfigError`` / ``SafetensorsError``
        for a bad config or weight file) with a one-line message.
        """
        start = time.perf_counter()
        path = Path(directory)
        if not path.is_dir():
            raise SnapshotError(f"{path}: snapshot directory does not exist")
        if not (path / CONFIG_NAME).is_file():
            raise SnapshotError(f"{path}: no {CONFIG_NAME} in snapshot directory")
        config = Qwen2Config.from_file(path / CONFIG_NAME)
        files, locations = _open_weights(path)
        snapshot = cls(path, config, files, locations)
        try:
            snapshot._check_tensors()
        except SnapshotError:
            snapshot.close()
            raise
        snapshot.load_seconds = time.perf_counter() - start
        snapshot.peak_rss_bytes = _peak_rss_bytes()
        return snapshot

    def _check_tensors(self) -> None:
        for name, shape in self._expected.items():
            source = self._where.get(name)
            if source is None:
                raise SnapshotError(f"{self.path}: missing tensor {name!r}")
            got = source.shape(name)
            if got != shape:
                raise SnapshotError(
                    f"{source.path}: tensor {name!r} has shape {list(got)}, "
                    f"config implies {list(shape)}"
                )
            dtype = source.dtype(name)
            if dtype not in EXACT_F32_DTYPES:
                raise SnapshotError(
                    f"{source.path}: tensor {name!r} has dtype {dtype}; "
                    f"expected one of {', '.join(EXACT_F32_DTYPES)}"
                )

    # -- queries ----------------------------------------------------------

    def expected_tensors(self) -> dict[str, tuple[int, ...]]:
        """Every tensor the config implies, with its shape (a fresh dict)."""
        return dict(self._expected)

    @property
    def names(self) -> list[str]:
        """All tensor names in the snapshot (sorted), including unexpected extras."""
        return sorted(self._where)

    def _file(self, name: str) -> SafetensorsFile:
        source = self._where.get(name)
        if source is None:
            raise SnapshotError(f"{self.path}: no tensor named {name!r}")
        return source

    def dtype(self, name: str) -> str:
        """The stored safetensors dtype of ``name``."""
        return self._file(name).dtype(name)

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of ``name``."""
        return self._file(name).shape(name)

    def raw(self, name: str) -> np.ndarray:
        """Zero-copy read-only view of the stored values (bf16 as uint16 bits)."""
        return self._file(name).raw(name)

    def f32(self, name: str) -> np.ndarray:
        """``name`` widened exactly to float32."""
        return self._file(name).f32(name)

    def nbytes(self) -> int:
        """Total size of the weight files on disk."""
        return sum(f.path.stat().st_size for f in self.files.values())

    # -- lifetime ---------------------------------------------------------

    def close(self) -> None:
        """Release the mappings (views already handed out stay valid)."""
        for f in self.files.values():
            f.close()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _open_weights(path: Path) -> tuple[dict[str, SafetensorsFile], dict[str, SafetensorsFile]]:
    """Open the weight file(s); return (files by name, file holding each tensor)."""
    if (path / WEIGHTS_NAME).is_file():
        single = SafetensorsFile.open(path / WEIGHTS_NAME)
        return {WEIGHTS_NAME: single}, {name: single for name in single.names}
    if not (path / INDEX_NAME).is_file():
        raise SnapshotError(f"{path}: no {WEIGHTS_NAME} or {INDEX_NAME} in snapshot directory")
    weight_map = _read_index(path)
    files: dict[str, SafetensorsFile] = {}
    try:
        for shard in sorted(set(weight_map.values())):
            if not (path / shard).is_file():
                raise SnapshotError(f"{path / INDEX_NAME}: shard {shard!r} does not exist")
            files[shard] = SafetensorsFile.open(path / shard)
        for name, shard in weight_map.items():
            if name not in files[shard]:
                raise SnapshotError(f"{path / shard}: index lists tensor {name!r} but it is absent")
    except (SnapshotError, SafetensorsError, ConfigError):
        for f in files.values():
            f.close()
        raise
    return files, {name: files[shard] for name, shard in weight_map.items()}

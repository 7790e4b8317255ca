"""A Hugging Face snapshot directory of a Qwen2 model, opened and checked.

``Snapshot.open(dir)`` reads ``config.json``, maps ``model.safetensors`` (or
the shards named by ``model.safetensors.index.json``) and checks that every
tensor the config implies is present with the right shape and a float dtype
that widens exactly to f32. Nothing is copied: ``raw`` returns views on the
mapped files. The same code opens the real checkpoint and the synthetic one.

``Int8Cache`` keeps spec §5's int8 copies of a snapshot's matrices on disk
(quantized once, mapped after), keyed by ``Snapshot.content_hash``.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from nanocompile.checkpoint.config import ConfigError, Qwen2Config
from nanocompile.checkpoint.jsonfile import JSONFileError, parse_json, read_json
from nanocompile.checkpoint.pagecache import map_weights
from nanocompile.checkpoint.safetensors import (
    EXACT_F32_DTYPES,
    SafetensorsError,
    SafetensorsFile,
    bf16_to_f32,
    write_safetensors,
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

    def f32(self, name: str, out: np.ndarray | None = None) -> np.ndarray:
        """``name`` widened exactly to float32 (into ``out``, a float32 array of
        its shape, when given)."""
        return self._file(name).f32(name, out)

    def f32_rows(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` of ``name`` widened exactly to float32 (only those rows
        are read: a large matrix never needs to be widened whole)."""
        dtype = self.dtype(name)
        raw = self.raw(name)[start:stop]
        if dtype == "BF16":
            return bf16_to_f32(raw)
        if dtype == "F16":
            return raw.astype(np.float32)
        if dtype != "F32":
            raise SnapshotError(f"{self.path}: tensor {name!r} has dtype {dtype}, which does "
                                "not widen exactly to f32")
        return raw

    def weight_files(self) -> list[Path]:
        """The weight files (safetensors), sorted by name."""
        return [self.files[name].path for name in sorted(self.files)]

    def content_hash(self, memo_dir: Path | None = None) -> str:
        """sha256 over ``config.json`` and every weight file (names and bytes): what
        the snapshot's tensors are made of.

        Hashing reads every byte (~1 s per GB). With ``memo_dir`` the hash is kept
        there, keyed by the files' paths, and reused while every file keeps its
        identity (device, inode, size, modification time in ns); any change
        hashes again. A memo that cannot be read or written is ignored.
        """
        files = [self.path / CONFIG_NAME, *self.weight_files()]
        stamp = [_file_stamp(f) for f in files]
        memo = None
        if memo_dir is not None:
            where = "\0".join(str(f.resolve()) for f in files)
            memo = Path(memo_dir) / f"{hashlib.sha256(where.encode()).hexdigest()[:32]}.json"
            found = _read_memo(memo, stamp)
            if found is not None:
                return found
        digest = hashlib.sha256(b"nanocompile-snapshot/1")
        for path in files:
            digest.update(f"\0{path.name}\0".encode())
            _hash_file(digest, path)
        value = digest.hexdigest()
        if memo is not None:
            _write_atomically(memo, json.dumps({"stamp": stamp, "sha256": value}).encode())
        return value

    def with_files(self, replaced: dict[str, SafetensorsFile]) -> Snapshot:
        """This snapshot (directory, config) with the weight files named in ``replaced``
        (keys of ``files``) replaced by the given ones, which must hold the same
        tensors (checked as ``open`` checks); the replaced files are closed."""
        unknown = sorted(set(replaced) - set(self.files))
        if unknown:
            raise SnapshotError(f"{self.path}: no weight file named {unknown[0]!r}")
        files = {key: replaced.get(key, f) for key, f in self.files.items()}
        by_file = {id(f): files[key] for key, f in self.files.items()}
        out = Snapshot(self.path, self.config, files,
                       {name: by_file[id(f)] for name, f in self._where.items()})
        out._check_tensors()
        out.load_seconds, out.peak_rss_bytes = self.load_seconds, self.peak_rss_bytes
        for key in replaced:
            self.files[key].close()
        return out

    def file_of(self, name: str) -> SafetensorsFile:
        """The weight file holding tensor ``name``."""
        return self._file(name)

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


# --------------------------------------------------------------------------
# content-hash memo


def _file_stamp(path: Path) -> list[int | str]:
    st = path.stat()
    return [path.name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _read_memo(path: Path, stamp: list[list[int | str]]) -> str | None:
    try:
        memo = parse_json(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(memo, dict) or memo.get("stamp") != stamp:
        return None
    value = memo.get("sha256")
    if not isinstance(value, str) or len(value) != 64:
        return None
    return value


def _write_atomically(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` through a temporary file and a rename (a reader sees
    the whole file or none); False if the directory cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        return False
    finally:
        Path(tmp).unlink(missing_ok=True)


# --------------------------------------------------------------------------
# int8 copies of the matrices, on disk


INT8_FORMAT = "nanocompile-int8/3"  # bump when an entry's layout or contents change
INT8_DATA_ALIGNMENT = 64
"""Every tensor of an entry starts on a cache line once mapped (format 2's
entries held one matrix each, its data 64-byte aligned; format 1's started
8-byte aligned: 16 or 24 bytes into a line, where every 64-byte load of kernel
B's int8 rows straddled two lines). Format 3 keeps a layer's matrices in one
file (``Int8Cache``), ``PAD_SUFFIX`` tensors of zero bytes keeping each aligned."""
PAD_SUFFIX = ".pad"
TMP_PREFIX = ".tmp-int8-"
ROWS_PER_CHUNK = 4096  # rows quantized at a time (an embedding is never widened whole)

Int8Progress = Callable[[str, int, int], None]
QUANTIZING = "quantizing the weights to int8"


def _quantizer() -> tuple[Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]], str]:
    """spec §5's ``quantize_rows`` and a hash of the module that defines it (any
    change to the quantizer changes every cache key)."""
    from nanocompile.checkpoint import int8

    source = Path(int8.__file__).read_bytes()
    return int8.quantize_rows, hashlib.sha256(source).hexdigest()


def entry_group(name: str) -> str:
    """The entry a matrix is kept in: one per decoder layer for its matrices
    (``model.layers.3.self_attn.q_proj.weight`` -> ``model.layers.3``), one of its
    own for any other (the embedding)."""
    parts = name.split(".")
    if len(parts) > 3 and parts[:2] == ["model", "layers"] and parts[2].isdigit():
        return ".".join(parts[:3])
    return name


class Int8Cache:
    """spec §5's int8 format of a snapshot's matrices (per output row: int8 values and
    an f32 scale, ``checkpoint.int8.quantize_rows`` of the exactly widened f32
    values), computed once and kept on disk::

        <root>/<key>/<group>.safetensors    per matrix <name>: "<name>.int8" (I8 [N, K]),
                                            "<name>.scale" (F32 [N])

    A group (``entry_group``) is a decoder layer's matrices, or the embedding
    alone: a file per matrix left q, k, v and o (0.1-0.8 MB each) smaller than a
    2 MiB page, so they were mapped 4 KiB at a time and read at ~19 GB/s in a
    kernel-B decode step where the MLP's read ~29 (`bench profile`, Zen 4; in
    2 MiB pages ~27: a step 0.7 ms faster). ``key`` hashes ``INT8_FORMAT``, the
    quantizer's source and the snapshot's content (``Snapshot.content_hash``,
    memoized in ``<root>/snapshots``), so a changed snapshot or quantizer never
    meets a stale entry. Each file's metadata names its format, its matrices,
    their source shapes and the sha256 of their data; a file that does not
    open, does not say exactly that for the matrices asked for, or whose data
    does not hash to it (truncated, bit-flipped, another group's) is deleted
    and its group quantized again. Files are written to a temporary name and
    renamed into place, so a reader sees a whole file or none; two writers of
    one entry write the same bytes. Loaded tensors are read-only views of the
    mapped files (no copy).
    """

    def __init__(self, snapshot: Snapshot, root: Path) -> None:
        self.snapshot = snapshot
        self.root = Path(root)
        self.quantized_seconds = 0.0  # time spent quantizing in the last load
        self.quantized = 0  # matrices quantized (not found in the cache) in the last load
        self._quantize, quantizer_hash = _quantizer()
        content = snapshot.content_hash(self.root / "snapshots")
        key = hashlib.sha256(json.dumps([INT8_FORMAT, quantizer_hash, content]).encode())
        self.directory = self.root / key.hexdigest()[:32]

    def path(self, name: str) -> Path:
        """The entry file holding matrix ``name`` (its group's)."""
        return self._group_path(entry_group(name))

    def _group_path(self, group: str) -> Path:
        return self.directory / f"{group}.safetensors"

    def load(self, names: Sequence[str], progress: Int8Progress | None = None
             ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``{name: (int8 [N, K], f32 scales [N])}`` for each 2-D tensor of ``names``:
        from the cache, or quantized (``progress`` hears about it) and stored."""
        start = time.perf_counter()
        groups: dict[str, list[str]] = {}
        for name in dict.fromkeys(names):
            groups.setdefault(entry_group(name), []).append(name)
        out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        missing: dict[str, list[str]] = {}
        for group, members in groups.items():
            found = self._read(group, members)
            if found is None:
                missing[group] = members
            else:
                out.update(found)
        total = sum(len(members) for members in missing.values())
        self.quantized, done = total, 0
        for group, members in missing.items():
            quantized = {}
            for name in members:
                if progress is not None:
                    progress(QUANTIZING, done, total)
                quantized[name] = self._quantized(name)
                done += 1
            out.update(self._store(group, quantized))
        if progress is not None and missing:
            progress(QUANTIZING, total, total)
        self.quantized_seconds = time.perf_counter() - start if missing else 0.0
        return {name: out[name] for name in dict.fromkeys(names)}

    def _shape(self, name: str) -> tuple[int, int]:
        shape = self.snapshot.shape(name)
        if len(shape) != 2:
            raise SnapshotError(f"{self.snapshot.path}: tensor {name!r} has shape "
                                f"{list(shape)}; int8 needs a matrix [N, K]")
        return shape[0], shape[1]

    def _quantized(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``quantize_rows`` of ``name``'s exact f32 values, a block of rows at a time
        (each row is quantized on its own: the same values as all at once)."""
        n, k = self._shape(name)
        q = np.empty((n, k), np.int8)
        scale = np.empty(n, np.float32)
        for row in range(0, n, ROWS_PER_CHUNK):
            stop = min(n, row + ROWS_PER_CHUNK)
            q_rows, s_rows = self._quantize(self.snapshot.f32_rows(name, row, stop))
            if q_rows.dtype != np.int8 or s_rows.dtype != np.float32 or \
                    q_rows.shape != (stop - row, k) or s_rows.shape != (stop - row,):
                raise SnapshotError(f"quantize_rows gave {q_rows.dtype}{list(q_rows.shape)}, "
                                    f"{s_rows.dtype}{list(s_rows.shape)} for {stop - row} "
                                    f"rows of {k}")
            q[row:stop], scale[row:stop] = q_rows, s_rows
        return q, scale

    def _metadata(self, tensors: dict[str, tuple[np.ndarray, np.ndarray]]
                  ) -> dict[str, str]:
        meta = {"format": INT8_FORMAT, "matrices": ",".join(sorted(tensors))}
        for name, (q, scale) in tensors.items():
            n, k = self._shape(name)
            meta[f"{name}.source_shape"] = f"{n},{k}"
            meta[f"{name}.sha256"] = _data_digest(q, scale)
        return meta

    def _read(self, group: str, names: Sequence[str]
              ) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
        """The entries of ``names`` from ``group``'s file if it holds them all and they
        verify, else None (a bad file is deleted; a good one without them all stays,
        to be replaced)."""
        path = self._group_path(group)
        entry = open_entry(path)
        if entry is None:
            return None
        try:
            held = entry.metadata.get("matrices", "").split(",")
            if entry.metadata.get("format") != INT8_FORMAT or \
                    sorted(entry.names) != _layout_names(held):
                raise SafetensorsError("not an entry of this format")
            if not set(names) <= set(held):
                entry.close()
                return None
            out = {}
            for name in names:
                n, k = self._shape(name)
                if (entry.dtype(f"{name}.int8"), entry.shape(f"{name}.int8")) != ("I8", (n, k)) \
                        or (entry.dtype(f"{name}.scale"), entry.shape(f"{name}.scale")) != \
                        ("F32", (n,)):
                    raise SafetensorsError(f"not {name}'s entry")
                q, scale = entry.raw(f"{name}.int8"), entry.raw(f"{name}.scale")
                if entry.metadata.get(f"{name}.source_shape") != f"{n},{k}" or \
                        entry.metadata.get(f"{name}.sha256") != _data_digest(q, scale):
                    raise SafetensorsError("metadata or data hash mismatch")
                out[name] = (q, scale)
        except SafetensorsError:
            entry.close()
            path.unlink(missing_ok=True)
            return None
        entry.close()  # the views keep the mapping
        return out

    def _store(self, group: str, tensors: dict[str, tuple[np.ndarray, np.ndarray]]
               ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Write ``group``'s entry holding ``tensors``; the mapped entries (or, if the
        cache cannot be written, the arrays themselves)."""
        path = self._group_path(group)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            sweep_temporaries(path.parent)
            staging = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-",
                                            dir=path.parent))
        except OSError:
            return tensors
        try:
            staged = staging / path.name
            write_safetensors(staged, _aligned_layout(tensors), self._metadata(tensors),
                              data_alignment=INT8_DATA_ALIGNMENT, keep_order=True)
            os.replace(staged, path)
        except OSError:
            return tensors
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return self._read(group, list(tensors)) or tensors


def _layout_names(matrices: Sequence[str]) -> list[str]:
    """The tensor names of an entry holding ``matrices``, pads included, sorted."""
    return sorted(f"{name}.{part}{pad}" for name in matrices for part in ("int8", "scale")
                  for pad in ("", PAD_SUFFIX))


def _aligned_layout(tensors: dict[str, tuple[np.ndarray, np.ndarray]]
                    ) -> dict[str, tuple[str, np.ndarray]]:
    """The tensors of an entry in the order written: the smallest matrix first (the
    file's last 2 MiB range, only partly filled, is mapped in 4 KiB pages: it
    falls on the largest matrix), each matrix's int8 values then its scales, each
    followed by a pad of zero bytes to the next ``INT8_DATA_ALIGNMENT`` boundary
    (0-63 of them: safetensors lays tensors back to back)."""
    out: dict[str, tuple[str, np.ndarray]] = {}
    for name in sorted(tensors, key=lambda n: (tensors[n][0].nbytes, n)):
        q, scale = tensors[name]
        for part, dtype, array in ((f"{name}.int8", "I8", q), (f"{name}.scale", "F32", scale)):
            out[part] = (dtype, array)
            out[part + PAD_SUFFIX] = ("U8", np.zeros(-array.nbytes % INT8_DATA_ALIGNMENT,
                                                     np.uint8))
    if any("," in name for name in tensors):  # the metadata lists them comma-separated
        raise SnapshotError(f"matrix names {sorted(tensors)} cannot name an int8 entry")
    return out


HASH_CHUNK = 1 << 24


def _hash_file(digest: Any, path: Path) -> None:
    """Feed ``path``'s bytes to ``digest`` through the weights' mapping
    (``pagecache.map_weights``: huge pages asked for), not with ``read()``: a
    weight file's first reader decides the folios the page cache keeps it in,
    and a ``read()`` pass leaves the first megabytes in small folios, mapped 4
    KiB at a time by every later run (an 8 MiB file: none of it in 2 MiB
    pages; checkpoint/pagecache.py). A file that cannot be mapped is read."""
    with path.open("rb") as fh:
        try:
            mapping = map_weights(fh.fileno())
        except (OSError, ValueError):  # empty, or a file system without mmap
            while chunk := fh.read(HASH_CHUNK):
                digest.update(chunk)
            return
    with mapping:
        view = memoryview(mapping)
        try:
            for start in range(0, len(view), HASH_CHUNK):
                digest.update(view[start:start + HASH_CHUNK])
        finally:
            view.release()


def _data_digest(q: np.ndarray, scale: np.ndarray) -> str:
    digest = hashlib.sha256()
    digest.update(np.ascontiguousarray(q).reshape(-1).view(np.uint8).data)
    digest.update(np.ascontiguousarray(scale).reshape(-1).view(np.uint8).data)
    return digest.hexdigest()


def open_entry(path: Path) -> SafetensorsFile | None:
    """A cache entry file, mapped, if it opens as safetensors; else None, and whatever
    lies at ``path`` (a damaged file, a directory) is removed."""
    if not path.is_file():
        if path.is_dir():  # a directory where the entry goes
            shutil.rmtree(path, ignore_errors=True)
        return None
    try:
        return SafetensorsFile.open(path)
    except SafetensorsError:
        path.unlink(missing_ok=True)
        return None


def sweep_temporaries(directory: Path, prefix: str = TMP_PREFIX) -> None:
    """Remove the staging directories of writers that are gone (``<prefix><pid>-*``;
    the int8 cache's by default)."""
    for path in directory.glob(f"{prefix}*"):
        pid = path.name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        except OSError:  # someone else's live process
            continue

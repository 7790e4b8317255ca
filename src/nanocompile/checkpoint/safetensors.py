"""A memory-mapped safetensors reader and a streaming writer, in NumPy only.

Layout (spec §1.1): an 8-byte little-endian u64 header length ``N``; ``N``
bytes of UTF-8 JSON; then the raw little-endian tensor bytes. Each tensor
entry is ``{"dtype": str, "shape": [int, ...], "data_offsets": [begin, end]}``
with offsets relative to the start of the data (byte ``8 + N``).
``__metadata__`` is an optional str→str map.

The reader validates the whole header before any tensor is touched and
returns read-only ``np.ndarray`` views on one ``mmap`` of the file: nothing
is copied. BF16 tensors are returned as their raw bits (``uint16``);
``bf16_to_f32`` widens them exactly.
"""

from __future__ import annotations

import itertools
import json
import math
import mmap
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np

from nanocompile.checkpoint.jsonfile import JSONFileError, parse_json
from nanocompile.checkpoint.pagecache import map_weights, release_written

MAX_HEADER_BYTES = 100 * 1024 * 1024
METADATA_KEY = "__metadata__"

# Storage dtype of each safetensors dtype string. BF16 is kept as raw bits.
DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}

# Float dtypes that widen to f32 without rounding.
EXACT_F32_DTYPES = ("F32", "BF16", "F16")


class SafetensorsError(ValueError):
    """A safetensors file is malformed or a request on it is invalid."""


@dataclass(frozen=True)
class TensorInfo:
    """One validated header entry; ``begin``/``end`` are data-relative."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


# --------------------------------------------------------------------------
# bf16 helpers


def bf16_to_f32(bits: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Widen raw bf16 bits (uint16) to float32 exactly, into ``out`` (a float32
    array of ``bits``' shape) when given, in one pass either way.

    The 16 bits become the high half of a u32 that is reinterpreted as f32:
    never rounds, NaN payloads and infinities are preserved.
    """
    if bits.dtype.kind != "u" or bits.dtype.itemsize != 2:
        raise TypeError(f"bf16_to_f32 expects uint16 bits, got {bits.dtype}")
    out = f32_out(out, bits.shape, "bf16_to_f32")
    np.left_shift(bits, np.uint32(16), out=out.view(np.uint32), dtype=np.uint32)
    return out


def f32_out(out: np.ndarray | None, shape: tuple[int, ...], where: str) -> np.ndarray:
    """``out`` if it is a float32 array of ``shape`` (a ValueError naming
    ``where`` otherwise), or a new one when None: where a widening writes."""
    if out is None:
        return np.empty(shape, np.float32)
    if out.dtype != np.float32 or out.shape != shape:
        raise ValueError(f"{where}: out must be float32 of shape {shape}, "
                         f"got {out.dtype} {out.shape}")
    return out


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round float32 to bf16 bits (uint16), round-to-nearest-even, in integers.

    NaN stays NaN (quietened, sign kept); values beyond the bf16 range round
    to infinity as IEEE requires. Deterministic on every machine.
    """
    if values.dtype != np.float32:
        raise TypeError(f"f32_to_bf16 expects float32, got {values.dtype}")
    bits = np.ascontiguousarray(values).view(np.uint32)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = (bits + (np.uint32(0x7FFF) + lsb)) >> np.uint32(16)
    is_nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if is_nan.any():
        quiet = (bits >> np.uint32(16)) | np.uint32(0x0040)
        rounded = np.where(is_nan, quiet, rounded)
    return rounded.astype(np.uint16)


# --------------------------------------------------------------------------
# header validation


def _fail(path: Path, message: str) -> SafetensorsError:
    return SafetensorsError(f"{path}: {message}")


def _reject_duplicate_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_metadata(path: Path, raw: object) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise _fail(path, f"__metadata__ must be an object of strings, got {type(raw).__name__}")
    for key, value in raw.items():
        if not isinstance(value, str):
            raise _fail(
                path,
                f"__metadata__[{key!r}] must be a string, got {type(value).__name__}",
            )
    return dict(raw)


MAX_DIM = 2**62  # no dimension, and no product of dimensions, reaches this (NumPy's limit)


def _parse_entry(path: Path, name: str, entry: object, data_len: int) -> TensorInfo:
    where = f"tensor {name!r}"
    if not isinstance(entry, dict):
        raise _fail(path, f"{where}: entry must be an object")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in entry]
    if missing:
        raise _fail(path, f"{where}: missing {', '.join(missing)}")
    dtype = entry["dtype"]
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise _fail(path, f"{where}: unknown dtype {dtype!r}")
    shape = entry["shape"]
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise _fail(path, f"{where}: shape must be a list of non-negative ints, got {shape!r}")
    offsets = entry["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_int, offsets))):
        raise _fail(path, f"{where}: data_offsets must be two ints, got {offsets!r}")
    begin, end = offsets
    if begin < 0 or end < begin:
        raise _fail(path, f"{where}: invalid data_offsets [{begin}, {end}]")
    if end > data_len:
        raise _fail(
            path,
            f"{where}: data_offsets [{begin}, {end}] lie outside the data section "
            f"({data_len} bytes; file truncated?)",
        )
    if any(d >= MAX_DIM for d in shape) or math.prod(d for d in shape if d) >= MAX_DIM:
        raise _fail(path, f"{where}: shape {shape} is larger than any array can be")
    expected = math.prod(shape) * DTYPES[dtype].itemsize  # exact: Python ints never wrap
    if end - begin != expected:
        raise _fail(
            path,
            f"{where}: byte length {end - begin} != prod(shape {shape}) x itemsize "
            f"= {expected}",
        )
    return TensorInfo(name, dtype, tuple(shape), begin, end)


def _check_overlaps(path: Path, infos: Iterable[TensorInfo]) -> None:
    ordered = sorted(infos, key=lambda t: (t.begin, t.end))
    for prev, cur in itertools.pairwise(ordered):
        if cur.begin < prev.end:
            raise _fail(
                path,
                f"tensors {prev.name!r} [{prev.begin}, {prev.end}] and "
                f"{cur.name!r} [{cur.begin}, {cur.end}] overlap",
            )


def parse_header(
    path: Path, header: bytes, data_len: int
) -> tuple[dict[str, TensorInfo], dict[str, str]]:
    """Validate a header's bytes against a data section of ``data_len`` bytes."""
    try:
        obj = parse_json(header, object_pairs_hook=_reject_duplicate_keys)
    except JSONFileError as exc:
        raise _fail(path, f"header is not valid UTF-8 JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise _fail(path, f"header must be a JSON object, got {type(obj).__name__}")
    metadata = _parse_metadata(path, obj.pop(METADATA_KEY, {}))
    infos = {name: _parse_entry(path, name, entry, data_len) for name, entry in obj.items()}
    _check_overlaps(path, infos.values())
    return infos, metadata


# --------------------------------------------------------------------------
# reader


class SafetensorsFile:
    """A validated, memory-mapped safetensors file.

    Tensors are read-only views on the mapping (zero copy). The mapping stays
    valid while any returned view is alive, even after ``close()``.
    """

    def __init__(
        self,
        path: Path,
        infos: dict[str, TensorInfo],
        metadata: dict[str, str],
        buffer: np.ndarray,
        mapping: mmap.mmap | None,
    ) -> None:
        self.path = path
        self.metadata = metadata
        self._infos = infos
        self._buffer: np.ndarray | None = buffer
        self._mapping = mapping

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SafetensorsFile:
        """Map and validate ``path``; raise ``SafetensorsError`` if malformed."""
        path = Path(path)
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size < 8:
                    raise _fail(path, f"truncated file: {size} bytes, need at least 8")
                mapping = map_weights(fh.fileno())  # in 2 MiB pages where the kernel can
        except OSError as exc:
            raise _fail(path, f"cannot read ({exc.strerror or exc})") from None
        # the header is read through the mapping, after the advice, never with
        # read(): a read() caches the file's first pages in small folios, and a
        # 2 MiB range holding one of them is never mapped in a 2 MiB page (a
        # 4.2 MiB int8 weight file was 0 of 4 MiB in 2 MiB pages that way, 4 of
        # 4 read through its mapping: checkpoint/pagecache.py)
        try:
            header_len = int.from_bytes(mapping[:8], "little")
            if header_len > MAX_HEADER_BYTES:
                raise _fail(path, f"header of {header_len} bytes exceeds the 100 MiB limit")
            if 8 + header_len > size:
                raise _fail(
                    path,
                    f"truncated file: header length {header_len} runs past the end "
                    f"of the file ({size} bytes)",
                )
            infos, metadata = parse_header(path, mapping[8:8 + header_len],
                                           size - 8 - header_len)
        except BaseException:
            mapping.close()
            raise
        buffer = np.frombuffer(mapping, dtype=np.uint8, offset=8 + header_len)
        return cls(path, infos, metadata, buffer, mapping)

    # -- queries ----------------------------------------------------------

    @property
    def names(self) -> list[str]:
        """Tensor names, sorted."""
        return sorted(self._infos)

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def info(self, name: str) -> TensorInfo:
        """The header entry of ``name``."""
        info = self._infos.get(name)
        if info is None:
            raise SafetensorsError(f"{self.path}: no tensor named {name!r}")
        return info

    def dtype(self, name: str) -> str:
        """The safetensors dtype string of ``name`` (e.g. ``"BF16"``)."""
        return self.info(name).dtype

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of ``name``."""
        return self.info(name).shape

    def raw(self, name: str) -> np.ndarray:
        """A read-only zero-copy view of the stored values (bf16 as uint16 bits)."""
        info = self.info(name)
        if self._buffer is None:
            raise SafetensorsError(f"{self.path}: file is closed")
        flat = self._buffer[info.begin : info.end]
        return flat.view(DTYPES[info.dtype]).reshape(info.shape)

    def f32(self, name: str, out: np.ndarray | None = None) -> np.ndarray:
        """``name`` as float32: the view itself for F32, an exact widening copy
        otherwise (written into ``out``, a float32 array of its shape, when
        given; an F32 tensor is copied into ``out`` too)."""
        dtype = self.dtype(name)
        if dtype not in EXACT_F32_DTYPES:
            raise SafetensorsError(
                f"{self.path}: tensor {name!r} has dtype {dtype}, which does not widen "
                "exactly to f32"
            )
        raw = self.raw(name)
        if dtype == "BF16":
            return bf16_to_f32(raw, out)
        if out is None and dtype == "F32":
            return raw
        out = f32_out(out, raw.shape, f"{self.path}: tensor {name!r}")
        np.copyto(out, raw, casting="safe")
        return out

    # -- lifetime ---------------------------------------------------------

    def close(self) -> None:
        """Drop this object's references to the mapping.

        Views handed out earlier stay valid; the mapping is unmapped when the
        last of them is gone.
        """
        self._buffer = None
        mapping, self._mapping = self._mapping, None
        if mapping is None:
            return
        try:
            mapping.close()
        except BufferError:
            pass  # views are still alive; they keep the mapping open

    def __enter__(self) -> SafetensorsFile:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# --------------------------------------------------------------------------
# writer


def _storage_array(path: Path, name: str, dtype: str, array: np.ndarray) -> np.ndarray:
    """Check ``array`` matches ``dtype`` and return it C-contiguous little-endian."""
    storage = DTYPES.get(dtype)
    if storage is None:
        raise _fail(path, f"tensor {name!r}: unknown dtype {dtype!r}")
    if array.dtype.kind != storage.kind or array.dtype.itemsize != storage.itemsize:
        raise _fail(
            path,
            f"tensor {name!r}: array dtype {array.dtype} cannot be stored as {dtype} "
            "(BF16 takes uint16 bits)",
        )
    return np.ascontiguousarray(array, dtype=storage)


def _header_bytes(
    specs: Mapping[str, tuple[str, tuple[int, ...]]], metadata: Mapping[str, str] | None,
    data_alignment: int = 8, keep_order: bool = False,
) -> tuple[bytes, list[str], list[int]]:
    header: dict[str, object] = {}
    if metadata:
        header[METADATA_KEY] = dict(metadata)
    order = list(specs) if keep_order else sorted(specs)
    sizes = []
    offset = 0
    for name in order:
        dtype, shape = specs[name]
        nbytes = int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype].itemsize
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + nbytes],
        }
        sizes.append(nbytes)
        offset += nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-(8 + len(text)) % data_alignment)  # the 8 length bytes come first
    return text, order, sizes


def write_safetensors_stream(
    path: str | os.PathLike[str],
    specs: Mapping[str, tuple[str, tuple[int, ...]]],
    chunks: Callable[[str], Iterable[np.ndarray]],
    metadata: Mapping[str, str] | None = None,
    data_alignment: int = 8,
    keep_order: bool = False,
) -> None:
    """Write a safetensors file whose tensors are produced one at a time.

    ``specs`` maps each name to ``(dtype, shape)``; ``chunks(name)`` yields
    arrays whose bytes, concatenated in order, are that tensor (so a large
    tensor never needs to be in memory at once). Tensors are written sorted by
    name (``keep_order``: in the order of ``specs``), back to back; the header
    is padded with spaces so that the data starts at a multiple of
    ``data_alignment`` bytes into the file (8, as the format's own writer does;
    64 puts it on a cache line once mapped, and every tensor whose
    predecessors' sizes are multiples of 64 with it). The file appears
    atomically (written to a temporary name, then renamed), and leaves the
    page cache (``pagecache.release_written``).
    """
    path = Path(path)
    if data_alignment < 8 or data_alignment % 8:
        raise ValueError(f"data_alignment must be a positive multiple of 8, got {data_alignment}")
    for name, (dtype, shape) in specs.items():
        if dtype not in DTYPES:
            raise _fail(path, f"tensor {name!r}: unknown dtype {dtype!r}")
        if not all(_is_int(d) and d >= 0 for d in shape):
            raise _fail(path, f"tensor {name!r}: bad shape {shape!r}")
    if metadata is not None:
        _parse_metadata(path, dict(metadata))
    header, order, sizes = _header_bytes(specs, metadata, data_alignment, keep_order)
    tmp = path.with_name(path.name + ".partial")
    try:
        with open(tmp, "wb") as fh:
            fh.write(len(header).to_bytes(8, "little"))
            fh.write(header)
            for name, nbytes in zip(order, sizes, strict=True):
                _write_tensor(path, fh, name, specs[name][0], chunks(name), nbytes)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    release_written(path)  # its next reader caches it in large folios (checkpoint/pagecache.py)


def _write_tensor(
    path: Path, fh: BinaryIO, name: str, dtype: str, chunks: Iterable[np.ndarray], nbytes: int
) -> None:
    written = 0
    for chunk in chunks:
        data = _storage_array(path, name, dtype, chunk)
        fh.write(data.reshape(-1).view(np.uint8).data)
        written += data.nbytes
    if written != nbytes:
        raise _fail(path, f"tensor {name!r}: produced {written} bytes, expected {nbytes}")


def write_safetensors(
    path: str | os.PathLike[str],
    tensors: Mapping[str, tuple[str, np.ndarray]],
    metadata: Mapping[str, str] | None = None,
    data_alignment: int = 8,
    keep_order: bool = False,
) -> None:
    """Write ``{name: (dtype_str, array)}`` as a safetensors file (the data at a
    multiple of ``data_alignment`` bytes, the tensors sorted by name or, with
    ``keep_order``, in the mapping's order: ``write_safetensors_stream``).

    BF16 tensors are given as their uint16 bits (see ``f32_to_bf16``).
    """
    specs = {name: (dtype, tuple(arr.shape)) for name, (dtype, arr) in tensors.items()}
    write_safetensors_stream(path, specs, lambda name: [tensors[name][1]], metadata,
                             data_alignment, keep_order)

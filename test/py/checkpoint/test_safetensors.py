"""The hand-written safetensors reader and writer (spec §1.1)."""

from __future__ import annotations

import json
import math
import mmap
import struct
from pathlib import Path

import numpy as np
import pytest

from nanocompile.checkpoint.safetensors import (
    SafetensorsError,
    SafetensorsFile,
    bf16_to_f32,
    f32_to_bf16,
    write_safetensors,
)

# --------------------------------------------------------------------------
# helpers: files built byte by byte, independent of the writer


def _raw_file(path: Path, header: bytes, data: bytes = b"", length: int | None = None) -> Path:
    """Write ``u64 length | header | data``; ``length`` overrides the stored length."""
    n = len(header) if length is None else length
    path.write_bytes(struct.pack("<Q", n) + header + data)
    return path


def _json_file(path: Path, header: object, data: bytes = b"") -> Path:
    return _raw_file(path, json.dumps(header).encode(), data)


def _entry(dtype: str, shape: list, begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def _open_error(path: Path) -> str:
    with pytest.raises(SafetensorsError) as info:
        SafetensorsFile.open(path)
    message = str(info.value)
    assert str(path) in message
    return message


# --------------------------------------------------------------------------
# round trip


ALL_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
    "BF16": np.uint16,
}


def _sample(dtype: type, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if dtype is np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


def test_round_trip_all_dtypes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    shapes = [(3, 5), (7,), (), (2, 0, 4), (2, 3, 4)]
    tensors = {
        f"t.{name}.{i}": (name, _sample(dt, shape, rng))
        for name, dt in ALL_DTYPES.items()
        for i, shape in enumerate(shapes)
    }
    path = tmp_path / "m.safetensors"
    write_safetensors(path, tensors, {"format": "pt", "note": "ü"})
    with SafetensorsFile.open(path) as f:
        assert f.names == sorted(tensors)
        assert f.metadata == {"format": "pt", "note": "ü"}
        for name, (dtype, array) in tensors.items():
            assert f.dtype(name) == dtype
            assert f.shape(name) == array.shape
            got = f.raw(name)
            assert got.dtype == array.dtype
            np.testing.assert_array_equal(got, array)


@pytest.mark.parametrize("alignment", [64, 4096])
def test_writer_puts_the_data_at_the_alignment_asked(tmp_path: Path, alignment: int) -> None:
    path = tmp_path / "m.safetensors"
    # sorted by name: "a" (128 bytes) first, so "b" starts 128 bytes on
    tensors = {"a": ("I8", np.arange(128, dtype=np.int8).reshape(2, 64)),
               "b": ("F32", np.ones(2, np.float32))}
    write_safetensors(path, tensors, data_alignment=alignment)
    n = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert (8 + n) % alignment == 0
    f = SafetensorsFile.open(path)
    try:
        np.testing.assert_array_equal(f.raw("a"), tensors["a"][1])
        np.testing.assert_array_equal(f.raw("b"), tensors["b"][1])
        assert f.raw("a").ctypes.data % min(alignment, mmap.PAGESIZE) == 0
        assert f.raw("b").ctypes.data % 64 == 0
    finally:
        f.close()
    with pytest.raises(ValueError, match="multiple of 8"):
        write_safetensors(path, tensors, data_alignment=12)


def test_writer_layout_is_hf_layout(tmp_path: Path) -> None:
    """Sorted names, contiguous offsets, header padded with spaces to 8 bytes."""
    path = tmp_path / "m.safetensors"
    tensors = {"b": ("F32", np.ones(3, np.float32)), "a": ("I8", np.zeros(1, np.int8))}
    write_safetensors(path, tensors)
    blob = path.read_bytes()
    n = struct.unpack("<Q", blob[:8])[0]
    assert n % 8 == 0
    header = blob[8 : 8 + n]
    assert header.rstrip(b" ") == header.rstrip()
    parsed = json.loads(header)
    assert parsed["a"]["data_offsets"] == [0, 1]
    assert parsed["b"]["data_offsets"] == [1, 13]
    assert len(blob) == 8 + n + 13


def test_reads_file_written_by_hf_safetensors(tmp_path: Path) -> None:
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(1)
    tensors = {"x": rng.standard_normal((4, 3)).astype(np.float32), "y": np.arange(5)}
    path = tmp_path / "hf.safetensors"
    st.save_file(tensors, str(path), metadata={"format": "pt"})
    with SafetensorsFile.open(path) as f:
        assert f.metadata == {"format": "pt"}
        for name, array in tensors.items():
            np.testing.assert_array_equal(f.raw(name), array)


def test_hf_safetensors_reads_our_file(tmp_path: Path) -> None:
    st = pytest.importorskip("safetensors.numpy")
    rng = np.random.default_rng(2)
    w16 = rng.standard_normal((6, 2)).astype(np.float16)
    tensors = {"w": w16, "i": np.arange(3, dtype=np.int32)}
    path = tmp_path / "ours.safetensors"
    write_safetensors(path, {"w": ("F16", tensors["w"]), "i": ("I32", tensors["i"])})
    loaded = st.load_file(str(path))
    for name, array in tensors.items():
        np.testing.assert_array_equal(loaded[name], array)


def test_writer_rejects_float_array_for_bf16(tmp_path: Path) -> None:
    with pytest.raises(SafetensorsError, match="BF16"):
        write_safetensors(tmp_path / "m.safetensors", {"w": ("BF16", np.ones(2, np.float32))})
    assert not list(tmp_path.iterdir())


def test_writer_rejects_unknown_dtype(tmp_path: Path) -> None:
    with pytest.raises(SafetensorsError, match="unknown dtype"):
        write_safetensors(tmp_path / "m.safetensors", {"w": ("F8", np.ones(2, np.uint8))})


# --------------------------------------------------------------------------
# zero copy


def test_raw_is_a_read_only_view_on_the_mapping(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    write_safetensors(path, {"a": ("F32", a), "b": ("BF16", f32_to_bf16(a))})
    with SafetensorsFile.open(path) as f:
        view = f.raw("a")
        assert not view.flags.owndata
        assert not view.flags.writeable
        assert np.shares_memory(view, f.raw("a"))
        base = view
        while isinstance(base, np.ndarray):
            base = base.base
        if isinstance(base, memoryview):
            base = base.obj
        assert isinstance(base, mmap.mmap)
        assert f.f32("a") is not None
        assert np.shares_memory(f.f32("a"), view)
        widened = f.f32("b")
        assert widened.flags.owndata or not np.shares_memory(widened, f.raw("b"))
        np.testing.assert_array_equal(widened, a)


def test_views_survive_close(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"a": ("I32", np.arange(6, dtype=np.int32))})
    f = SafetensorsFile.open(path)
    view = f.raw("a")
    f.close()
    np.testing.assert_array_equal(view, np.arange(6))
    with pytest.raises(SafetensorsError, match="closed"):
        f.raw("a")


def test_unknown_tensor_name(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"a": ("I8", np.zeros(1, np.int8))})
    with SafetensorsFile.open(path) as f, pytest.raises(SafetensorsError, match="'nope'"):
        f.raw("nope")


def test_f32_refuses_inexact_dtypes(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"d": ("F64", np.zeros(1)), "i": ("I64", np.zeros(1, np.int64))})
    with SafetensorsFile.open(path) as f:
        for name in ("d", "i"):
            with pytest.raises(SafetensorsError, match="exactly"):
                f.f32(name)


# --------------------------------------------------------------------------
# rejections, one per malformation


def test_reject_header_over_100_mib(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "m.safetensors", b"{}", length=100 * 1024 * 1024 + 1)
    assert "100 MiB" in _open_error(path)


def test_reject_file_shorter_than_length_field(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(b"\x02\x00\x00")
    assert "truncated" in _open_error(path)


def test_reject_header_length_past_eof(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "m.safetensors", b"{}", length=64)
    assert "truncated" in _open_error(path)


def test_reject_truncated_data(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    write_safetensors(path, {"a": ("F32", np.ones(8, np.float32))})
    path.write_bytes(path.read_bytes()[:-4])
    message = _open_error(path)
    assert "'a'" in message
    assert "truncated" in message


def test_reject_non_json_header(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "m.safetensors", b"{not json}")
    assert "JSON" in _open_error(path)


def test_reject_non_utf8_header(tmp_path: Path) -> None:
    path = _raw_file(tmp_path / "m.safetensors", b'{"\xff": 1}')
    assert "UTF-8" in _open_error(path)


def test_reject_header_not_an_object(tmp_path: Path) -> None:
    path = _json_file(tmp_path / "m.safetensors", [1, 2])
    assert "object" in _open_error(path)


def test_reject_duplicate_tensor_names(tmp_path: Path) -> None:
    entry = json.dumps(_entry("U8", [1], 0, 1))
    path = _raw_file(tmp_path / "m.safetensors", f'{{"a": {entry}, "a": {entry}}}'.encode(), b"\0")
    assert "duplicate" in _open_error(path)


def test_reject_unknown_dtype(tmp_path: Path) -> None:
    path = _json_file(tmp_path / "m.safetensors", {"w": _entry("F8_E4M3", [2], 0, 2)}, b"\0\0")
    message = _open_error(path)
    assert "'w'" in message
    assert "unknown dtype" in message


def test_reject_byte_length_mismatch(tmp_path: Path) -> None:
    path = _json_file(tmp_path / "m.safetensors", {"w": _entry("F32", [2, 2], 0, 12)}, bytes(16))
    message = _open_error(path)
    assert "'w'" in message
    assert "byte length 12" in message


def test_reject_offsets_outside_data(tmp_path: Path) -> None:
    header = {"w": _entry("F32", [2], 8, 16)}
    path = _json_file(tmp_path / "m.safetensors", header, bytes(12))
    message = _open_error(path)
    assert "'w'" in message
    assert "outside" in message


def test_reject_reversed_offsets(tmp_path: Path) -> None:
    path = _json_file(tmp_path / "m.safetensors", {"w": _entry("U8", [0], 4, 2)}, bytes(8))
    assert "invalid data_offsets" in _open_error(path)


def test_reject_negative_offsets(tmp_path: Path) -> None:
    path = _json_file(tmp_path / "m.safetensors", {"w": _entry("U8", [2], -2, 0)}, bytes(8))
    assert "invalid data_offsets" in _open_error(path)


def test_reject_overlapping_tensors(tmp_path: Path) -> None:
    header = {"a": _entry("F32", [2], 0, 8), "b": _entry("F32", [2], 4, 12)}
    path = _json_file(tmp_path / "m.safetensors", header, bytes(12))
    message = _open_error(path)
    assert "'a'" in message
    assert "'b'" in message
    assert "overlap" in message


def test_reject_negative_shape(tmp_path: Path) -> None:
    path = _json_file(tmp_path / "m.safetensors", {"w": _entry("U8", [-1, -2], 0, 2)}, bytes(2))
    assert "shape" in _open_error(path)


def test_reject_non_int_shape(tmp_path: Path) -> None:
    path = _json_file(tmp_path / "m.safetensors", {"w": _entry("U8", [2.0], 0, 2)}, bytes(2))
    assert "shape" in _open_error(path)


def test_reject_bool_shape(tmp_path: Path) -> None:
    path = _json_file(tmp_path / "m.safetensors", {"w": _entry("U8", [True], 0, 1)}, bytes(1))
    assert "shape" in _open_error(path)


def test_reject_missing_entry_field(tmp_path: Path) -> None:
    path = _json_file(tmp_path / "m.safetensors", {"w": {"dtype": "U8", "shape": [1]}}, bytes(1))
    assert "data_offsets" in _open_error(path)


def test_reject_non_str_metadata_value(tmp_path: Path) -> None:
    header = {"__metadata__": {"format": "pt", "version": 2}}
    assert "version" in _open_error(_json_file(tmp_path / "m.safetensors", header))


def test_reject_metadata_not_an_object(tmp_path: Path) -> None:
    header = {"__metadata__": ["format", "pt"]}
    assert "__metadata__" in _open_error(_json_file(tmp_path / "m.safetensors", header))


def test_reject_missing_file(tmp_path: Path) -> None:
    assert "cannot read" in _open_error(tmp_path / "absent.safetensors")


def test_accepts_empty_file_and_gaps(tmp_path: Path) -> None:
    """No tensors is valid; so is unused padding between tensors."""
    with SafetensorsFile.open(_json_file(tmp_path / "e.safetensors", {})) as f:
        assert f.names == []
    header = {"a": _entry("U8", [1], 0, 1), "b": _entry("U8", [1], 4, 5)}
    path = _json_file(tmp_path / "g.safetensors", header, b"\x07\0\0\0\x09")
    with SafetensorsFile.open(path) as f:
        assert f.raw("a")[0] == 7
        assert f.raw("b")[0] == 9


# --------------------------------------------------------------------------
# bf16


def _reference_bf16_value(bits: int) -> float:
    """The value a bf16 pattern denotes, from its fields (1 sign, 8 exponent, 7 mantissa)."""
    sign = -1.0 if bits >> 15 else 1.0
    exponent, mantissa = (bits >> 7) & 0xFF, bits & 0x7F
    if exponent == 0xFF:
        return sign * math.inf if mantissa == 0 else math.nan
    if exponent == 0:
        return sign * mantissa / 128 * 2.0**-126
    return sign * (1 + mantissa / 128) * 2.0 ** (exponent - 127)


def test_bf16_widening_exact_on_all_bit_patterns() -> None:
    every = np.arange(65536, dtype=np.uint16)
    got = bf16_to_f32(every)
    assert got.dtype == np.float32
    expected = np.array([_reference_bf16_value(int(b)) for b in every], np.float64)
    with np.errstate(invalid="ignore"):
        widened = got.astype(np.float64)
    np.testing.assert_array_equal(widened, expected)  # NaN == NaN here
    np.testing.assert_array_equal(np.signbit(got), every >= 0x8000)


def test_bf16_widening_preserves_nan_and_inf() -> None:
    bits = np.array([0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0000, 0x8000, 0x0001], np.uint16)
    got = bf16_to_f32(bits)
    assert got[0] == np.inf
    assert got[1] == -np.inf
    assert np.isnan(got[2:5]).all()
    assert got.view(np.uint32)[4] == 0x7F810000  # signalling payload kept
    assert got[5] == 0
    assert not np.signbit(got[5])
    assert np.signbit(got[6])
    assert got[7] == np.float32(2.0**-133)  # smallest bf16 subnormal


def test_bf16_widening_rejects_non_uint16() -> None:
    with pytest.raises(TypeError):
        bf16_to_f32(np.zeros(2, np.float32))


def test_bf16_widening_into_a_given_array_on_all_bit_patterns() -> None:
    every = np.arange(65536, dtype=np.uint16).reshape(256, 256)
    out = np.full((256, 256), np.nan, np.float32)
    got = bf16_to_f32(every, out)
    assert got is out
    expected = np.array([_reference_bf16_value(int(b)) for b in every.ravel()], np.float64)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out.ravel().astype(np.float64), expected)
    np.testing.assert_array_equal(np.signbit(out), every >= 0x8000)
    for bad in (np.zeros((256, 256), np.float64), np.zeros((256, 255), np.float32)):
        with pytest.raises(ValueError, match="out must be float32 of shape"):
            bf16_to_f32(every, bad)


def _reference_rne(bits: int) -> int:
    """Round an f32 bit pattern to bf16 by comparing exact distances (ints)."""
    low = bits & 0xFFFF0000
    rem = bits - low
    if rem > 0x8000 or (rem == 0x8000 and (low >> 16) & 1):
        return (low >> 16) + 1
    return low >> 16


def test_f32_to_bf16_rounds_to_nearest_even() -> None:
    rng = np.random.default_rng(3)
    finite = rng.integers(0, 2**32, 20000, dtype=np.uint32)
    finite = finite[(finite & 0x7F800000) != 0x7F800000]
    ties = (rng.integers(0, 2**16, 2000, dtype=np.uint32) << 16) | 0x8000
    ties = ties[(ties & 0x7F800000) != 0x7F800000]
    bits = np.concatenate([finite, ties, np.array([0x7F7FFFFF, 0x3F808000, 0x3F818000], np.uint32)])
    got = f32_to_bf16(bits.view(np.float32))
    expected = np.array([_reference_rne(int(b)) & 0xFFFF for b in bits], np.uint16)
    np.testing.assert_array_equal(got, expected)
    assert got[-2] == 0x3F80
    assert got[-1] == 0x3F82
    assert bf16_to_f32(got[-3:-2])[0] == np.inf  # f32 max rounds past bf16 max


def test_f32_to_bf16_keeps_nan_and_inf() -> None:
    values = np.array([np.inf, -np.inf, np.nan, -np.nan], np.float32)
    back = bf16_to_f32(f32_to_bf16(values))
    assert back[0] == np.inf
    assert back[1] == -np.inf
    assert np.isnan(back[2:]).all()
    assert np.signbit(back[3])


@pytest.mark.oracle
def test_f32_to_bf16_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    bits = rng.integers(0, 2**32, 100000, dtype=np.uint32)
    bits = bits[(bits & 0x7F800000) != 0x7F800000]
    values = bits.view(np.float32)
    ours = f32_to_bf16(values)
    theirs = torch.from_numpy(values.copy()).to(torch.bfloat16).view(torch.int16).numpy()
    np.testing.assert_array_equal(ours, theirs.view(np.uint16))

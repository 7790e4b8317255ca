"""Checkpoint layer: safetensors I/O, the Qwen2 config, snapshots, synthetic weights."""

from nanocompile.checkpoint.config import ConfigError, Qwen2Config
from nanocompile.checkpoint.safetensors import (
    SafetensorsError,
    SafetensorsFile,
    bf16_to_f32,
    f32_to_bf16,
    write_safetensors,
)
from nanocompile.checkpoint.snapshot import Snapshot, SnapshotError

__all__ = [
    "ConfigError",
    "Qwen2Config",
    "SafetensorsError",
    "SafetensorsFile",
    "Snapshot",
    "SnapshotError",
    "bf16_to_f32",
    "f32_to_bf16",
    "write_safetensors",
]

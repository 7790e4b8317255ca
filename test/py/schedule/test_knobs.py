"""The projections' schedule knobs (``schedule/knobs.py``, issue 20).

* the hand-written schedules are one point of each space: for every
  projection of the model (tiny in the quick suite, full size in the full
  one), every weight format and both vector archs, ``default_schedules`` at
  ``hand_knobs`` lists exactly the candidates ``default_schedules`` lists
  without knobs (and the default model's C was byte-identical before and
  after the knobs existed: README, Phase 5);
* a point other than the hand one gives other candidates (the knobs reach
  the schedules), and each knob that ``knob_space`` offers changes them;
* knobs print and parse back, bad ones are one-line errors; the kernel key
  ignores the kernel's name and sees its IR and the arch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nanocompile import api
from nanocompile.compiler import CompileOptions, Pipeline
from nanocompile.dialects import loop
from nanocompile.schedule.defaults import default_schedules, hand_knobs, knob_space
from nanocompile.schedule.knobs import ProjectionKnobs, kernel_key
from nanocompile.targets.arch import AVX2, AVX512, SCALAR

FORMATS = ("f32", "bf16", "int8", "int8-dot")
# distinct projection kernels per arch: q, k/v (one kernel), o, gate/up, down, LM head;
# kernel B's program has one more (a projection of the quantized activations whose
# row sums come from another kernel, and one of the unquantized: fused_matmul_i8)
# distinct projection kernels; kernel B's gate and up are one matmul_i8 kernel
# launched twice since session 23 (its SiLU an elementwise kernel of its own): 7 before
PROJECTIONS = {"f32": 6, "bf16": 6, "int8": 6, "int8-dot": 6}


def _kernels(snapshot: Path | None, fmt: str) -> list[loop.KernelOp]:
    model = api.load(snapshot, weights=fmt)
    module = Pipeline(model._graph(True), CompileOptions(quantize=model._quantize)).module("loop")
    return [op for op in module.ops if isinstance(op, loop.KernelOp)]


_LOWERED: dict[str, list[loop.KernelOp]] = {}


def _tiny(snapshot: Path, fmt: str) -> list[loop.KernelOp]:
    """The tiny model's kernels in format ``fmt``, lowered once per session."""
    if fmt not in _LOWERED:
        _LOWERED[fmt] = _kernels(snapshot, fmt)
    return _LOWERED[fmt]


@pytest.fixture
def tiny_kernels(tiny_snapshot: Path) -> dict[str, list[loop.KernelOp]]:
    """Every format's kernels (the tests of all formats at once are slow: 4 lowerings)."""
    return {fmt: _tiny(tiny_snapshot, fmt) for fmt in FORMATS}


def _format_params() -> list[object]:
    """The formats, bf16 (the default) in the quick suite, the others in the full one."""
    return [pytest.param(f, id=f, marks=[] if f == "bf16" else [pytest.mark.slow])
            for f in FORMATS]


def _hand_is_the_default(kernels: list[loop.KernelOp]) -> int:
    projections = 0
    for arch in (AVX2, AVX512):
        for kernel in kernels:
            hand = hand_knobs(kernel, arch)
            if hand is None:
                assert knob_space(kernel, arch) == {}
                continue
            projections += 1
            assert default_schedules(kernel, arch, knobs=hand) == \
                default_schedules(kernel, arch), kernel.sym_name.data
    return projections


@pytest.mark.parametrize("fmt", _format_params())
def test_hand_knobs_are_the_default_schedules(tiny_snapshot: Path, fmt: str) -> None:
    assert _hand_is_the_default(_tiny(tiny_snapshot, fmt)) == 2 * PROJECTIONS[fmt]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", FORMATS)
def test_hand_knobs_are_the_default_schedules_full_size(full_snapshot: Path, fmt: str) -> None:
    assert _hand_is_the_default(_kernels(full_snapshot, fmt)) == 2 * PROJECTIONS[fmt]


def _knobs_that_change(kernels_by_format: dict[str, list[loop.KernelOp]]) -> set[str]:
    """Checks that every value ``knob_space`` offers changes the candidates (``decode``
    of an f32 weight or kernel A, whose hand point has ``strided`` off, with it on:
    the columns of the strided tile); the knobs offered somewhere."""
    seen: set[str] = set()
    for fmt, kernels in kernels_by_format.items():
        for kernel in kernels:
            hand = hand_knobs(kernel, AVX512)
            if hand is None:
                continue
            for name, values in knob_space(kernel, AVX512).items():
                for value in values:
                    if value == getattr(hand, name):
                        continue
                    point = hand
                    if name == "decode" and not hand.strided and _adjacent_decode_is_the_tile(
                            kernel, hand):
                        point = hand.replace(strided=True)
                    before = default_schedules(kernel, AVX512, knobs=point)
                    other = default_schedules(kernel, AVX512, knobs=point.replace(**{name: value}))
                    assert other != before, (fmt, kernel.sym_name.data, name, value)
                    seen.add(name)
    return seen


def _adjacent_decode_is_the_tile(kernel: loop.KernelOp, hand: ProjectionKnobs) -> bool:
    """Without ``strided`` the hand point's decode is the register tile's columns
    (an f32 weight), so ``decode`` alone changes nothing there."""
    return default_schedules(kernel, AVX512, knobs=hand.replace(decode=2)) == \
        default_schedules(kernel, AVX512, knobs=hand)


@pytest.mark.slow
def test_every_offered_knob_changes_the_candidates(
        tiny_kernels: dict[str, list[loop.KernelOp]]) -> None:
    # slp: gate/up; strided: every weight format; decode: the strided tile's columns,
    # or kernel A's sums of four vectors; the tiny model's rows are too short for
    # row_block (full size below)
    assert _knobs_that_change(tiny_kernels) == {"rows", "columns", "decode", "strided", "slp",
                                                "prefetch"}


@pytest.mark.slow
def test_every_offered_knob_changes_the_candidates_full_size(full_snapshot: Path) -> None:
    kernels = {fmt: _kernels(full_snapshot, fmt) for fmt in ("bf16", "int8")}
    assert _knobs_that_change(kernels) == {"rows", "columns", "decode", "strided", "slp",
                                           "prefetch"}


@pytest.mark.slow
def test_row_block_is_never_searched_but_still_a_knob_full_size(full_snapshot: Path) -> None:
    # the search cannot see what row_block buys (prompts past its 64-row prefill):
    # knob_space offers the hand value alone, while the knob still changes the
    # schedules of the long-row projections (a recorded point may carry it)
    changed = 0
    for fmt in ("f32", "bf16", "int8"):
        for kernel in _kernels(full_snapshot, fmt):
            hand = hand_knobs(kernel, AVX512)
            if hand is None:
                continue
            assert knob_space(kernel, AVX512)["row_block"] == (hand.row_block,)
            if default_schedules(kernel, AVX512, knobs=hand.replace(row_block=not hand.row_block)) \
                    != default_schedules(kernel, AVX512, knobs=hand):
                changed += 1
    assert changed > 0


def test_every_offered_knob_of_the_default_format_changes_the_candidates(
        tiny_snapshot: Path) -> None:
    # bf16 (the default): all but row_block (tiny rows) and kernel A's decode jam
    assert _knobs_that_change({"bf16": _tiny(tiny_snapshot, "bf16")}) == {
        "rows", "columns", "decode", "strided", "slp", "prefetch"}


def test_scalar_arch_has_no_knobs(tiny_snapshot: Path) -> None:
    for kernel in _tiny(tiny_snapshot, "bf16"):
        assert hand_knobs(kernel, SCALAR) is None
        assert knob_space(kernel, SCALAR) == {}


def test_knobs_round_trip_and_refuse_bad_text() -> None:
    knobs = ProjectionKnobs(3, 2, 32, strided=False, row_block=True, slp=False)
    assert knobs.text() == "rows=3 columns=2 decode=32 strided=0 row_block=1 slp=0"
    assert ProjectionKnobs.parse(knobs.text()) == knobs
    assert ProjectionKnobs.parse("columns=4 rows=6") == ProjectionKnobs(6, 4)
    for bad, message in [("rows=6", "columns missing"), ("rows=6 columns=x", "name=integer"),
                         ("rows=6 columns=4 tiles=2", "name=integer"),
                         ("rows=0 columns=4", "rows: expected an integer in 1..64"),
                         ("rows=65 columns=4", "rows: expected an integer in 1..64")]:
        with pytest.raises(ValueError, match=message):
            ProjectionKnobs.parse(bad)
    with pytest.raises(ValueError, match="slp: expected true or false"):
        ProjectionKnobs(2, 2, slp=2)  # type: ignore[arg-type]


def test_kernel_key_ignores_the_name_and_sees_ir_and_arch(tiny_snapshot: Path) -> None:
    kernels = [k for k in _tiny(tiny_snapshot, "bf16") if hand_knobs(k, AVX512) is not None]
    keys = [kernel_key(k, "avx512") for k in kernels]
    assert len(set(keys)) == len(keys)  # distinct kernels, distinct keys
    renamed = kernels[0].clone()
    renamed.sym_name = type(renamed.sym_name)("another_name")
    assert kernel_key(renamed, "avx512") == keys[0]
    assert kernel_key(kernels[0], "avx2") != keys[0]
    # the same projection in f32 and bf16 storage is another kernel
    f32 = [kernel_key(k, "avx512") for k in _tiny(tiny_snapshot, "f32")
           if hand_knobs(k, AVX512) is not None]
    assert not set(f32) & set(keys)


def test_kernel_key_is_the_same_in_either_kv_form(tiny_snapshot: Path) -> None:
    """The projections of the program with the KV cache as its state (the API's)
    and with the past as inputs (the bench engines') are the same kernels, but
    list the program's symbols (``capacity`` in one only): one key."""
    from nanocompile.checkpoint.snapshot import Snapshot
    from nanocompile.models.qwen2 import Qwen2GraphOptions, build_qwen2

    config = Snapshot.open(tiny_snapshot).config
    keys = []
    for kv in ("state", "inputs"):
        graph = build_qwen2(config, Qwen2GraphOptions(last_only=True, weights="bf16", kv=kv))
        module = Pipeline(graph, CompileOptions()).module("loop")
        kernels = [op for op in module.ops if isinstance(op, loop.KernelOp)]
        keys.append({kernel_key(k, "avx512") for k in kernels
                     if hand_knobs(k, AVX512) is not None})
    assert len(keys[0]) == 6
    assert keys[0] == keys[1]


"""The nanoinfer adapter end to end on every run, with the test suite's stand-in.

``standin/nanoinfer`` implements spec §7's interface over the hand-written
NumPy engine (``bench/numpy_engine.py``) and nanocompile's tokenizer.
``NANOINFER_PATH`` points at it exactly as at a real checkout, so checkout
discovery, the import, every adapter call and every comparison of
test_nanoinfer_oracle.py run here on the tiny model; a broken adapter fails
here, without nanoinfer.

The claims are the stand-in's, not nanoinfer's: the NumPy engine's float32
operation order differs from the interpreter's (BLAS blocking, ``1/sqrt``
applied once), so its logits and cache agree with nanocompile within
rounding, 1e-5 relative to the largest |logit| (the bound of
test_numpy_engine.py; the logits reach |40|, one ulp there is 3.8e-6), and
1e-5 absolute on the O(1) cache values. What must be bitwise is bitwise:
the weights (exact widening) and the adapter's own output against the NumPy
engine called directly (the adapter adds no arithmetic).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from _adapter import (
    STANDIN_ROOT,
    AdapterError,
    CheckoutMissing,
    NanoinferOracle,
    find_checkout,
    pinned_blas_threads,
)
from _differential import (
    BITWISE,
    PROMPT_KEYS,
    Bound,
    Side,
    check_cached_steps,
    check_greedy,
    check_logits,
    check_tokenizer,
    check_weights,
    prompt_text,
)

from bench import nanoinfer_engine
from bench.numpy_engine import NumpyQwen2

pytestmark = pytest.mark.nanoinfer

CLOSE = Bound("rel", 1e-5)
CACHE = Bound("abs", 1e-5)
C_LOGITS = Bound("abs", 1e-3)


def _ids(side: Side, key: str) -> list[int]:
    return side.interp.tokenizer.encode(prompt_text(side.dir, key))


# ---- finding a checkout ------------------------------------------------------------


def test_missing_checkout_gives_the_one_line_reason(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nanoinfer_engine, "default_location", lambda: tmp_path / "nanoinfer")
    with pytest.raises(CheckoutMissing) as unset:
        find_checkout({})
    assert str(unset.value) == ("nanoinfer checkout not found: set NANOINFER_PATH="
                                "/path/to/nanoinfer or place it at ../nanoinfer")
    with pytest.raises(CheckoutMissing) as wrong:
        find_checkout({"NANOINFER_PATH": str(tmp_path)})
    assert str(wrong.value) == (f"nanoinfer checkout not found: NANOINFER_PATH={tmp_path} has "
                                "no nanoinfer/model.py (point it at the directory that "
                                "contains nanoinfer/)")
    assert "\n" not in str(unset.value) + str(wrong.value)


def test_default_location_is_beside_the_repository(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert nanoinfer_engine.default_location() == nanoinfer_engine.REPO.parent / "nanoinfer"
    (tmp_path / "nanoinfer" / "nanoinfer").mkdir(parents=True)
    (tmp_path / "nanoinfer" / "nanoinfer" / "model.py").write_text("")
    monkeypatch.setattr(nanoinfer_engine, "default_location", lambda: tmp_path / "nanoinfer")
    assert find_checkout({}) == (tmp_path / "nanoinfer").resolve()


def test_the_standin_is_found_and_imported_from_its_checkout(standin: Side) -> None:
    assert find_checkout() == STANDIN_ROOT.resolve()
    assert standin.oracle.root == STANDIN_ROOT.resolve()
    for module in standin.oracle.modules.values():
        assert Path(module.__file__ or "").is_relative_to(STANDIN_ROOT / "nanoinfer")


# ---- the adapter's plumbing, bitwise -----------------------------------------------


def test_adapter_adds_no_arithmetic(standin: Side) -> None:
    """Logits and cache through the adapter are the NumPy engine's own bits."""
    direct = NumpyQwen2.from_snapshot(standin.interp.snapshot)
    ids = _ids(standin, "france")
    with pinned_blas_threads(1):
        cache = direct.new_cache(len(ids) + 1)
        ref = direct.forward(ids, cache, all_logits=True)
        theirs = standin.oracle.new_cache(len(ids) + 1)
        BITWISE.check(standin.oracle.logits(ids, theirs), ref, "logits")
    keys, values = standin.oracle.cache_arrays(theirs, len(ids), direct.config.num_key_value_heads,
                                               direct.config.head_dim)
    BITWISE.check(keys, cache.keys[:, :, :len(ids)], "keys")
    BITWISE.check(values, cache.values[:, :, :len(ids)], "values")


def test_weights_bitwise_identical(standin: Side) -> None:
    check_weights(standin.oracle, standin.interp.snapshot)


def test_tokenizer_ids_identical(standin: Side) -> None:
    check_tokenizer(standin.oracle, standin.interp.tokenizer, standin.dir)


@pytest.mark.parametrize("threads", [1, 2])
def test_blas_threads_are_pinned(threads: int) -> None:
    import threadpoolctl

    with pinned_blas_threads(threads):
        pools = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert pools
        assert all(p["num_threads"] == threads for p in pools)


def test_bitwise_means_bits() -> None:
    a = np.array([1.0, 0.0, 2.0], np.float32)
    BITWISE.check(a, a.copy(), "same")
    one_ulp = a.copy()
    one_ulp[2] = np.nextafter(one_ulp[2], np.float32(3))
    with pytest.raises(AssertionError, match="1 of 3 not bitwise equal"):
        BITWISE.check(one_ulp, a, "one ulp")
    with pytest.raises(AssertionError, match="not bitwise"):
        BITWISE.check(np.array([-0.0], np.float32), np.array([0.0], np.float32), "signed zero")
    Bound("abs", 1e-6).check(one_ulp, a, "within abs")


def test_unknown_cache_layout_is_an_adapter_error() -> None:
    with pytest.raises(AdapterError, match="cannot find keys/values"):
        NanoinferOracle.cache_arrays(SimpleNamespace(layers=[]), 1, 2, 4)
    odd = np.zeros((1, 5, 3, 7), np.float32)
    with pytest.raises(AdapterError, match="has shape"):
        NanoinferOracle.cache_arrays(SimpleNamespace(keys=odd, values=odd), 1, 2, 4)


def test_cache_layouts_the_adapter_reads() -> None:
    """One array or a per-layer list; heads before or after positions."""
    heads_first = np.arange(48, dtype=np.float32).reshape(1, 2, 6, 4)
    positions_first = np.ascontiguousarray(heads_first.transpose(0, 2, 1, 3))
    for cache in (SimpleNamespace(keys=heads_first, values=heads_first),
                  SimpleNamespace(k=list(positions_first), v=list(positions_first))):
        keys, values = NanoinferOracle.cache_arrays(cache, 3, 2, 4)
        BITWISE.check(np.ascontiguousarray(keys), heads_first[:, :, :3], "keys")
        BITWISE.check(np.ascontiguousarray(values), heads_first[:, :, :3], "values")


# ---- the comparisons of test_nanoinfer_oracle.py, at the stand-in's bounds ---------


@pytest.mark.parametrize("key", PROMPT_KEYS)
def test_interpreter_logits_close(standin: Side, key: str) -> None:
    with pinned_blas_threads(1):
        check_logits(standin.oracle, standin.interp.engine, _ids(standin, key), CLOSE)


def test_interpreter_cached_steps_and_cache_close(standin: Side) -> None:
    with pinned_blas_threads(1):
        check_cached_steps(standin.oracle, standin.interp.engine, _ids(standin, "fibonacci"),
                           logits=CLOSE, cache=CACHE)


def test_c_logits_within_1e_3(standin: Side) -> None:
    check_logits(standin.oracle, standin.compiled.engine, _ids(standin, "long-mixed"), C_LOGITS)


def test_c_cached_steps_and_cache_close(standin: Side) -> None:
    check_cached_steps(standin.oracle, standin.compiled.engine, _ids(standin, "fibonacci"),
                       logits=C_LOGITS, cache=CACHE)


# the non-slow suite's 3-minute budget; the full suite runs it: the chat turn and the long
# mixed prompt in the quick suite, the two short prompts (the same calls) slow
QUICK_GREEDY_KEYS = ("chat", "long-mixed")


@pytest.mark.parametrize("key", [
    k if k in QUICK_GREEDY_KEYS else pytest.param(k, marks=pytest.mark.slow)
    for k in PROMPT_KEYS])
def test_greedy_32_tokens_identical(standin: Side, key: str) -> None:
    check_greedy(standin.oracle, standin.interp.engine, _ids(standin, key))
    check_greedy(standin.oracle, standin.compiled.engine, _ids(standin, key))

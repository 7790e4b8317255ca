"""nanoinfer, the author's hand-written engine, as a bench peer (spec §7).

nanoinfer is a checkout, not a package: it is found at ``$NANOINFER_PATH`` or
at ``../nanoinfer`` beside this repository, recognised by
``nanoinfer/model.py``, and imported by putting the checkout first on
``sys.path``. Nothing in ``src/`` imports it; the differential tests
(``test/py/nanoinfer/``) find it through :func:`locate_checkout` and
:func:`import_nanoinfer` too, so the bench and the tests agree on what "a
checkout" is.

=============== =========================================================
nanoinfer-f32   ``nanoinfer.model.Qwen2.from_model_dir(dir)``: its f32
                NumPy engine; greedy steps through ``next_token_logits``
                with its own KV cache (``new_cache``)
nanoinfer-int8  nanoinfer's int8 engine. Spec §7 names no int8 entry
                point, so the user names it: ``NANOINFER_INT8=module:attr``,
                a callable taking the snapshot directory (a str) and
                returning an object with §7's ``new_cache`` and
                ``next_token_logits`` (imported after the checkout is on
                ``sys.path``)
=============== =========================================================

Without a checkout (or, for int8, without ``NANOINFER_INT8``) building an
engine raises ``EngineUnavailable`` with one line saying how to enable it,
and ``bench run`` skips it; a default run (no ``--engines``) lists only the
engines that can be built (:func:`available_engines`).

Threads, per slot as the bench driver sets them: nanoinfer-f32 is NumPy, so
its threads are the BLAS pools, which ``bench run`` pins per slot with
threadpoolctl (the same pools: one process, one BLAS). nanoinfer-int8's own
kernels have their own threads; when the object the factory returns has a
``set_threads(n)`` method, :meth:`NanoinferModel.new_state` calls it with
``NANOCOMPILE_THREADS`` (set by the driver per slot) whenever that changes.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

ENV = "NANOINFER_PATH"
INT8_ENV = "NANOINFER_INT8"
MARKER = Path("nanoinfer") / "model.py"
REPO = Path(__file__).resolve().parents[1]
HOW_TO_ENABLE = f"set {ENV}=/path/to/nanoinfer or place it at ../nanoinfer"
INT8_MISSING = (f"spec §7 names no int8 entry point of nanoinfer: set {INT8_ENV}=module:attr, "
                "a callable(snapshot_dir) returning its int8 model (docs/nanoinfer.md)")
ENGINE_KINDS: dict[str, str] = {"nanoinfer-f32": "f32", "nanoinfer-int8": "int8"}


# --------------------------------------------------------------------------
# finding and importing the checkout


def default_location() -> Path:
    """``../nanoinfer`` relative to the repository root."""
    return REPO.parent / "nanoinfer"


def locate_checkout(environ: Mapping[str, str] | None = None) -> tuple[Path | None, str]:
    """The checkout's root (the directory holding ``nanoinfer/model.py``), or ``None``
    and the one-line reason.

    ``$NANOINFER_PATH`` when set (and then only it: a wrong path is reported,
    not silently replaced by ``../nanoinfer``), else ``../nanoinfer``.
    """
    env = os.environ if environ is None else environ
    given = env.get(ENV, "")
    if given:
        root = Path(given).expanduser()
        if (root / MARKER).is_file():
            return root.resolve(), ""
        return None, (f"nanoinfer checkout not found: {ENV}={given} has no {MARKER.as_posix()} "
                      "(point it at the directory that contains nanoinfer/)")
    root = default_location()
    if (root / MARKER).is_file():
        return root.resolve(), ""
    return None, f"nanoinfer checkout not found: {HOW_TO_ENABLE}"


def checkout_present(environ: Mapping[str, str] | None = None) -> bool:
    """True when :func:`locate_checkout` finds a checkout (a file test, imports nothing)."""
    return locate_checkout(environ)[0] is not None


def available_engines(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The nanoinfer engines that can be built here (file tests; imports nothing):
    nanoinfer-f32 with a checkout, nanoinfer-int8 with one and ``NANOINFER_INT8``."""
    env = os.environ if environ is None else environ
    if not checkout_present(env):
        return ()
    return ("nanoinfer-f32", "nanoinfer-int8") if env.get(INT8_ENV) else ("nanoinfer-f32",)


def _module_dirs(module: ModuleType) -> list[Path]:
    file = getattr(module, "__file__", None)
    if file:
        return [Path(file).resolve().parent]
    return [Path(p).resolve() for p in getattr(module, "__path__", [])]


def _comes_from(module: ModuleType, package: Path) -> bool:
    dirs = _module_dirs(module)
    return bool(dirs) and all(d.is_relative_to(package) for d in dirs)


def import_nanoinfer(root: Path) -> ModuleType:
    """Import ``nanoinfer`` from the checkout at ``root``; returns ``nanoinfer.model``.

    The checkout goes first on ``sys.path`` (and stays there: nanoinfer may
    import its own modules lazily). Any ``nanoinfer`` modules already imported
    from elsewhere (another checkout, the test suite's stand-in, a namespace
    package) are dropped first, and the result is checked to come from
    ``root``, so two checkouts in one process never mix.
    """
    root = Path(root).resolve()
    package = root / "nanoinfer"
    for name in [m for m in sys.modules if m == "nanoinfer" or m.startswith("nanoinfer.")]:
        if not _comes_from(sys.modules[name], package):  # kept: an extension cannot reload
            del sys.modules[name]
    while str(root) in sys.path:
        sys.path.remove(str(root))
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    model = importlib.import_module("nanoinfer.model")
    if not _comes_from(model, package):
        raise ImportError(f"nanoinfer.model was imported from {model.__file__}, not from the "
                          f"checkout {root}")
    return model


def checkout_commit(root: Path) -> str | None:
    """``git rev-parse HEAD`` of the checkout (``None`` when it is not a git work tree)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def resolve_factory(spec: str) -> Callable[..., Any]:
    """``"module:attr.attr"`` -> the callable it names (``NANOINFER_INT8``)."""
    module_name, sep, attrs = spec.partition(":")
    if not sep or not module_name or not attrs:
        raise ValueError(f"{INT8_ENV}={spec!r}: expected module:attr")
    target: Any = importlib.import_module(module_name)
    for attr in attrs.split("."):
        target = getattr(target, attr)
    if not callable(target):
        raise TypeError(f"{INT8_ENV}={spec!r} does not name a callable")
    return target


# --------------------------------------------------------------------------
# the engine


def slot_threads() -> int | None:
    """``NANOCOMPILE_THREADS`` (the bench driver sets it per slot), or ``None``."""
    value = os.environ.get("NANOCOMPILE_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


class NanoinferModel:
    """A nanoinfer model, one greedy step at a time (the bench's ``Model`` protocol)."""

    def __init__(self, model: Any, kind: str, root: Path,
                 set_threads: Callable[[int], Any] | None = None,
                 factory: str | None = None) -> None:
        self.model = model
        self.kind = kind
        self.root = root
        self.factory = factory
        self._set_threads = set_threads
        self.threads: int | None = None  # what set_threads was last given

    def details(self) -> dict[str, Any]:
        """Facts for the bench record."""
        own = ("set_threads(NANOCOMPILE_THREADS) per slot" if self._set_threads
               else "none besides BLAS")
        return {
            "checkout": str(self.root),
            "commit": checkout_commit(self.root),
            "kind": self.kind,
            "factory": self.factory,
            "threads": f"BLAS pools pinned per slot by bench run (threadpoolctl); own: {own}",
            "sampling": "argmax of next_token_logits (no sampler)",
        }

    def new_state(self, capacity: int) -> Any:
        """A fresh nanoinfer KV cache; first applies the slot's thread count."""
        wanted = slot_threads()
        if self._set_threads is not None and wanted is not None and wanted != self.threads:
            self._set_threads(wanted)
            self.threads = wanted
        return self.model.new_cache(capacity)

    def next_token(self, ids: Sequence[int], state: Any) -> int:
        """Run ``ids`` after the cache's tokens; the argmax of the last position."""
        logits = np.asarray(self.model.next_token_logits([int(t) for t in ids], cache=state))
        return int(np.argmax(logits[-1] if logits.ndim == 2 else logits))


def _unavailable(message: str) -> Exception:
    from bench.engines import EngineUnavailable

    return EngineUnavailable(message)


def build_model(snapshot_dir: Path, kind: str) -> NanoinferModel:
    """The bench engine ``kind`` ("f32" or "int8") on the snapshot in ``snapshot_dir``.

    Raises ``EngineUnavailable`` without a checkout, and for int8 without
    ``NANOINFER_INT8``.
    """
    if kind not in ("f32", "int8"):
        raise ValueError(f"unknown nanoinfer engine kind {kind!r}")
    root, reason = locate_checkout()
    if root is None:
        raise _unavailable(reason)
    factory = os.environ.get(INT8_ENV, "") if kind == "int8" else ""
    if kind == "int8" and not factory:
        raise _unavailable(INT8_MISSING)
    module = import_nanoinfer(root)
    if kind == "f32":
        return NanoinferModel(module.Qwen2.from_model_dir(str(snapshot_dir)), kind, root)
    model = resolve_factory(factory)(str(snapshot_dir))
    set_threads = getattr(model, "set_threads", None)
    return NanoinferModel(model, kind, root, set_threads if callable(set_threads) else None,
                          factory)

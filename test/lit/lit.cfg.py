"""lit configuration for nanocompile's FileCheck tests."""

import os
import shutil
import sys

import lit.formats

config.name = "nanocompile"  # noqa: F821
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821
config.suffixes = [".mlir"]  # noqa: F821
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["lit.cfg.py", "Inputs", "Output"]  # noqa: F821

# A venv that is not activated is not on PATH: put the bin dir of the Python
# running lit first, so `nc-opt` and `filecheck` are the project's own.
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join(  # noqa: F821
    [bin_dir, os.environ.get("PATH", "")]
)
for var in ("HOME", "NANOCOMPILE_CACHE_DIR", "NANOCOMPILE_THREADS", "TMPDIR"):
    if var in os.environ:
        config.environment[var] = os.environ[var]  # noqa: F821

# Round-trip substitutions: print, re-parse, print again (custom and generic).
config.substitutions.append(  # noqa: F821
    ("%roundtrip", "nc-opt %s | nc-opt | filecheck %s")
)
config.substitutions.append(  # noqa: F821
    ("%generic-roundtrip",
     "nc-opt %s --print-op-generic | nc-opt | filecheck %s")
)

if shutil.which("gcc"):
    config.available_features.add("gcc")  # noqa: F821

# The CPU's vector ISAs (Linux /proc/cpuinfo, as the compiler reads them): tests
# that run AVX-512 code need avx512f (test/lit/targets/avx512/lit.local.cfg); the
# int8-dot paths' printing is checked against the flags (NANOCOMPILE_INT8_DOT).
from nanocompile.targets.arch import cpu_flags  # noqa: E402

for flag in ("avx2", "avx512f", "avx512vl", "avx_vnni", "avx512_vnni"):
    if flag in cpu_flags():
        config.available_features.add(flag)  # noqa: F821

"""docs/pipeline.md is exactly what ``tools/pipeline_doc.py`` prints.

The page says it is printed by the compiler and cannot drift; this test is
what makes that true: it runs the generator as the page's own command does
(``python tools/pipeline_doc.py > docs/pipeline.md``) and compares the text.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "pipeline_doc.py"
DOC = ROOT / "docs" / "pipeline.md"


def test_pipeline_doc_matches_its_generator(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("nanocompile_pipeline_doc_tool", TOOL)
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tool.main()
    generated = capsys.readouterr().out
    committed = DOC.read_text(encoding="utf-8")
    if generated != committed:
        got, want = committed.splitlines(), generated.splitlines()
        line = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                    min(len(got), len(want)))
        pytest.fail(
            f"docs/pipeline.md has drifted from tools/pipeline_doc.py at line {line + 1}: "
            f"expected {want[line] if line < len(want) else '<end of file>'!r}, "
            f"got {got[line] if line < len(got) else '<end of file>'!r} "
            "(regenerate: python tools/pipeline_doc.py > docs/pipeline.md)",
            pytrace=False,
        )

"""The compiler package never imports the oracles or the tests."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "nanocompile"
FORBIDDEN = {"torch", "transformers", "nanoinfer", "test", "tests", "conftest", "pytest"}


def test_src_does_not_import_oracles() -> None:
    offenders = []
    files = sorted(SRC.rglob("*.py"))
    assert files, "no source files found"
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in FORBIDDEN:
                    offenders.append(f"{path.relative_to(SRC)}:{node.lineno}: {name}")
    assert not offenders, offenders

"""The package's layers point one way: kernels_lab/instrument sits below the harness and the grader."""

import ast
from pathlib import Path

import kernels_lab

PACKAGE = Path(kernels_lab.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports (relative imports resolved against its package), at any depth."""
    package = ("kernels_lab." + ".".join(path.relative_to(PACKAGE).parent.parts)).rstrip(".")
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            found.add(module)
            found |= {f"{module}.{a.name}" for a in node.names}  # `from kernels_lab import profile`
    return found


def test_imported_modules_resolves_relative_imports():
    here = PACKAGE / "profile" / "measure.py"
    assert "kernels_lab.instrument.launch_hook" in imported_modules(here)


def test_instrument_imports_neither_the_harness_nor_the_grader():
    above = ("kernels_lab.profile", "kernels_lab.grading")
    files = sorted((PACKAGE / "instrument").glob("*.py"))
    assert files
    wrong = {f"{f.name} imports {m}" for f in files for m in imported_modules(f)
             if any(m == a or m.startswith(a + ".") for a in above)}
    assert not wrong, sorted(wrong)

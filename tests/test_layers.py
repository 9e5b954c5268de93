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


def private_grader_names(source: str, package: str) -> set[str]:
    """The private names (a leading underscore) of kernels_lab.grading that a module of `package` imports or reads
    off an imported grading module: what a topic may not touch (issue 35: topics use the grader's public API)."""
    found, modules = set(), set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module
            if module == "kernels_lab.grading" or module.startswith("kernels_lab.grading."):
                found |= {f"{module}.{a.name}" for a in node.names if a.name.startswith("_")}
                modules |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name.startswith("kernels_lab.grading")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and isinstance(node.value, ast.Name) and node.value.id in modules:
            found.add(f"{node.value.id}.{node.attr}")
    return found


def _package(path: Path) -> str:
    return ("kernels_lab." + ".".join(path.relative_to(PACKAGE).parent.parts)).rstrip(".")


def test_the_private_name_check_sees_one():
    source = ("from ...grading.compile_gate import _child, target_cc\nfrom ...grading import child\n"
              "child._guard_imports()\nchild.__name__\n")
    assert private_grader_names(source, "kernels_lab.topics.decode") == {
        "kernels_lab.grading.compile_gate._child", "child._guard_imports"}
    assert not private_grader_names("from ...grading.ptx import listing\n", "kernels_lab.topics.pdl")


def test_no_topic_imports_a_private_name_of_the_grader():
    files = sorted((PACKAGE / "topics").rglob("*.py"))
    assert len(files) > 10
    wrong = {f"{f.relative_to(PACKAGE)} uses {name}" for f in files
             for name in private_grader_names(f.read_text(), _package(f))}
    assert not wrong, sorted(wrong)

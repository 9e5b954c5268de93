"""The arrows between core, the grader and the topics (issue 35 item 4), read from the source with ast: the
problem objects (core) import nothing of the grader, and topics use the grader's public API (grading.api) only."""

import ast
from pathlib import Path

import kernels_lab

PACKAGE = Path(kernels_lab.__file__).parent


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in the file, at any depth (a function's own import too)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.rsplit(".", 1)[0] if path.name != "__init__.py" else module
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return found


def _grader(name: str) -> bool:
    return name == "kernels_lab.grading" or name.startswith("kernels_lab.grading.")


def test_the_scanner_resolves_relative_imports(tmp_path):
    got = dict(_imports(PACKAGE / "core.py"))
    assert "kernels_lab.errors.UsageError" in got.values()  # `from .errors import UsageError`
    got = [m for _, m in _imports(PACKAGE / "topics" / "decode" / "protocol.py")]
    assert "kernels_lab.grading.api" in got and "kernels_lab.backend" in got  # `from ...grading.api`, `...backend`


def test_core_imports_nothing_of_the_grader():
    bad = [(line, m) for line, m in _imports(PACKAGE / "core.py") if _grader(m)]
    assert not bad, f"kernels_lab/core.py imports the grader (a circle through core and grading): {bad}"


def test_topics_use_the_graders_public_api_only():
    bad = [f"{path.relative_to(PACKAGE)}:{line} {m}" for path in sorted((PACKAGE / "topics").rglob("*.py"))
           for line, m in _imports(path)
           if _grader(m) and not (m == "kernels_lab.grading.api" or m.startswith("kernels_lab.grading.api."))]
    assert not bad, "topics import the grader's internals (use kernels_lab.grading.api):\n" + "\n".join(bad)

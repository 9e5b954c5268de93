"""A topic is one folder under kernels_lab/topics/: found without a list, and named by no generic code."""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path

from kernels_lab import all_workloads, topics

PACKAGE = Path(topics.__file__).resolve().parent.parent
ROOT = PACKAGE.parent
TOPICS = sorted(m.name for m in pkgutil.iter_modules(topics.__path__) if m.ispkg)
GENERIC = ("core.py", "profile", "grading", "cli", "instrument", "lessons.py", "topics/__init__.py")
# `from kernels_lab.topics.NAME ...`, `import ...topics.NAME`, `from ..topics import NAME`
NAMED = re.compile(r"^\s*(?:from|import)\s+[\w.]*\btopics\.(\w+)|^\s*from\s+[\w.]*\btopics\s+import\s+([\w, ]+)", re.M)


def test_every_topic_folder_is_found_and_its_workload_registered_without_a_list():
    assert "layernorm" in TOPICS
    workloads = all_workloads()
    for name in TOPICS:
        assert name not in (PACKAGE / "workloads" / "__init__.py").read_text()
        registered = [w for w in workloads.values() if w.reference.__module__ == f"kernels_lab.topics.{name}.workload"]
        assert registered, f"topics/{name}/workload.py registered no workload"


def test_a_topics_figures_are_declared_by_record_kind_and_found():
    drawers = topics.figures()
    assert drawers["layernorm"].__module__ == "kernels_lab.topics.layernorm.figures"


def test_generic_code_imports_no_topic_by_name():
    files = []
    for part in GENERIC:
        path = PACKAGE / part
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    files.append(ROOT / "benchmarks" / "render_figures.py")
    found = [f"{p.relative_to(ROOT)}: {m.group(0).strip()}" for p in files for m in NAMED.finditer(p.read_text())]
    assert not found, "generic code asks kernels_lab.topics (load(), figures()), never a topic by name:\n  " + \
        "\n  ".join(found)


def test_the_import_check_sees_a_named_topic():
    assert NAMED.search("from kernels_lab.topics.layernorm import workload")
    assert NAMED.search("    from ..topics import layernorm")
    assert not NAMED.search("from kernels_lab import topics")
    assert not NAMED.search("importlib.import_module(f'{__name__}.{topic.name}')")

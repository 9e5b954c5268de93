"""A topic is one folder under kernels_lab/topics/: found without a list, and named by no generic code."""

from __future__ import annotations

import importlib
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
    assert {"elementwise", "softmax", "rnn", "decode", "pdl", "consumer", "launch", "layernorm"} <= set(TOPICS)
    assert not (PACKAGE / "workloads").exists(), "the workloads live in their topics now"
    workloads = all_workloads()
    for name in TOPICS:
        if (PACKAGE / "topics" / name / "workload.py").exists():
            registered = [w for w in workloads.values() if w.reference.__module__.startswith(f"kernels_lab.topics.{name}.")]
            assert registered, f"topics/{name}/workload.py registered no workload"
    # every registered workload lives in a topic
    assert all(w.reference.__module__.startswith("kernels_lab.topics.") for w in workloads.values())


def test_topics_keep_their_lessons_order_everywhere():
    from kernels_lab.demos import demos
    orders = [importlib.import_module(f"kernels_lab.topics.{t}").ORDER for t in TOPICS]
    assert all(isinstance(o, int) for o in orders)
    listed = list(all_workloads())
    assert listed.index("elementwise") < listed.index("softmax") < listed.index("rnn") < listed.index("decode")
    assert list(demos())[:2] == ["elementwise", "launch"]


def test_every_topic_is_what_demo_bench_and_the_readme_numbers_find():
    from kernels_lab.demos import demos
    from kernels_lab.profile import numbers
    from kernels_lab.profile.runs import benches
    assert {"elementwise", "launch", "consumer", "softmax", "rnn", "pdl", "decode"} <= set(demos())
    assert set(benches()) == {"launch", "consumer", "pdl"}
    blocks = numbers.blocks()
    assert blocks["consumer-caption"].__module__ == "kernels_lab.topics.consumer.numbers"
    assert {"elementwise-caption", "sweep-caption", "pdl-caption", "measured-table", "demo-times"} <= set(blocks)


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

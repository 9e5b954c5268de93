"""docs/memory-model.md: every snippet runs, in order, on the simulator's weak-memory mode, and prints what
the page says it prints (its `# prints:` lines), so the primer cannot drift from the mode it shows."""

import contextlib
import io
import re
from pathlib import Path

import pytest

from kernels_lab.runtime import ON_SIMULATOR

PAGE = Path(__file__).parent.parent / "docs" / "memory-model.md"
pytestmark = pytest.mark.skipif(not ON_SIMULATOR, reason="the primer's snippets run on the simulator")


def _snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_primer_has_its_snippets_and_sources():
    text = PAGE.read_text()
    assert len(_snippets()) >= 6
    for source in ("#scope", "#release-acquire-patterns", "#causality-order", "#memory-fence-functions",
                   "#volatile-qualifier", "cutlass/barrier.h"):
        assert source in text, source


def test_every_snippet_prints_what_the_page_says():
    space: dict = {"__name__": "memory_model_doc"}
    for k, code in enumerate(_snippets()):
        expected = [line.removeprefix("# prints: ") for line in code.splitlines() if line.startswith("# prints: ")]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{PAGE.name} snippet {k}", "exec"), space)
        assert out.getvalue().splitlines() == expected, f"snippet {k}"

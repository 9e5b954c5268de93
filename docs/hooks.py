"""mkdocs hooks of the lesson site (mkdocs.yml): the lessons' navigation and their table, from the
committed notebooks themselves, so that a new lesson needs no edit here.

docs/notebooks and docs/figures are links to the repository's folders: the notebooks render with
their committed GPU outputs (nothing is executed at build time), and the README (docs/index.md)
and the lessons' markdown find the figures at the same relative paths as in the repository.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LESSON = re.compile(r"^(\d\d_\w+?)(_solution)?\.ipynb$")
TABLE_MARKER = "<!-- lessons:table -->"


def lessons() -> dict[str, str]:
    """{"01_fusion": "01 Memory traffic and kernel fusion", ...}: every lesson with both notebooks, in
    order, titled by the first heading of its solution notebook."""
    out = {}
    for path in sorted(NOTEBOOKS.glob("*_solution.ipynb")):
        name = path.name.removesuffix("_solution.ipynb")
        if not (NOTEBOOKS / f"{name}.ipynb").exists():
            continue
        cells = json.loads(path.read_text())["cells"]
        first = next(("".join(c["source"]) for c in cells if c["cell_type"] == "markdown"), "")
        heading = next((line.lstrip("#").strip() for line in first.splitlines() if line.startswith("# ")), name)
        out[name] = heading
    return out


def on_config(config: Any, **_: Any) -> Any:
    lesson_pages = [{title: [{f"{name[:2]} solution (GPU outputs)": f"notebooks/{name}_solution.ipynb"},
                             {f"{name[:2]} exercise": f"notebooks/{name}.ipynb"}]}
                    for name, title in lessons().items()]
    config.nav = [{"Home": "index.md"}, {"Lessons": ["lessons.md", *lesson_pages]}, {"Demos": "demos.md"},
                  {"Memory model": "memory-model.md"}, {"Writing a lesson": "notebooks/README.md"}]
    return config


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """index.md (the README): its links into docs/ point where the site puts them, at its root.
    lessons.md: one row per lesson, linking its two notebooks and their downloads."""
    if page.file.src_uri == "index.md":
        return markdown.replace("](docs/", "](")
    if TABLE_MARKER not in markdown:
        return markdown
    rows = ["| lesson | read it (solution, GPU outputs) | exercise | download |", "| --- | --- | --- | --- |"]
    for name, title in lessons().items():
        rows.append(f"| {title} | [solution](notebooks/{name}_solution.ipynb) | [exercise](notebooks/{name}.ipynb) "
                    f'| <a href="notebooks/{name}.ipynb" download>{name}.ipynb</a> |')
    return markdown.replace(TABLE_MARKER, "\n".join(rows))

"""The lesson site (mkdocs.yml, docs/): it builds from the committed notebooks without executing them,
every notebook renders as a page with its cells and its outputs, and no link or image is broken."""

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytest.importorskip("mkdocs", reason="the lesson site needs the [site] extra (mkdocs, mkdocs-material, mkdocs-jupyter)")
pytest.importorskip("mkdocs_jupyter", reason="the lesson site needs the [site] extra (mkdocs-jupyter)")
pytest.importorskip("material", reason="the lesson site needs the [site] extra (mkdocs-material)")

ROOT = Path(__file__).parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


class _Refs(HTMLParser):
    """Every href and src of a page, and the notebook cells it renders."""

    def __init__(self):
        super().__init__()
        self.refs, self.cells, self.ids = [], 0, set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.ids.add(a.get("id"))
        for key in ("href", "src"):
            if a.get(key):
                self.refs.append((tag, a[key]))
        if (a.get("id") or "").startswith("cell-id="):  # nbconvert's anchor of each notebook cell
            self.cells += 1


def _parse(path: Path) -> _Refs:
    p = _Refs()
    p.feed(path.read_text(encoding="utf-8"))
    return p


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    # --strict: a nav entry without its page, or a markdown link mkdocs cannot resolve, fails the build
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=240,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # mkdocs-material's notice, not ours
    assert run.returncode == 0, f"mkdocs build failed:\n{run.stdout}\n{run.stderr}"
    return out


def test_every_notebook_renders_as_a_page_with_all_its_cells(site):
    assert NOTEBOOKS
    for nb_path in NOTEBOOKS:
        page = site / "notebooks" / nb_path.with_suffix(".html").name
        assert page.exists(), f"{nb_path.name} did not render"
        cells = json.loads(nb_path.read_text())["cells"]
        assert _parse(page).cells == len(cells), f"{page.name}: not every cell of {nb_path.name} rendered"
        text = page.read_text(encoding="utf-8")
        pngs = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
        assert text.count('src="data:image/png;base64,') == pngs, f"{page.name}: not every committed figure is drawn"
        if nb_path.stem.endswith("_solution") and any(c.get("outputs") for c in cells):
            assert "jp-OutputArea-output" in text, f"{page.name}: the committed outputs are not on the page"


def test_no_broken_link_and_no_missing_image(site):
    broken = []
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > len(NOTEBOOKS)
    for page in pages:
        parsed = _parse(page)
        for tag, ref in parsed.refs:
            url = urlsplit(ref)
            if url.scheme or ref.startswith(("data:", "//", "mailto:")):
                continue  # external: a class reads the site online or offline; nothing is fetched here
            if not url.path:  # a link to an anchor of the same page
                if url.fragment and unquote(url.fragment) not in parsed.ids:
                    broken.append(f"{page.relative_to(site)}: #{url.fragment}")
                continue
            base = site if url.path.startswith("/") else page.parent  # 404.html links from the site's root
            target = (base / unquote(url.path).lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: <{tag}> {ref}")
    assert not broken, "broken links or missing images:\n  " + "\n  ".join(broken[:20])


def test_the_readme_figures_and_the_lessons_table_are_on_the_site(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    readme_images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (ROOT / "README.md").read_text())
    # the README's paths start at the repository's root; the site's root is docs/
    assert readme_images and all(f'src="{img.removeprefix("docs/")}"' in index for img in readme_images)
    lessons = (site / "lessons.html").read_text(encoding="utf-8")
    for nb_path in NOTEBOOKS:
        assert f'href="notebooks/{nb_path.stem}.html"' in lessons, f"lessons.html does not link {nb_path.name}"

"""Class scale: batch grading into a gradebook, shards and merge, re-runs that skip what did not change,
and the Gradescope autograder bundle run in a folder laid out like Gradescope's."""

import csv
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kernels_lab import cli
from kernels_lab.grading.batch import parse_shard, shard
from sources import submission, write_submission

SUBMISSIONS = Path(__file__).parent / "submissions"
MINI_FILE = SUBMISSIONS / "mini_exercises.py"


def _class(tmp_path, names=("fuse_correct", "fuse_import_error", "fuse_sys_exit")):
    folder = tmp_path / "subs"
    folder.mkdir()
    for name in names:
        write_submission(name, folder)
    return folder


def test_shards_split_a_class_into_disjoint_slices_that_cover_it():
    paths = [Path(f"s{k:02d}.py") for k in range(11)]
    parts = [shard(paths, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(p for part in parts for p in part) == sorted(paths) and sum(map(len, parts)) == 11
    for bad in ("0/3", "4/3", "x", "1/0"):
        with pytest.raises(ValueError, match="i/N"):
            parse_shard(bad)


def test_sharded_grading_merges_into_one_gradebook_and_reruns_skip_unchanged(tmp_path, capsys):
    folder = _class(tmp_path)
    out = tmp_path / "grades"
    common = ["--exercises", str(MINI_FILE), "--out", str(out), "--timeout", "30"]
    assert cli.main(["grade", "fuse_mini", str(folder), "--shard", "1/2", *common]) == 0
    # exit 1: fuse_import_error could not be loaded (its zero grade is written all the same)
    assert cli.main(["grade", "fuse_mini", str(folder), "--shard", "2/2", *common]) == cli.EXIT_NOT_LOADED
    saved = sorted(p.name for p in out.iterdir())
    assert saved == ["fuse_correct.py.json", "fuse_import_error.py.json", "fuse_sys_exit.py.json"]
    book = tmp_path / "book.csv"
    assert cli.main(["grade", "merge", str(out), "--csv", str(book)]) == 0
    rows = list(csv.DictReader(book.open()))
    assert [r["submission"] for r in rows] == ["fuse_correct.py", "fuse_import_error.py", "fuse_sys_exit.py"]
    assert {r["submission"]: r["outcome"] for r in rows}["fuse_import_error.py"] == "import_error"
    assert len({r["max_score"] for r in rows}) == 1  # one maximum, whatever the outcome
    # a re-run grades only what changed (the content hash in each submission's JSON)
    capsys.readouterr()
    (folder / "fuse_sys_exit.py").write_text(submission("fuse_correct"))
    assert cli.main(["grade", "fuse_mini", str(folder), *common]) == cli.EXIT_NOT_LOADED  # fuse_import_error
    assert "2 unchanged submission(s) not re-graded" in capsys.readouterr().err
    fixed = json.loads((out / "fuse_sys_exit.py.json").read_text())
    assert fixed["score"] == fixed["max_score"]


def test_the_gradescope_bundle_grades_a_submission_like_gradescope(tmp_path):
    zip_path = tmp_path / "bundles" / "fuse_mini_autograder.zip"  # --out is the folder it is written into
    assert cli.main(["grade", "bundle", "fuse_mini", "--out", str(tmp_path / "bundles"), "--exercises",
                     str(MINI_FILE), "--timeout", "30"]) == 0
    root = tmp_path / "autograder"  # Gradescope's layout: source/ (the zip), submission/, results/
    with zipfile.ZipFile(zip_path) as z:
        names = set(z.namelist())
        assert {"setup.sh", "run_autograder", "exercises.py", "kernels-lab-src/pyproject.toml",
                "kernels-lab-src/kernels_lab/grading/warden.py"} <= names
        z.extractall(root / "source")
    setup = (root / "source" / "setup.sh").read_text()
    assert './kernels-lab-src[cu13]' in setup and "pip install" in setup
    (root / "submission").mkdir()
    (root / "submission" / "my_kernel.py").write_text(submission("fuse_correct"))
    env = {**os.environ, "KERNELS_LAB_AUTOGRADER_ROOT": str(root), "KERNELS_LAB_PYTHON": sys.executable}
    out = subprocess.run(["bash", str(root / "source" / "run_autograder")], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads((root / "results" / "results.json").read_text())
    assert doc["score"] == sum(t["max_score"] for t in doc["tests"]) > 0 and {t["name"] for t in doc["tests"]} >= {"correct (public)", "correct (hidden)"}


def test_an_empty_gradescope_submission_still_gets_results(tmp_path):
    results = tmp_path / "results.json"
    empty = tmp_path / "submission"
    empty.mkdir()
    code = cli.main(["grade", "fuse_mini", str(empty), "--pick-one", "--exercises", str(MINI_FILE),
                     "--gradescope", str(results)])
    assert code == 1
    doc = json.loads(results.read_text())
    assert doc["score"] == 0 and "no .py or .ipynb file was submitted" in doc["output"]

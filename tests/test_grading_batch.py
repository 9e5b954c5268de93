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


# -- a class's folder always grades (issue 33 item 6) ----------------------------------------------------

def _notebook(*cells: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [],
                                  "execution_count": None} for c in cells], "metadata": {}, "nbformat": 4,
                       "nbformat_minor": 5})


def test_unreadable_notebooks_are_rows_and_every_other_file_is_graded(tmp_path, capsys):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "a.ipynb").write_bytes(b"\xff\xfe not text")
    (folder / "b.ipynb").write_text('{"cells": 5}')
    (folder / "c.ipynb").write_text("[]")
    (folder / "d.ipynb").write_text('{"cells": [7]}')
    write_submission("fuse_correct", folder)
    book = tmp_path / "book.csv"
    rc = cli.main(["grade", "fuse_mini", str(folder), "--exercises", str(MINI_FILE), "--csv", str(book),
                   "--timeout", "30"])
    assert rc == cli.EXIT_NOT_LOADED  # 1: some could not be loaded; every one has its row all the same
    rows = {r["submission"]: r for r in csv.DictReader(book.open())}
    assert list(rows) == ["a.ipynb", "b.ipynb", "c.ipynb", "d.ipynb", "fuse_correct.py"]
    assert rows["fuse_correct.py"]["score"] == rows["fuse_correct.py"]["max_score"] == "9.0"
    assert {k: r["outcome"] for k, r in rows.items() if k != "fuse_correct.py"} == dict.fromkeys(
        ["a.ipynb", "b.ipynb", "c.ipynb", "d.ipynb"], "unreadable")
    err = capsys.readouterr().err
    for line in (f"kernels-lab: a.ipynb: unreadable: {folder / 'a.ipynb'}: not a notebook: not UTF-8 text (byte 0)",
                 f"kernels-lab: b.ipynb: unreadable: {folder / 'b.ipynb'}: JSON, but not a notebook (a notebook is an "
                 f"object with a list of 'cells')",
                 f"kernels-lab: c.ipynb: unreadable: {folder / 'c.ipynb'}: JSON, but not a notebook",
                 f"kernels-lab: d.ipynb: unreadable: {folder / 'd.ipynb'}: cell 1 is not a notebook cell"):
        assert line in err, err
    assert "Traceback" not in err
    # skipped is not failed: a check not counted here (speed, on the simulator) is an empty cell, and named
    assert rows["fuse_correct.py"]["speed"] == "" and rows["a.ipynb"]["correct (public)"] == "0"
    assert rows["fuse_correct.py"]["not_counted"] == "speed: speed is measured on a GPU only; not counted here"


def test_per_student_folders_are_found_and_named_and_an_ambiguous_one_is_a_row(tmp_path, capsys):
    folder = tmp_path / "submissions"
    for student in ("alice", "bob", "carol", "dave"):
        (folder / student).mkdir(parents=True)
    write_submission("fuse_correct", folder / "alice").rename(folder / "alice" / "answer.py")
    # a notebook whose exercise cell has a comment above the marker: taken all the same
    cell = "# my attempt, v2\n" + submission("fuse_correct").replace("# EXERCISE: fuse_chain", "# EXERCISE: fuse_mini")
    (folder / "bob" / "ex.ipynb").write_text(_notebook("import numpy as np", cell))
    (folder / "bob" / ".ipynb_checkpoints").mkdir()
    (folder / "bob" / ".ipynb_checkpoints" / "ex-checkpoint.ipynb").write_text("{}")  # not a second file
    (folder / "carol" / "a.py").write_text("x = 1\n")
    (folder / "carol" / "b.py").write_text("y = 2\n")
    out = tmp_path / "grades.json"
    rc = cli.main(["grade", "fuse_mini", str(folder), "--exercises", str(MINI_FILE), "--json", str(out),
                   "--timeout", "30"])
    assert rc == cli.EXIT_NOT_LOADED
    grades = {g["submission"]: g for g in json.loads(out.read_text())["grades"]}
    assert {k: (g["score"], g["outcome"]) for k, g in grades.items()} == {
        "alice/answer.py": (9.0, "graded"), "bob/ex.ipynb": (9.0, "graded"), "carol/": (0.0, "unreadable"),
        "dave/": (0.0, "unreadable")}
    assert grades["carol/"]["summary"].startswith("unreadable: carol/ is a student's folder, but several files "
                                                  "(a.py, b.py) and none is clearly the fuse_mini exercise")
    assert "dave/ is a student's folder, but no .py or .ipynb file was submitted" in grades["dave/"]["summary"]
    # two students graded under one name: refused before grading, one line
    other = tmp_path / "other" / "alice"
    other.mkdir(parents=True)
    write_submission("fuse_correct", other).rename(other / "answer.py")
    capsys.readouterr()
    rc = cli.main(["grade", "fuse_mini", str(folder), str(other.parent), "--exercises", str(MINI_FILE)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "two submissions would be graded under one name, " \
                                                 "'alice/answer.py'" in err, err


@pytest.mark.parametrize("content,says", [
    ('{"a": 1}', "it is not a grade (no exercise, submission, score and max_score), so not a grade part"),
    ("[1, 2]", "not a grade part: a per-submission JSON of `grade --out DIR`, or a `grade --json FILE`"),
    ('{"grades": []}', "(its grades list is empty)"),
    ('{"grades": [{"exercise": "e", "submission": "s", "score": 1, "max_score": 2}]}',
     "grade 1 is not a grade (Grade.__init__() missing 2 required positional arguments: 'outcome' and 'summary')"),
    ("exercise,score\n", "not valid JSON"),
    (b"\xff\xfe", "not UTF-8 text"),
])
def test_merge_refuses_a_file_that_is_not_a_grade_part(content, says, tmp_path, capsys):
    part = tmp_path / "part.json"
    part.write_bytes(content if isinstance(content, bytes) else content.encode())
    rc = cli.main(["grade", "merge", str(part), "--csv", str(tmp_path / "book.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"kernels-lab: error: merge: {part}: ") and err.count("\n") == 1, err
    assert says in err and not (tmp_path / "book.csv").exists()


def test_merge_refuses_a_fifo_and_a_folder_without_parts_instead_of_hanging(tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "none").mkdir()
    for part, says in ((tmp_path / "pipe.json", "a FIFO, not a regular file (refused without reading it)"),
                       (tmp_path / "none", "a folder with no .json file in it")):
        rc = cli.main(["grade", "merge", str(part), "--csv", str(tmp_path / "book.csv")])
        err = capsys.readouterr().err
        assert rc == 2 and says in err and err.count("\n") == 1, err


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            found.add(c)
            todo.append(c)
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
    except OSError:
        return ""


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), or None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (0 once it is gone)."""
    fields = _stat(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def _as_from_a_terminal() -> None:
    """Ctrl-C's default in the child, as a terminal starts it: a suite launched in the background (`cmd &` in a
    script) ignores SIGINT, every process it starts inherits that, and Python then installs no handler."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_hung_grade_stops_within_a_second_killing_every_child(tmp_path):
    import signal
    import time
    folder = tmp_path / "subs"
    folder.mkdir()
    write_submission("fuse_infinite_spin", folder)
    book = tmp_path / "book.csv"
    env = {**{k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}, "KERNELS_LAB_BACKEND": "sim"}
    # -X faulthandler: SIGABRT makes it print every thread's stack, should it not stop
    proc = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "kernels_lab.cli", "grade", "fuse_mini",
                             str(folder), "--exercises", str(MINI_FILE), "--csv", str(book), "--timeout", "120"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_as_from_a_terminal)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until the submission's kernel spins in its confined child: past its
        # imports (under a second of CPU here), the child's CPU time grows only by spinning
        if any(_cpu_seconds(p) > 2.5 for p in _descendants(proc.pid) if "kernels_lab.grading.child" in _cmdline(p)):
            break
        time.sleep(0.2)
    tree = _descendants(proc.pid)
    assert tree, "no child was running"
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    while [p for p in tree if _alive(p)] and time.monotonic() - t0 < 10:
        time.sleep(0.02)
    stopped = time.monotonic() - t0  # every child gone: the grading stopped
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        pytest.fail(f"still running 60 s after Ctrl-C; its threads:\n{proc.communicate()[1][-6000:]}")
    took = time.monotonic() - t0
    assert not [p for p in tree if _alive(p)], "a child outlived the interrupt"
    # every child within a second; the grader's exit after them (interpreter teardown, kept short by cli.run's
    # gc.freeze) gets a margin for a machine the suite loads on two cores
    assert stopped < 1.5 and proc.returncode == 130 and took < 3, (stopped, proc.returncode, took, err[-2000:])
    assert "kernels-lab: interrupted" in err and "Traceback" not in err
    assert not book.exists()  # nothing half-done: the gradebook is written only when every grade is


def test_ctrl_c_handed_to_a_worker_thread_still_stops_the_wait_for_a_grade():
    # the kernel may deliver SIGINT to any thread; Python runs its handler in the main thread only, which an
    # untimed future.result() would leave blocked until that grade ends (seen once: 60 s after Ctrl-C)
    code = """
import signal, threading, time
from concurrent.futures import Future
from kernels_lab.grading.batch import _result
never, ready = Future(), threading.Event()
def worker():  # a grading thread: it takes the signal (its C handler runs here), then keeps waiting
    ready.set(); time.sleep(30)
t = threading.Thread(target=worker, daemon=True); t.start(); ready.wait()
threading.Timer(0.3, lambda: signal.pthread_kill(t.ident, signal.SIGINT)).start()
t0 = time.monotonic()
try:
    _result(never)
except KeyboardInterrupt:
    print(f"interrupted after {time.monotonic() - t0:.2f} s")
"""
    env = {**{k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}, "KERNELS_LAB_BACKEND": "sim"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                         preexec_fn=_as_from_a_terminal)
    assert out.stdout.startswith("interrupted after"), (out.stdout, out.stderr[-2000:])
    assert float(out.stdout.split()[2]) < 1.5, out.stdout

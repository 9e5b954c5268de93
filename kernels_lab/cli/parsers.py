"""The argument parsers: every command's options, and help that says what it writes, where, its exit
status and one example."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import EXIT_USAGE, UsageError
from .commands import DEMO_REPS, cmd_bench, cmd_demo, cmd_doctor, cmd_list, cmd_plot, cmd_profile, cmd_timeline
from .grade import cmd_grade, cmd_grade_bundle, cmd_grade_merge
from .outputs import OUT_DIR, PROG


OVERVIEW = """kernels-lab: see what fusion, persistence and launch strategies do to GPU kernels.

  kernels-lab list                      every workload, its variants, patterns and launches
  kernels-lab demo elementwise          validate, measure, plot and narrate one lesson topic (demo --list)
  kernels-lab profile elementwise       sweep a workload's sizes, write a results JSON
  kernels-lab bench softmax             a topic's study, or a fixed GPU measurement (bench --list)
  kernels-lab timeline quantize_group   a Gantt chart of every variant's launches (CUDA events)
  kernels-lab plot RESULTS.json         draw the figures of a results file
  kernels-lab grade EXERCISE FILES...   grade student submissions (grade --list; grade merge; grade bundle)
  kernels-lab doctor                    what this machine can run, and what to fix

Every command's --help says what it writes, where, and its exit status. Two options mean the
same in every command:
  --out DIR     the folder for everything the command writes (default kernels-lab-out/);
                DIR is created if missing, the folders above it never are
  --json FILE   the results file (default: inside --out); its folder must exist, or be --out

Runs on a GPU when one is visible, else on numba's CUDA simulator (small sizes, no
timings). Force either with KERNELS_LAB_BACKEND=gpu|sim.

Exit status: 0 done; 2 a mistake on the command line (a bad size, an output path that cannot be
written, a back-end that cannot be had), found before any work and said in one line on stderr,
`kernels-lab: error: ...`, naming the fix; 3 the machine could not do it (a tool such as ncu is
missing or failed, a file could not be written); 70 a bug in kernels-lab (its traceback, and how to
report it); 130 interrupted. `grade` adds 1 (a submission could not be loaded); `demo` adds 1 (a
variant gave wrong values).
"""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors as one line in the same form as every other error here."""

    def error(self, message: str):  # type: ignore[override]
        where = self.prog.removeprefix(PROG).strip()
        print(f"{PROG}: error: {where + ': ' if where else ''}{message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def positive_int(text: str) -> int:
    """--n, --reps: a whole number >= 1 (4096, 2^12 and 4Ki are accepted, as in --size)."""
    from ..core import parse_int  # core imports numpy only: cheap, and before any back-end work
    try:
        value = parse_int(text.lstrip("+")) if not text.strip().startswith("-") else None
    except UsageError as e:
        if "too large" in str(e):
            raise argparse.ArgumentTypeError(str(e)) from None
        value = None
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def _epilog(writes: str, status: str, example: str) -> str:
    import textwrap
    return "\n".join(textwrap.fill(text, 100, initial_indent=f"{head:<13}", subsequent_indent=" " * 13)
                     for head, text in (("writes:", writes), ("exit status:", status), ("example:", example)))


FILE_FAILED = "3 a file could not be written after the checks (a full disk)"
USUAL_STATUS = f"0 done; 2 a mistake on the command line (one line, before any work); {FILE_FAILED}; 70 a bug in " \
               f"kernels-lab"


def _add_out(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--out", type=Path, default=OUT_DIR, metavar="DIR",
                   help=f"the folder for everything this command writes ({what}); default {OUT_DIR}/, created "
                        f"if missing (the folders above it are not)")


def _add_outputs(p: argparse.ArgumentParser, figures: str | None, default_json: str) -> None:
    """--out DIR and --json FILE, meaning what they mean in every command."""
    _add_out(p, (f"{figures}, and " if figures else "") + "the results file unless --json names another")
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help=f"the results file (default {default_json})")


def _add_limits(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exercises", type=Path, action="append", default=[],
                   help="a Python file of your own exercises (views of registered workloads; see README, "
                        "'Write an exercise'); may be given more than once")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="seconds each run may take (one case in one launch configuration and schedule; loading the "
                        "submission gets as long), so a hang costs seconds (default 20)")
    p.add_argument("--memory-gb", type=float, default=4.0,
                   help="memory limit per submission (GiB; at least 0.5, what the grader's own child needs)")


def _wrap(text: str) -> str:
    """Paragraphs filled to the terminal's usual width; indented lines (command examples) kept as written."""
    import textwrap
    return "\n\n".join(par if par.startswith("  ") else textwrap.fill(par, 100) for par in text.split("\n\n"))


def _sub(sub, name: str, help: str, description: str, epilog: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help, description=_wrap(description), epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=OVERVIEW, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _sub(sub, "list", "workloads, variants, patterns and launches", "Every workload: its axes, and each variant's "
         "pattern, launches and planned bytes per element.",
         _epilog("nothing (prints)", USUAL_STATUS, "kernels-lab list")).set_defaults(func=cmd_list)

    d = _sub(sub, "demo", "run an instructor demo (validate, measure, plot, narrate)",
             "Run a demo: validate every variant against the float64 reference, measure it, print a table and a "
             "narration, write its figures and results. Demos of fixed GPU configurations (launch, consumer, pdl) "
             "take no size; on the simulator they draw the committed GPU results and write no results file.",
             _epilog("OUT/NAME.png (and OUT/NAME_*.png), and the results file OUT/NAME.json (or --json)",
                     "0 done; 1 a variant gave wrong values (the demo says which); 2 a mistake on the command line; "
                     f"{FILE_FAILED}; 70 a bug in kernels-lab",
                     "kernels-lab demo softmax --size rows=7,cols=100 --out figs/"))
    d.add_argument("name", nargs="?", help="which demo (see --list)")
    d.add_argument("--list", action="store_true", help="list the demos")
    d.add_argument("--n", type=positive_int, default=None,
                   help="problem size of a one-axis workload, >= 1 (default: as large as the GPU holds, up to "
                        "2^28; small on the simulator)")
    d.add_argument("--size", help="problem size by axis, e.g. rows=4096,cols=1024 (see `kernels-lab list`)")
    d.add_argument("--reps", type=positive_int, default=None,
                   help=f"timed repetitions per variant (GPU only; default {DEMO_REPS})")
    _add_outputs(d, "figures", "OUT/NAME.json")
    d.set_defaults(func=cmd_demo)

    pr = _sub(sub, "profile", "sweep sizes for every variant of a workload",
              "Measure every variant of WORKLOAD at each size: launches, planned and traced bytes, and on a GPU "
              "the median time, GB/s and the model. Fixed GPU measurements that are not a workload's variants "
              "(the launch ladder, the consumer, the PDL study) are `kernels-lab bench`.",
              _epilog("the results file OUT/WORKLOAD_profile.json (or --json); draw it with `kernels-lab plot`",
                      "0 done; 2 a mistake on the command line; 3 --ncu could not measure (ncu missing: found "
                      "before the sweep, nothing written; ncu failing: the sweep is written without DRAM bytes), "
                      "or a file could not be written after the checks; 70 a bug in kernels-lab",
                      "kernels-lab profile softmax --sweep cols=2^10..2^13 --size rows=64 --out sweeps/"))
    pr.add_argument("workload", help="a workload from `kernels-lab list`")
    pr.add_argument("--sizes", help="a one-axis workload's sizes, e.g. 4096,2^20,2^27 or 2^12..2^27 "
                                    "(default: the workload's sweep)")
    pr.add_argument("--size", help="the size by axis, e.g. rows=4096,cols=1024: measured alone, or the fixed axes "
                                   "of --sweep (axes left out take their defaults)")
    pr.add_argument("--sweep", help="one axis varied: cols=2^10..2^15 (powers of two between), cols=1000,4096, "
                                    "or cols alone for its default range")
    pr.add_argument("--ncu", action="store_true", help="also measure DRAM bytes per kernel with Nsight Compute "
                                                       "(GPU only; exit 3 when it cannot)")
    pr.add_argument("--reps", type=positive_int, default=200,
                    help="timed repetitions per variant and size, GPU only (many: the launch-bound sizes carry the "
                         "host's dispatch jitter, and their median needs many samples to settle)")
    pr.add_argument("--warm", action="store_true",
                    help="warm-cache figures, GPU only: no L2 flush; inputs rotated among copies when they fit in L2")
    _add_outputs(pr, None, "OUT/WORKLOAD_profile.json")
    pr.set_defaults(func=cmd_profile)

    b = _sub(sub, "bench", "a topic's study, or a fixed GPU measurement (launch, consumer, pdl)",
             "Reproduce the numbers a lesson and the README quote. NAME is a topic's study (elementwise, softmax, "
             "rnn, decode, ...: `kernels-lab bench --list` names them all, with their groups) or a fixed "
             "measurement.\n\n"
             "A study (the topic's study.py): for each group of sizes, every line (the registered variants, "
             "numbered versions that are not registered, anchors such as torch) is checked on fresh random inputs "
             "into poisoned outputs against float64, then all are timed interleaved on two clocks (time_ms: one "
             "pass after an L2 flush; time_ms_steady: passes back to back), re-checked, and written beside the "
             "copy ceiling of the same run. Each record has three rates: GBs_model (the line's own planned bytes), "
             "GBs_useful (what the problem must move, the same for every line and anchor) and GBs_weight (weights "
             "read per pass, where the study has weights). A wrong line is reported and not timed. Where nothing "
             "can be timed (the simulator), or with --check, it runs the study's small check sizes instead: every "
             "line checked, and says what it skipped and why.\n\n"
             "A fixed measurement (GPU only): 'launch' the launch-overhead ladder, 'consumer' the persistent "
             "consumer's latency and throughput, 'pdl' the PDL / graph / grouped variants over G.\n\n"
             "  kernels-lab bench --list                         the studies (and their groups), the measurements\n"
             "  kernels-lab bench softmax --check                every softmax line checked at the check sizes\n"
             "  kernels-lab bench decode --group targets         one group of decode's study (on a GPU)\n"
             "  kernels-lab bench launch --json ladder.json      the launch ladder (on a GPU)",
             _epilog("the results file OUT/NAME_bench.json (or --json), rewritten after every size so a run cut "
                     "short keeps what it measured; then, where anything was timed, its figures in OUT (as "
                     "`kernels-lab plot` draws them)",
                     "0 done; 1 a line gave wrong values (its PROBLEM line says which); 2 a mistake on the command "
                     "line (an unknown name, a group the study does not have, a fixed measurement on the "
                     "simulator); 3 --ncu cannot run (ncu missing), or a file could not be written; 70 a bug in "
                     "kernels-lab",
                     "kernels-lab bench softmax --json softmax.json --out figs/"))
    b.add_argument("name", nargs="?", help="which study or measurement (see --list)")
    b.add_argument("--list", action="store_true", help="list the studies (with their groups) and measurements")
    b.add_argument("--reps", type=positive_int, default=None,
                   help="timed repetitions per line and size, studies only (default: the study's)")
    b.add_argument("--group", metavar="GROUP[,GROUP]",
                   help="a study's groups to run (default: all; --list names them), e.g. decode's targets")
    b.add_argument("--check", action="store_true", help="a study's check sizes only: every line checked, nothing "
                                                        "timed (what CI runs on the simulator)")
    b.add_argument("--ncu", action="store_true", help="a study: also DRAM bytes of the registered lines at the "
                                                      "largest size, from Nsight Compute (GPU only)")
    _add_outputs(b, "its figures", "OUT/NAME_bench.json")
    b.set_defaults(func=cmd_bench)

    t = _sub(sub, "timeline", "a kernel timeline (Gantt chart) of every variant of a workload",
             "Run each variant of WORKLOAD once (after a warm-up run) and record, through the launch hook, a CUDA "
             "event before and after every launch in its own stream: one span per launch, launch gaps visible, no "
             "Nsight Systems needed. Events sit between kernels, so they hide PDL overlap: the PDL study's kernels "
             "stamp themselves instead (`kernels-lab bench pdl`). On the simulator the host clock stands in.",
             _epilog("OUT/WORKLOAD_timeline.png and the results file OUT/WORKLOAD_timeline.json (with --json FILE: "
                     "that file, and OUT/STEM_timeline.png after its name)", USUAL_STATUS,
                     "kernels-lab timeline elementwise --n 40 --variants unfused,fused --out figs/"))
    t.add_argument("workload", help="a workload from `kernels-lab list`")
    t.add_argument("--n", type=positive_int, default=None, help="problem size of a one-axis workload, >= 1 "
                                                               "(default: the workload's default size)")
    t.add_argument("--size", help="problem size by axis, e.g. rows=4096,cols=1024")
    t.add_argument("--variants", help="comma-separated variants (default: all)")
    _add_outputs(t, "the PNG", "OUT/WORKLOAD_timeline.json")
    t.set_defaults(func=cmd_timeline)

    pl = _sub(sub, "plot", "draw the figures of a results JSON",
              "Draw every figure a results file supports (variant bars, size sweeps, the launch ladder, PDL, "
              "timelines, the consumer). A file with nothing to draw is an error that says why.",
              _epilog("OUT/STEM_*.png, STEM being the results file's name without .json", USUAL_STATUS,
                      "kernels-lab plot kernels-lab-out/elementwise_profile.json --out figs/"))
    pl.add_argument("results", type=Path, help="a kernels-lab results v1 file")
    _add_out(pl, "the PNGs")
    pl.set_defaults(func=cmd_plot)

    grade_status = ("0 every submission graded (whatever its score); 1 a submission could not be loaded: missing, "
                    "not a regular file, not a .py / lesson .ipynb, a syntax error or a failed import (its zero "
                    "grade is still printed and written); 2 a mistake on the command line, before any grading; 3 "
                    "the grader failed on a submission (the machine's problem; its grade says so), or a file could "
                    "not be written after the checks; 70 a bug in kernels-lab; 130 interrupted (Ctrl-C): every "
                    "child killed within a second and no --csv / --json written (the grades already in --out are "
                    "whole ones: a re-run with the same --out grades only the rest)")
    g = _sub(sub, "grade", "grade student submissions (each in a sandboxed child process); grade merge, grade bundle",
             "Grade submissions for EXERCISE: correctness on public and hidden cases at odd sizes and several "
             "launch configurations (credited only when the student's own kernel produced the output), races as "
             "results that differ between thread schedules, launch and traffic budgets (on right outputs only), a "
             "compile gate for the course's architecture (KERNELS_LAB_COURSE_ARCH, default sm_75); on a GPU also "
             "compute-sanitizer memcheck (every case) and racecheck, and speed against the reference solution "
             "(interleaved runs, classed faster / same / slower / unclear; grade with --workers 1 for the cleanest "
             "timings). Each submission runs confined (see `kernels-lab doctor`: sandbox). A hang, crash or import "
             "error becomes a grade with an explanation.\n\nTwo more commands, each with its own --help:\n"
             "  kernels-lab grade merge PARTS... --csv BOOK.csv     one gradebook from sharded runs\n"
             "  kernels-lab grade bundle EXERCISE --out DIR         a Gradescope autograder zip",
             _epilog("only what is asked: --json FILE (every grade), --csv FILE (a gradebook), --gradescope FILE "
                     "(Gradescope's results.json, one submission), --out DIR (one JSON per submission, so a re-run "
                     "skips the unchanged)", grade_status,
                     "kernels-lab grade fuse_chain submissions/ --csv book.csv"))
    g.add_argument("exercise", nargs="?", help="which exercise (see --list)")
    g.add_argument("submissions", nargs="*", type=Path,
                   help=".py files, lesson .ipynb files, or folders of them; in a folder, each subfolder is one "
                        "student's (graded as STUDENT/FILE: its file named after the exercise, or its only one; a "
                        "folder with none or several is a 0-point row saying so)")
    g.add_argument("--list", action="store_true", help="list the exercises and their points on this back-end")
    g.add_argument("--gradescope", type=Path, metavar="FILE",
                   help="Gradescope's results.json for the one submission given")
    g.add_argument("--json", type=Path, metavar="FILE", help="every grade, as JSON, in this file")
    g.add_argument("--csv", type=Path, metavar="FILE", help="a CSV gradebook, one row per submission, in this file")
    g.add_argument("--out", type=Path, metavar="DIR",
                   help="a folder for one JSON per submission; a re-run skips the submissions whose saved grade has "
                        "the same content hash (created if missing, the folders above it are not)")
    g.add_argument("--shard", help="grade only the i-th of N interleaved slices of the sorted submissions (i/N, "
                                   "1-based), so a scheduler can split a class; combine with `grade merge`")
    g.add_argument("--pick-one", action="store_true", help="each folder given is one submission: grade its one "
                                                           ".py / .ipynb (Gradescope's /autograder/submission)")
    g.add_argument("--workers", type=int, default=2, help="submissions graded at once")
    _add_limits(g)
    g.set_defaults(func=cmd_grade)

    sub.add_parser("doctor", help="back-end, versions, tools, and what to fix",
                   description="What this machine can run and what is skipped, with the fix for each problem.",
                   epilog=_epilog("nothing (prints)", "0 nothing to fix; 1 problems listed; 70 a bug in kernels-lab", "kernels-lab doctor"),
                   formatter_class=argparse.RawDescriptionHelpFormatter).set_defaults(func=cmd_doctor)
    return p


def build_grade_parsers() -> dict[str, argparse.ArgumentParser]:
    """`grade merge` and `grade bundle`: subcommands of `grade` with their own options and --help
    (`grade EXERCISE` keeps the exercise as its first word, so these are dispatched by name)."""
    m = _Parser(prog=f"{PROG} grade merge", formatter_class=argparse.RawDescriptionHelpFormatter,
                description=_wrap("Combine per-submission grades (the JSONs of `grade --out DIR`, folders of them, "
                                  "or `grade --json` files) from sharded runs into one gradebook; one grade per "
                                  "(exercise, submission), the last one read winning."),
                epilog=_epilog("--csv FILE (a gradebook) and / or --json FILE (every grade); at least one",
                               USUAL_STATUS, "kernels-lab grade merge grades/ --csv book.csv"))
    m.add_argument("parts", nargs="+", type=Path, metavar="PART",
                   help="per-submission JSON files, folders of them, or --json files")
    m.add_argument("--csv", type=Path, metavar="FILE", help="the CSV gradebook to write")
    m.add_argument("--json", type=Path, metavar="FILE", help="every grade, as JSON, in this file")
    m.set_defaults(func=cmd_grade_merge, command="grade merge")

    bu = _Parser(prog=f"{PROG} grade bundle", formatter_class=argparse.RawDescriptionHelpFormatter,
                 description=_wrap("Write a Gradescope autograder for EXERCISE: a zip holding this copy of "
                                   "kernels-lab, setup.sh and run_autograder, which grades each submission on numba's "
                                   "CUDA simulator (Gradescope has no GPU)."),
                 epilog=_epilog("OUT/EXERCISE_autograder.zip", USUAL_STATUS,
                                "kernels-lab grade bundle fuse_chain --out bundles/"))
    bu.add_argument("exercise", help="which exercise (see `kernels-lab grade --list`)")
    _add_out(bu, "the autograder zip")
    _add_limits(bu)
    bu.set_defaults(func=cmd_grade_bundle, command="grade bundle")
    return {"merge": m, "bundle": bu}

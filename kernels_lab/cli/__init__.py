"""The `kernels-lab` command: main() parses (parsers.py), runs one command (commands.py, grade.py) and
turns every way out into its documented exit status: a UsageError is one line and exit 2, anything
else a bug with its traceback (exit 70). The overview `kernels-lab --help` prints is parsers.OVERVIEW."""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any, Callable

from ..errors import EXIT_BUG, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_NOT_LOADED, EXIT_USAGE, UsageError
from .outputs import PROG
from .parsers import build_grade_parsers, build_parser

__all__ = ["main", "parse", "run", "EXIT_BUG", "EXIT_ENVIRONMENT", "EXIT_INTERRUPTED", "EXIT_NOT_LOADED", "EXIT_USAGE"]


BUG_REPORT = ("this is a bug in kernels-lab, not a mistake of yours: please report it to the course's kernels-lab "
              "maintainers (an issue in its repository) with the command line, the traceback above and the "
              "output of `kernels-lab doctor`")


def parse(argv: list[str]) -> argparse.Namespace:
    if len(argv) >= 2 and argv[0] == "grade" and argv[1] in ("merge", "bundle"):
        return build_grade_parsers()[argv[1]].parse_args(argv[2:])
    return build_parser().parse_args(argv)


def _preflight(args: argparse.Namespace) -> None:
    """What can be known wrong before a command starts: the back-end request."""
    from .. import runtime
    from ..backend import BACKEND
    if runtime.BACKEND_ERROR and args.command != "doctor":
        raise UsageError(runtime.BACKEND_ERROR)
    if not BACKEND.can_launch and args.command in ("demo", "profile", "bench", "timeline"):
        raise UsageError(f"{runtime.BACKEND_ENV}=ptx compiles kernels but cannot launch them; "
                         f"`{args.command}` needs {runtime.BACKEND_ENV}=gpu or sim (or unset it)")


def run(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """A command, with every way out turned into its documented exit status."""
    try:
        _preflight(args)
        return func(args)
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # a file the checks could not foresee (a full disk, a removed folder): name it
        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        print(f"{PROG}: error: {e.strerror or e}{where}", file=sys.stderr)
        return EXIT_ENVIRONMENT
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        # the exit's collection of every object numba's import made takes a second on a busy machine (6 s at a
        # load of 8, measured): frozen, they are left to the process's end, and Ctrl-C stops within a second
        gc.freeze()
        return EXIT_INTERRUPTED
    except Exception:  # noqa: BLE001  (anything else is ours to fix: show where, and ask for a report)
        import traceback
        traceback.print_exc()
        print(f"{PROG}: {BUG_REPORT}", file=sys.stderr)
        return EXIT_BUG


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    args = parse(argv)
    args.command_line = " ".join([PROG, *argv])
    func: Any = getattr(args, "func", None)
    if func is None:
        build_parser().print_help()
        return 0
    return run(func, args)

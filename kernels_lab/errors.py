"""The user's mistakes, told apart from kernels-lab's own.

A UsageError is something the person at the command line can fix (a bad size, a missing folder, a
file that is not a results file); `kernels-lab` prints it as one line and exits 2. Any other
exception is a bug in kernels-lab: the command prints its traceback and says how to report it.
Errors that are the user's by nature derive from UsageError (core.SizeError does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class UsageError(ValueError):
    """A mistake the user can fix: printed as one line naming the fix, exit status 2."""


class NotJson(ValueError):
    """A file that should hold JSON and does not; the message is why, for the caller to name the file and
    what it should have been."""


def read_json(path: str | Path) -> Any:
    """The JSON in the file at `path`, its bytes strictly UTF-8; NotJson saying why not (a missing file raises
    FileNotFoundError)."""
    try:
        return json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise NotJson(f"not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise NotJson(f"not valid JSON (truncated?): {e}") from None
    except RecursionError:
        raise NotJson("JSON nested too deeply") from None


# How `kernels-lab` ends: every command's --help lists the ones it can return.
EXIT_NOT_LOADED = 1   # grade: a submission could not be loaded (its zero grade is still written)
EXIT_USAGE = 2        # a UsageError: a mistake on the command line, found before any work
EXIT_ENVIRONMENT = 3  # the machine could not do it: a tool missing or failed, a file not written
EXIT_BUG = 70         # any other exception: a bug in kernels-lab (sysexits' EX_SOFTWARE)
EXIT_INTERRUPTED = 130

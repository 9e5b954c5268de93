"""The user's mistakes, told apart from kernels-lab's own.

A UsageError is something the person at the command line can fix (a bad size, a missing folder, a
file that is not a results file); `kernels-lab` prints it as one line and exits 2. Any other
exception is a bug in kernels-lab: the command prints its traceback and says how to report it.
Errors that are the user's by nature derive from UsageError (core.SizeError does).
"""

from __future__ import annotations


class UsageError(ValueError):
    """A mistake the user can fix: printed as one line naming the fix, exit status 2."""


# How `kernels-lab` ends: every command's --help lists the ones it can return.
EXIT_NOT_LOADED = 1   # grade: a submission could not be loaded (its zero grade is still written)
EXIT_USAGE = 2        # a UsageError: a mistake on the command line, found before any work
EXIT_ENVIRONMENT = 3  # the machine could not do it: a tool missing or failed, a file not written
EXIT_BUG = 70         # any other exception: a bug in kernels-lab (sysexits' EX_SOFTWARE)
EXIT_INTERRUPTED = 130

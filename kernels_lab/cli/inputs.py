"""What a command reads: a file the user names must be a regular file (a FIFO would block the command
forever, a device never ends, a folder is a mistake), checked before it is opened, and its mistakes
said in one line (a UsageError)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UsageError

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFDIR: "a folder"}


def not_regular(path: Path) -> str | None:
    """What `path` is when it exists but is no regular file ("a FIFO", "a folder", ...), found without
    opening it; None for a regular file or a missing path."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def check_in_file(path: Path, what: str, hint: str = "") -> Path:
    """A file the command will read: it exists, is a regular file and can be opened for reading.
    `what` names it in the error (an option, or the argument's role); `hint` says what to give."""
    hint = f" ({hint})" if hint else ""
    if not path.exists():
        raise UsageError(f"{what} {path}: no such file{hint}")
    if (kind := not_regular(path)) is not None:
        raise UsageError(f"{what} {path}: {kind}, not a regular file (refused without reading it){hint}")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{what} {path}: not readable (permission denied)")
    return path

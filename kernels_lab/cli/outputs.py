"""What a command writes, and where: one meaning for --out (a folder for everything the command
writes, created if missing, never its parents) and --json (the results file, in a folder that
exists or is --out), checked before any work and creating nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..errors import UsageError


OUT_DIR = Path("kernels-lab-out")
PROG = "kernels-lab"
# names that look like a file: given as --out (a folder), they are a mistake, not a folder to create
FILE_SUFFIXES = (".json", ".png", ".svg", ".pdf", ".zip", ".csv", ".txt", ".py", ".ipynb")


def _writable(folder: Path, what: str) -> None:
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise UsageError(f"{what}: cannot write in {folder} ({e.strerror or e}); choose a folder you can "
                         f"write to") from None


def check_out_dir(path: Path, flag: str = "--out") -> None:
    """A folder to write into: it exists, or its parent does (the command creates the folder itself
    when it writes, never the folders above it). Creates nothing."""
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{flag} {path} is a file; give a folder (everything the command writes goes into it)")
        _writable(path, f"{flag} {path}")
        return
    if path.suffix.lower() in FILE_SUFFIXES:
        raise UsageError(f"{flag} {path} looks like a file name, but {flag} is the folder everything is written "
                         f"into (e.g. {flag} {path.parent / 'figs'}); the results file is --json")
    if not path.parent.is_dir():
        state = "is a file" if path.parent.exists() else "does not exist"
        raise UsageError(f"{flag} {path}: the folder {path.parent} {state}; kernels-lab creates {flag} itself, "
                         f"never the folders above it")
    _writable(path.parent, f"{flag} {path}")


def check_out_file(path: Path, flag: str, out_dir: Path | None = None) -> None:
    """A file to write: not a folder, in a folder that exists (or is `out_dir`, checked and created
    with it). Creates nothing."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a folder; give a file name, e.g. {path / 'results.json'}")
    folder = path.parent
    if out_dir is not None and not folder.exists() and folder.resolve() == out_dir.resolve():
        return  # the --out folder, created when the command writes
    if not folder.exists():
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist; create it first (kernels-lab creates "
                         f"only --out)")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: {folder} is a file, not a folder; choose another path")
    _writable(folder, f"{flag} {path}")


def check_out_files(*flagged: tuple[str, Path | None]) -> None:
    """check_out_file for each (flag, path) given; None: the option was left out."""
    for flag, path in flagged:
        if path is not None:
            check_out_file(path, flag)


def given(text: str | None, flag: str) -> bool:
    """Was a text option given? An empty one (`--size ""`) is a mistake, not the default."""
    if text is not None and not text.strip():
        raise UsageError(f"{flag} is empty: give a value (see --help), or leave {flag} out for the default")
    return text is not None

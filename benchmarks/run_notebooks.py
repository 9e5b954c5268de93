"""Execute lesson notebooks with nbclient and save them executed: python benchmarks/run_notebooks.py OUTDIR NB..."""

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def main(out_dir: str, *paths: str) -> int:
    failed = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        t0 = time.time()
        try:
            NotebookClient(nb, timeout=300, kernel_name="python3",
                           resources={"metadata": {"path": str(Path(path).parent)}}).execute()
            status = "ok"
        except Exception as e:  # noqa: BLE001  (report and keep going: the next notebook still runs)
            status, failed = f"FAILED: {type(e).__name__}: {str(e)[-600:]}", failed + 1
        nbformat.write(nb, Path(out_dir) / Path(path).name)
        print(f"{Path(path).name}: {status} ({time.time() - t0:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

# %% [markdown]
# # 00 Start here
#
# kernels-lab puts three ways to run dependent GPU work side by side, as real Numba-CUDA kernels:
# **unfused** (one kernel per stage), **fused** (one kernel, intermediates on chip) and **persistent**
# (a grid sized to the machine that loops). Every lesson runs on a GPU, or on numba's CUDA simulator
# when there is none: the same kernels, the same checks, small sizes, and timings taken from the
# committed H200 results in `figures/data/`.
#
# **Goals:** know where this notebook runs, how to get help, and what the demos show.

# %%
import numpy as np
from kernels_lab import lessons, get_workload
from kernels_lab.runtime import cuda
print(lessons.setup())

# %% [markdown]
# ## Where am I running?
# `kernels-lab doctor` (in a terminal) or the cell below reports the back-end, the versions, and what to do
# about each problem it finds (numpy >= 2.5, a missing NVVM, no Nsight Compute).

# %%
from kernels_lab.doctor import report
text, problems = report()
print(text)

# %% [markdown]
# To choose the back-end yourself, set `KERNELS_LAB_BACKEND=gpu` or `KERNELS_LAB_BACKEND=sim` **before**
# Python starts (the choice is made when kernels_lab is imported).
#
# ## The demos an instructor runs
# Each prints a narration and writes a figure (`kernels-lab demo NAME --out figs/`).

# %%
from kernels_lab.demos import demos
for d in demos().values():
    print(f"kernels-lab demo {d.name:<12} {d.about}")

# %% [markdown]
# ## The lessons
# Each lesson is a pair: `NN_topic.ipynb` to work in, `NN_topic_solution.ipynb` with the answers.

# %%
import json
for path in sorted((lessons.ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
    if not path.stem.endswith("_solution"):
        first = json.loads(path.read_text())["cells"][0]
        print(f"{path.name:<28} {''.join(first['source']).splitlines()[0].lstrip('# ')}")

# %% [markdown]
# ## Summary
# - The lessons are listed above, in reading order.
# - Cells that start with `# EXERCISE:` are yours; the cell after each runs its check. The grader
#   (`kernels-lab grade`) takes exactly those cells from your notebook.

"""Layernorm over the rows of a matrix: workload.py (the variants), exercise.py and welford.py (lesson 08's graded
exercise: the Welford/Chan merge of partial statistics, and the one-pass layernorm it runs in), study.py (every
variant against torch on a GPU, `kernels-lab bench layernorm`), registers.py (registers and occupancy of every
kernel, from ptxas), figures.py, demo.py (`kernels-lab demo layernorm`); lesson notebooks/lessons/08_layernorm.py."""

ORDER = 8  # where it stands among the topics: its lesson's number

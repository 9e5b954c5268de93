"""Layernorm over the rows of a matrix: workload.py (the variants and the exercise), figures.py (what its
benchmark's results draw), bench.py (every variant against torch on a GPU); lesson notebooks/lessons/08_layernorm.py."""

ORDER = 8  # where it stands among the topics: its lesson's number

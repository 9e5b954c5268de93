"""Softmax over rows, and cross-entropy over them (lesson 04_reductions): workload.py (unfused to online),
split.py (a row split across cooperating blocks), cross_entropy.py, bench.py (every numbered version and torch),
figures.py, demo.py."""

ORDER = 4  # where it stands among the topics: its lesson's number

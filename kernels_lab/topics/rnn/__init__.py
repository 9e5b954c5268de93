"""A recurrent layer's time loop, per-step launches to one persistent kernel (lesson 05_state_on_chip):
workload.py, bench.py, figures.py, demo.py."""

ORDER = 5  # where it stands among the topics: its lesson's number

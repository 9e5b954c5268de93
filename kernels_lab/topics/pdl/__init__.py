"""A group of small dependent kernels: PDL, graphs, one grouped kernel (lesson 06_launch_side): workload.py,
rules.py (the PDL rules and lesson 06's graded checks), bench.py (`kernels-lab bench pdl`), window.py,
figures.py, numbers.py, demo.py."""

ORDER = 6  # where it stands among the topics: its lesson's number

"""What one kernel boundary costs, launch path by launch path (lesson 02_launch_overhead):
bench.py (`kernels-lab bench launch`), demo.py, figures.py, numbers.py."""

ORDER = 2  # where it stands among the topics: its lesson's number

"""A chain of dense layers, a launch per op to a megakernel (lesson 07_decode): workload.py, kernels.py
(the device code), protocol.py (the graded signal/wait exercise), study.py (its numbers: `kernels-lab bench
decode`), figures.py, demo.py."""

ORDER = 7  # where it stands among the topics: its lesson's number

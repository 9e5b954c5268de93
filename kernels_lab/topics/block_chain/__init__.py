"""A chain of locally connected layers, each unit reading only its group and the two beside it (beside
lesson 07's dense decode chain): a tile waits for the 3 tiles it reads, not for a whole layer. workload.py
(the specification and variants), kernels.py (the device code), study.py, bench.py (the GPU run's tables)."""

ORDER = 7  # lesson 07, beside the decode chain

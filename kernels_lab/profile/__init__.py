"""The measurement harness: validate-then-time, the copy ceiling, sweeps, timelines, results (schema v1),
plots; launch counting, the byte trace, timing and Nsight Compute come from kernels_lab.instrument."""

"""The profiling harness: launch counting, traffic (model / traced / ncu), timing, sweeps, plots."""

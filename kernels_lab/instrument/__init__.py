"""What sees and times kernels, below both the measurement harness (profile/) and the grader (grading/):
launch_hook (every launch, on both back-ends), trace (the simulator's byte tracer), timing (CUDA events,
cold L2) and ncu (Nsight Compute's DRAM bytes). It imports nothing from profile/ or grading/."""

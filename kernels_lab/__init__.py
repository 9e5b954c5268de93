"""kernels-lab: unfused, fused and persistent GPU kernels side by side, measured honestly.

Importing the package decides the back-end (a GPU, or numba's CUDA simulator) before numba
is imported: see kernels_lab.runtime.
"""

from . import runtime  # noqa: F401  (must come first)
from .core import get_workload, workloads

__version__ = "0.1.0"
__all__ = ["get_workload", "workloads", "runtime", "__version__"]

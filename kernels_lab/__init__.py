"""kernels-lab: unfused, fused and persistent GPU kernels side by side, measured honestly.

Importing the package decides the back-end (a GPU, or numba's CUDA simulator) before numba
is imported: see kernels_lab.runtime.
"""

from . import runtime  # noqa: F401  (must come first)
from .core import Axis, Case, Exercise, Size, SpeedSpec, fixed, get_workload, grid_for, all_workloads

__version__ = "0.1.0"
__all__ = ["Axis", "Case", "Exercise", "Size", "SpeedSpec", "fixed", "get_workload", "grid_for", "all_workloads",
           "runtime", "__version__"]

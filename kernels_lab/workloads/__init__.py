"""The workloads: one module each, its reference, variants, plans and exercises side by side.

Importing this package registers every module listed here (a new problem is a topic instead:
kernels_lab/topics/, README "Add a topic"; these move there in turn).
"""

from . import elementwise  # noqa: F401
from . import block_sums  # noqa: F401
from . import quantize_group  # noqa: F401
from . import softmax  # noqa: F401
from . import softmax_split  # noqa: F401  (adds the `split` variant to softmax)
from . import cross_entropy  # noqa: F401
from . import rnn  # noqa: F401
from . import decode  # noqa: F401
from . import decode_protocol  # noqa: F401  (lesson 07's graded exercise, on decode's megakernel)

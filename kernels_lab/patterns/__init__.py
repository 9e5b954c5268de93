"""One module per workload; importing this package registers them all."""

from . import elementwise  # noqa: F401
from . import consumer  # noqa: F401,E402
from . import pdl  # noqa: F401,E402

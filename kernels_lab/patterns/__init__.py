"""One module per workload; importing this package registers them all."""

from . import elementwise  # noqa: F401

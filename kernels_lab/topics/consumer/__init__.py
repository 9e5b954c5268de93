"""A persistent consumer: a resident kernel serving a host-fed queue (kernel.py: the GPU side;
host.py: the queue's owner and the launch-per-request baseline; hostpath.py: the host's hot
path compiled without the GIL; lesson 03_persistent). bench.py (`kernels-lab bench consumer`), polls.py
(where a request's microseconds go), figures.py, numbers.py, demo.py."""

from .host import (ConsumerError, ConsumerStopped, LaunchPerRequest, PersistentConsumer, QueueFull, ResultTimeout,
                   Ticket)
from .kernel import BLOCK, EXIT_IDLE_BUDGET, EXIT_RUNNING, EXIT_STOPPED, LL_MAX_BYTES, PROTOCOLS, default_protocol, reference

__all__ = ["BLOCK", "EXIT_IDLE_BUDGET", "EXIT_RUNNING", "EXIT_STOPPED", "LL_MAX_BYTES", "PROTOCOLS", "ConsumerError", "ConsumerStopped", "LaunchPerRequest",
           "PersistentConsumer", "QueueFull", "ResultTimeout", "Ticket", "default_protocol", "reference"]

ORDER = 3  # where it stands among the topics: its lesson's number

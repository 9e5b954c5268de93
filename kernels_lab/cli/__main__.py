"""`python -m kernels_lab.cli`: the kernels-lab command."""

import sys

from . import main

sys.exit(main())

"""`python -m memory_plane` runs the memplane CLI."""

import sys

from ._cli import main

sys.exit(main())

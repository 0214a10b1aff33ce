"""`python -m memory_plane` runs the memplane CLI."""

import sys

from .cli import main

sys.exit(main())

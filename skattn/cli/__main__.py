"""``python -m skattn.cli`` runs the command line (as ``python -m skattn`` does)."""

import sys

from . import main

sys.exit(main())

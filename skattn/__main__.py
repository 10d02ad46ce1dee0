"""``python -m skattn``: the ``skattn`` command line (see :mod:`skattn.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())

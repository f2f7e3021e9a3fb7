"""``python -m evalcore``: the command line (see :mod:`evalcore.cli`)."""

import sys

from evalcore.cli import main

if __name__ == "__main__":
    sys.exit(main())

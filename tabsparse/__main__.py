"""``python -m tabsparse``: the command line of :mod:`tabsparse.cli`."""

import sys

from tabsparse.cli import main

if __name__ == "__main__":
    sys.exit(main())

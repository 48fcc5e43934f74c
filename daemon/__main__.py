"""``python -m daemon [options]`` is ``brain serve [options]``."""

import sys

from daemon.cli import main

sys.exit(main(["serve", *sys.argv[1:]]))

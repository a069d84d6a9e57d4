"""``python -m bench.broker``: the broker-load benchmark (:mod:`bench.broker.load`)."""

import sys

from bench.broker.load import main

sys.argv[0] = "python -m bench.broker"  # argparse names the command, not __main__.py
main()

"""``python -m bench.neli``: the NELI takeover benchmark (:mod:`bench.neli.takeover`)."""

import sys

from bench.neli.takeover import main

sys.argv[0] = "python -m bench.neli"  # argparse names the command, not __main__.py
main()

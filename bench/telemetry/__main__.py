"""``python -m bench.telemetry``: the tracing-overhead benchmark (:mod:`.tracing`)."""

import sys

from bench.telemetry.tracing import main

sys.argv[0] = "python -m bench.telemetry"  # argparse names the command, not __main__.py
main()

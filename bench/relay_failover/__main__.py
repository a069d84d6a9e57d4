"""``python -m bench.relay_failover``: the relay takeover benchmark (:mod:`.takeover`)."""

import sys

from bench.relay_failover.takeover import main

sys.argv[0] = "python -m bench.relay_failover"  # argparse names the command, not __main__.py
main()

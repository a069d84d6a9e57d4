"""``python -m bench.relay_failover``: the relay takeover benchmark (:mod:`.takeover`)."""

from bench.relay_failover.takeover import main

main()

"""``python -m bench.telemetry``: the tracing-overhead benchmark (:mod:`.tracing`)."""

from bench.telemetry.tracing import main

main()

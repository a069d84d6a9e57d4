"""``python -m bench.broker``: the broker-load benchmark (:mod:`bench.broker.load`)."""

from bench.broker.load import main

main()

"""``python -m bench.neli``: the NELI takeover benchmark (:mod:`bench.neli.takeover`)."""

from bench.neli.takeover import main

main()

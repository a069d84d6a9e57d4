"""``python -m bench.election``: NELI beside ZooKeeper and etcd (:mod:`bench.election.peers`)."""

import sys

from bench.election.peers import main

sys.argv[0] = "python -m bench.election"  # argparse names the command, not __main__.py
main()

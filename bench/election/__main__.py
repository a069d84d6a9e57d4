"""``python -m bench.election``: NELI beside ZooKeeper and etcd (:mod:`bench.election.peers`)."""

from bench.election.peers import main

main()

"""Local and demo tooling, never needed in production.

A local Apache Kafka (:mod:`.broker`), a local cluster of OS processes, the demo and its
verdict, the NELI probe and the trace viewer. Production code never imports this package (a
layering test checks).
"""

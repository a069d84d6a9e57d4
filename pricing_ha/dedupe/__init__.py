"""Where dedupe happens: arbitration of the two groups' copies, and the relay writing ``prices``.

* :mod:`.arbitration`: first copy of each ``(instrument, seq)`` wins (A/B line arbitration);
* :mod:`.relay`: ``pricing-ha dedupe``, exclusive owner of each ``prices`` partition, and
  :mod:`.relay_worker`, its partition worker (takeover, hand-over, the hot path);
* :mod:`.records`: what the relay reads from ``prices.raw``;
* :mod:`.standby`: the hot standby: every partition of ``prices`` tailed, control records;
* :mod:`.output`: what the relay writes (``prices``, its dead-letter topic, fail-over spans).
"""

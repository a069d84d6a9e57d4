"""Where prices are computed and published: groups P1 and P2.

* :mod:`.quotes`: the ``md.quotes`` wire format, validation and sequence checks;
* :mod:`.epochs`: ``(epoch, seq)`` positions and the bounds on how far one record moves them;
* :mod:`.pricing`: the pure, deterministic pricing function and the canonical price bytes;
* :mod:`.publisher`: one member of a publishing group (``pricing-ha run --group p1``), and
  :mod:`.quote_worker`, its quote worker (quotes priced, prices produced, positions committed).
"""

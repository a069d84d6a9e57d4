"""The ``pricing-ha`` command line.

Each command's body is a function named ``<command>_command`` in a module of this package; the
modules register on one typer app (:mod:`._app`), imported here:

* :mod:`.members`: ``run`` (a publisher member), ``dedupe`` (a relay member);
  :mod:`.marks`: ``reset-mark`` (an operator's reset of an instrument's mark);
* :mod:`.feed`: ``feed``; :mod:`.subscribe`: ``subscribe``; :mod:`.topics`: ``topics create|check``;
* :mod:`.observe`: ``status``, ``traces``; :mod:`.demo`: ``demo``, ``neli-demo``;
  :mod:`.broker`: ``broker``; :mod:`.acls`: ``acls`` (the role table's Kafka ACLs);
* :mod:`.pipeline`: ``pipeline ingest|availability|reconcile|bars|report``.
"""

from __future__ import annotations

from pricing_ha.cli import (
    acls,
    broker,
    demo,
    feed,
    marks,
    members,
    observe,
    pipeline,
    subscribe,
    topics,
)
from pricing_ha.cli._app import app

__all__ = ["app", "main"]

_COMMAND_MODULES = (
    acls,
    broker,
    demo,
    feed,
    marks,
    members,
    observe,
    pipeline,
    subscribe,
    topics,
)


def main() -> None:
    """Console-script entry point."""
    app()

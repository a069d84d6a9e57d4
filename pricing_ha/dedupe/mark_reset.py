"""An operator's reset of one instrument's mark on the running relays.

A mark moved too far (a bad jump that both groups confirmed, say) drops every later price of the
instrument as a duplicate. ``pricing-ha reset-mark INSTRUMENT`` writes a ``reset`` control record
(:data:`~pricing_ha.dedupe.control.RESET`, header ``instrument``) to the instrument's partition of
``prices``, where every relay member already reads:

* every member's standby tail folds it into its view of the partition (the instrument's mark is
  forgotten: :meth:`~pricing_ha.dedupe.control.PartitionView.fold_control`), so a takeover, a
  restart and a checkpoint all start from the reset mark: the reset survives relay restarts, as
  any record of ``prices`` does;
* the owner's tail queues it, and the owner's hot path resets the arbiter's line
  (:meth:`~pricing_ha.dedupe.arbitration.Arbiter.reset_mark`) within one of its cycles, logged
  and traced (``relay.reset-mark {instrument}``) — unless its marks were taken from above the
  record (a takeover after it), which already hold the reset;
* subscribers reset their own check of the instrument (:mod:`pricing_ha.subscribing`).

The instrument's next copy then starts its line again, within the bounds of
:mod:`pricing_ha.dedupe.arbitration` (beyond them: once the other group confirms it).
"""

from __future__ import annotations

import logging
import os
import socket
import time

from confluent_kafka import KafkaError, Message, Producer
from opentelemetry import trace

from pricing_ha.config import AppConfig
from pricing_ha.dedupe.control import RESET
from pricing_ha.errors import PricingError
from pricing_ha.kafka.headers import CONTROL_HEADER
from pricing_ha.kafka.partitioning import instrument_partition

__all__ = ["MarkResetError", "write_reset"]

log = logging.getLogger("pricing_ha.relay")

_TIMEOUT_S = 10.0


class MarkResetError(PricingError):
    """The reset record was not acknowledged.

    Attributes:
        instrument: the instrument whose mark was to be reset.
        problem: what went wrong.
    """

    def __init__(self, instrument: str, problem: str) -> None:
        self.instrument = instrument
        self.problem = problem
        super().__init__(f"reset of {instrument!r} not written: {problem}")


def write_reset(cfg: AppConfig, instrument: str, *, operator: str | None = None) -> tuple[int, int]:
    """Write the reset record of ``instrument`` to its partition of ``prices``, in a span.

    Args:
        cfg: the configuration (broker, topics).
        instrument: the instrument whose mark the relays forget.
        operator: who asked (a header and a span attribute); default ``user@host``.

    Returns:
        The partition and offset of the record.

    Raises:
        MarkResetError: if the broker did not acknowledge it within 10 s.
    """
    who = operator or f"{os.environ.get('USER', '?')}@{socket.gethostname()}"
    partition = instrument_partition(instrument, cfg.topics.partitions)
    tracer = trace.get_tracer("pricing_ha.relay")
    with tracer.start_as_current_span(
        f"reset-mark {instrument}",
        attributes={
            "messaging.system": "kafka",
            "messaging.destination.name": cfg.topics.prices,
            "messaging.destination.partition.id": str(partition),
            "pricing_ha.instrument": instrument,
            "pricing_ha.operator": who,
        },
    ) as span:
        producer = Producer(
            cfg.broker.client_config(
                required={"acks": "all", "enable.idempotence": True, "client.id": "reset-mark"}
            ),
            logger=log,
        )
        got: list[tuple[KafkaError | None, int]] = []

        def delivered(err: KafkaError | None, msg: Message) -> None:
            got.append((err, msg.offset() or -1))

        producer.produce(
            cfg.topics.prices,
            value=b"",
            partition=partition,
            headers=[
                (CONTROL_HEADER, RESET),
                ("instrument", instrument.encode()),
                ("operator", who.encode()),
                ("reset_ns", str(time.time_ns()).encode()),
            ],
            on_delivery=delivered,
        )
        producer.flush(_TIMEOUT_S)
        if not got or got[0][0] is not None:
            problem = str(got[0][0]) if got else f"not acknowledged within {_TIMEOUT_S:g} s"
            span.set_status(trace.Status(trace.StatusCode.ERROR, problem))
            raise MarkResetError(instrument, problem)
        offset = got[0][1]
        span.set_attribute("messaging.kafka.offset", offset)
        log.warning(
            "reset of the mark of %s requested by %s: prices[%d] offset %d",
            instrument,
            who,
            partition,
            offset,
        )
        return partition, offset

"""What every subscriber shares: one consumer, assigned partitions, on a thread of its own.

:class:`AssignedReader` is the base of :class:`~.client.PriceClient` and
:class:`~.subscriber.Subscriber`: the consumer is never a member of a consumer group
(partitions are assigned), every librdkafka call runs on one dedicated thread (so none blocks
the event loop and the consumer is never used from two threads at once), and :meth:`close`
waits for an in-flight poll before closing it. :func:`wanted_partitions` is where an
instrument filter becomes an assignment: only the partitions the instruments live on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Self, TypeVar

from confluent_kafka import Message

from pricing_ha.errors import TopicLayoutError
from pricing_ha.kafka.partitioning import instrument_partition
from pricing_ha.kafka.topics import fetch_metadata

__all__ = ["AssignedReader", "fetch_batch", "wanted_partitions"]

_BATCH = 1000
_R = TypeVar("_R")


def fetch_batch(consumer: Any, wait_s: float) -> list[Message]:
    """Waits up to ``wait_s`` for one record, then takes whatever else is already there.

    ``consume(n, timeout)`` alone would wait for the whole timeout unless n records arrive,
    adding up to ``wait_s`` of latency to every price.
    """
    first: list[Message] = consumer.consume(1, wait_s)
    return first + consumer.consume(_BATCH - 1, 0) if first else first


def wanted_partitions(
    instruments: Iterable[str] | None, partitions: int
) -> dict[int, set[bytes]] | None:
    """Partition -> the keys of ``instruments`` living there (``None``: no filter, all).

    An instrument lives on the same partition of every keyed topic
    (:mod:`pricing_ha.kafka.partitioning`), so this holds for ``prices`` and ``prices.raw``.
    """
    if instruments is None:
        return None
    out: dict[int, set[bytes]] = {}
    for name in instruments:
        out.setdefault(instrument_partition(name, partitions), set()).add(name.encode())
    return out


class AssignedReader:
    """A consumer on its own thread, closed once; subclasses connect it in :meth:`start`.

    Args:
        thread_name: the prefix of the consumer thread's name.
    """

    def __init__(self, *, thread_name: str) -> None:
        """Prepares the thread; nothing connects until :meth:`start`."""
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=thread_name)
        self._consumer: Any = None
        self._closed = False

    async def _call(self, fn: Callable[..., _R], *args: Any) -> _R:
        """Runs a librdkafka call on the consumer's own thread."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _partition_count(self, topic: str, bootstrap: str, timeout_s: float) -> int:
        """The partition count of ``topic`` (the consumer must exist).

        Raises:
            BrokerUnavailableError: if no broker answers within ``timeout_s``.
            TopicLayoutError: if the topic does not exist.
        """
        md = await self._call(fetch_metadata, self._consumer, bootstrap, timeout_s)
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise TopicLayoutError(
                f"topic {topic!r} does not exist; create it with `pricing-ha topics create`"
            )
        return len(meta.partitions)

    async def start(self) -> None:
        """Connects and assigns (subclasses)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Closes the consumer (after any in-flight poll); iteration ends. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._consumer is not None:
            await self._call(self._consumer.close)
        self._executor.shutdown(wait=False)

    async def __aenter__(self) -> Self:
        """Starts (closing again if that fails)."""
        try:
            await self.start()
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Closes."""
        await self.close()

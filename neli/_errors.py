"""Errors raised by the ``neli`` library.

::

    NeliError
     ├── NeliConfigError   a NeliConfig field (or passthrough setting) is invalid
     ├── TopicError        the NELI topic is missing or has the wrong partition count
     ├── NeliClosedError   the instance was used after close()
     └── BrokerUnavailableError  the broker did not answer at start

Every error keeps its context as attributes, so callers can react without parsing messages.
"""

from __future__ import annotations


class NeliError(Exception):
    """Root of every error raised by ``neli``."""


class NeliConfigError(NeliError, ValueError):
    """A configuration value is invalid.

    Attributes:
        field: the offending field (or passthrough key), e.g. ``"threshold_ms"``.
        problem: what is wrong with it.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"NeliConfig.{field}: {problem}")


class TopicError(NeliError):
    """The NELI topic is missing or does not have the expected partition count.

    Attributes:
        topic: the topic name.
        partitions: the partition count found (``None`` when the topic is missing).
    """

    def __init__(self, topic: str, partitions: int | None, problem: str) -> None:
        self.topic = topic
        self.partitions = partitions
        super().__init__(f"topic {topic!r}: {problem}")


class NeliClosedError(NeliError):
    """The operation needs a running instance, but it was never started or is closed."""


class BrokerUnavailableError(NeliError):
    """The broker did not answer within the bounded start-up retries.

    Attributes:
        bootstrap_servers: the servers that were tried.
    """

    def __init__(self, bootstrap_servers: str, problem: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        super().__init__(f"broker {bootstrap_servers!r} unavailable: {problem}")

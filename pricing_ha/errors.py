"""The application's error hierarchy.

::

    PricingError
     ├── ConfigError          invalid configuration: names the file, the key and the problem
     ├── TopicLayoutError     topics missing or with mismatched partition counts
     ├── BrokerUnavailableError  the broker did not answer within the bounded retries
     │    └── BrokerAuthenticationError  the broker refused our credentials
     ├── LocalKafkaError      the local Apache Kafka (demo, tests) could not be found or started
     ├── SparkConnectorError  Spark's Kafka connector (or a jar it needs) is not where it must be
     ├── InvalidQuoteError    (pricing_ha.publishing.quotes) a quote that cannot be priced -> DLQ
     ├── InvalidPriceError    (pricing_ha.publishing.pricing) a price value that cannot be decoded
     ├── IngestModeError      (pricing_ha.pipeline.ingest) an output written by the other mode
     ├── IngestStreamError    (pricing_ha.pipeline.ingest) a streaming ingest query that failed
     └── ReplayError          (pricing_ha.feed.sources) a bad replay CSV file or row

Each class carries ``exit_code``, the process exit status a command uses when the error ends it
(1 unless stated), so every command maps errors to statuses the same way.
"""

from __future__ import annotations


class PricingError(Exception):
    """Root of every error raised by pricing-ha."""

    exit_code: int = 1


class ConfigError(PricingError):
    """A configuration file or environment override is invalid.

    Attributes:
        source: the file (or ``"environment"``) the bad value came from.
        key: the dotted key, e.g. ``neli.threshold_ms``.
        problem: what is wrong with it.
    """

    exit_code = 2

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        super().__init__(f"{source}: {key}: {problem}")


class TopicLayoutError(PricingError):
    """The topics are missing or their partition counts differ."""

    exit_code = 4


class BrokerUnavailableError(PricingError):
    """The broker could not be reached after bounded retries."""

    exit_code = 3


class BrokerAuthenticationError(BrokerUnavailableError):
    """The broker refused the client's credentials (a wrong SASL user or password): it will
    not answer this process, however long it retries."""


class LocalKafkaError(PricingError):
    """The local Apache Kafka's jars or Java are missing, or a node failed to start."""


class SparkConnectorError(PricingError):
    """Spark's Kafka connector jars are missing or do not match PySpark, or a jar the
    configured authentication needs (``aws-msk-iam-auth``) is not on Spark's classpath."""

"""The application's error hierarchy.

::

    PricingError
     ├── ConfigError          invalid configuration: names the file, the key and the problem
     ├── TopicLayoutError     topics missing or with mismatched partition counts
     ├── BrokerUnavailableError  the broker did not answer within the bounded retries
     └── EmbeddedBrokerError  the embedded Tansu broker could not be found or started
"""

from __future__ import annotations


class PricingError(Exception):
    """Root of every error raised by pricing-ha."""


class ConfigError(PricingError):
    """A configuration file or environment override is invalid.

    Attributes:
        source: the file (or ``"environment"``) the bad value came from.
        key: the dotted key, e.g. ``neli.threshold_ms``.
        problem: what is wrong with it.
    """

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        super().__init__(f"{source}: {key}: {problem}")


class TopicLayoutError(PricingError):
    """The topics are missing or their partition counts differ."""


class BrokerUnavailableError(PricingError):
    """The broker could not be reached after bounded retries."""


class EmbeddedBrokerError(PricingError):
    """The embedded broker binary is missing or failed to start."""

"""The start-up check of the NELI topic: it exists, with the partition count expected."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaException

from neli._config import NeliConfig
from neli._errors import BrokerUnavailableError, TopicError

__all__ = ["topic_partitions"]


def topic_partitions(consumer: Consumer, cfg: NeliConfig) -> int:
    """The partition count M of ``cfg.topic``, checked against ``cfg.expected_partitions``.

    Raises:
        BrokerUnavailableError: no metadata within ``start_timeout_ms``.
        TopicError: the topic is missing, or has a partition count other than expected.
    """
    try:
        md = consumer.list_topics(cfg.topic, timeout=cfg.start_timeout_ms / 1000)
    except KafkaException as exc:
        raise BrokerUnavailableError(
            cfg.bootstrap_servers,
            f"no metadata within {cfg.start_timeout_ms} ms ({exc.args[0]})",
        ) from exc
    topic = md.topics.get(cfg.topic)
    if topic is None or topic.error is not None or not topic.partitions:
        raise TopicError(cfg.topic, None, "does not exist (create it with M partitions first)")
    count = len(topic.partitions)
    if cfg.expected_partitions is not None and count != cfg.expected_partitions:
        raise TopicError(
            cfg.topic, count, f"has {count} partitions, expected {cfg.expected_partitions}"
        )
    return count

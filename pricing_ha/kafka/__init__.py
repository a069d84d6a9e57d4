"""Kafka plumbing shared by every role: record headers, the partitioner, the topic layout."""

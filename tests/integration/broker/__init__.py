"""The local Apache Kafka, its faults, topics, security, and recovery from them."""

"""What several benchmarks share: a loaded pricing cluster, topic gaps, process CPU, the report."""

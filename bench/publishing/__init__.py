"""Publishing: silence on the union while publishers or the broker fail; one group's throughput."""

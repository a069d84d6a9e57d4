"""Publishing groups and the feed against a real broker."""

"""Subscribers against a real broker: the client, direct mode, the Go example."""

"""NELI against a real broker: in-process members, OS processes, traces, examples."""

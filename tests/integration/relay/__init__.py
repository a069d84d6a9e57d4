"""The relay against a real broker: fail-overs, fences, moves, lifecycles."""

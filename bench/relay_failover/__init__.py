"""Relay fail-over: what a relay crash, stall, hand-over or join costs ``prices``; arbitration."""

"""Relay fail-over simulation: real relay workers, fake clients, simulated time, no broker."""

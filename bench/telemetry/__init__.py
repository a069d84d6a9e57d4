"""Telemetry: what tracing a share of prices costs."""

"""Unit tests of ``pricing_ha.telemetry`` (traces, metrics, health, logs)."""

"""Operations against a real broker: metrics, health, telemetry, status."""

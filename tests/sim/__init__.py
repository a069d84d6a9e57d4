"""Broker-free simulations: NELI groups (``neli_group``) and relay fail-overs (``relay``)."""

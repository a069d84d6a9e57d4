"""Unit tests of ``pricing_ha.wire`` (the wire contract's structs and schemas)."""

"""Unit tests of ``pricing_ha.security`` (the role table, ACLs, IAM policies)."""

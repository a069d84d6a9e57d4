"""``pricing-ha status`` lists every configured group, present or not."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from pricing_ha.local.cluster import PricingCluster, pricing_cli
from pricing_ha.local.waiting import wait_for


def test_status_marks_absent_groups_and_their_unled_partitions(cluster: PricingCluster) -> None:
    """Only P1 runs: status shows P1 leading everything, P2 and the relay ABSENT and all unled."""
    cluster.publisher("p1", "a")
    base = [*pricing_cli(), "status", "--config", str(cluster.config_path), "--window", "1"]
    every = list(range(cluster.partitions))
    p1, p2, relay = (f"pricing.{cluster.group(g)}" for g in ("p1", "p2", "relay"))
    doc: dict[str, Any] = {}

    def p1_leads_everything() -> bool:
        out = subprocess.run(
            [*base, "--json"], capture_output=True, text=True, timeout=60, check=False
        )
        assert out.returncode == 0, out.stderr
        doc.clear()
        doc.update(json.loads(out.stdout))
        groups = {g["group"]: g for g in doc["groups"]}
        return p1 in groups and not groups[p1]["absent"] and groups[p1]["unled"] == []

    wait_for(p1_leads_everything, 60, "status to show p1 leading every partition")
    groups = {g["group"]: g for g in doc["groups"]}
    assert [g["group"] for g in doc["groups"]][:3] == [p1, p2, relay]  # configured order
    assert [groups[g]["role"] for g in (p1, p2, relay)] == ["publishing", "publishing", "relay"]
    for absent in (p2, relay):
        assert groups[absent]["absent"] is True
        assert groups[absent]["members"] == []
        assert groups[absent]["unled"] == every

    text = subprocess.run(base, capture_output=True, text=True, timeout=60, check=True).stdout
    assert f"group {p2} [publishing]: ABSENT" in text
    assert f"group {relay} [relay]: ABSENT" in text
    assert f"unled partitions: {','.join(map(str, every))}" in text
    assert "attention: 2 group(s) absent or with unled partitions" in text

"""deploy/prometheus and deploy/grafana: alert rules and the dashboard, checked against the code.

promtool (Debian's ``prometheus`` package, installed by scripts/bootstrap) checks the rules and
the Prometheus configuration, runs the rules' unit tests (alerts.test.yml) and parses every
dashboard query; every ``pricing_ha_*`` series they name must be one the code serves on
/metrics.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from neli import EventKind
from pricing_ha.config import AppConfig, TelemetryConfig
from pricing_ha.telemetry import Telemetry, setup_telemetry
from tests.unit.telemetry.prometheus_format import parse
from tests.unit.telemetry.test_kafka_stats import _consumer_stats, _producer_stats

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS = ROOT / "deploy" / "prometheus"
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "pricing-ha.json"
_SERIES = re.compile(r"\bpricing_ha_[a-z0-9_]+")


def _promtool(*args: str, cwd: Path = PROMETHEUS) -> str:
    """Run promtool; fail (never skip) when it is missing."""
    tool = shutil.which("promtool")
    assert tool is not None, (
        "promtool is missing: scripts/bootstrap installs Debian's prometheus package "
        "(apt-get install prometheus)"
    )
    done = subprocess.run(
        [tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _dashboard_queries() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in doc["panels"] for target in panel["targets"]]


@pytest.fixture
def telemetry(tmp_path: Path) -> Iterator[Telemetry]:
    """A telemetry on which every kind of series the roles export has been produced once."""
    cfg = AppConfig(telemetry=TelemetryConfig(traces_dir=tmp_path, per_instrument_metrics=True))
    tel = setup_telemetry(cfg, service_role="relay", group=None, member="r1", env={})
    m = tel.metrics
    m.declare_defects("relay", [0])
    m.declare_latency("relay")
    m.prices_published.add(0, {"group": "p1", "partition": "0"})
    m.prices_relayed.add(0, {"partition": "0"})
    m.prices_delivered.add(0, {"partition": "0"})
    m.leadership_transitions.add(0, {"group": "p1", "kind": EventKind.ACQUIRED.value})
    m.set_leadership("p1", "m1", 0, True)
    m.mark_partitions_fresh([0])
    m.mark_fresh("EURUSD")
    m.watch_rejections("p1", lambda: {"not a heartbeat": 0})
    m.watch_takeovers(lambda: (0, 0))
    tel.kafka_stats.on_stats(_consumer_stats("m1-quotes", 0))
    tel.kafka_stats.on_stats(_producer_stats("m1-prices", 0))
    yield tel
    tel.shutdown()


def test_promtool_checks_the_rules_and_the_prometheus_configuration() -> None:
    """promtool check rules/config pass, and the alert rules' unit tests pass."""
    assert "SUCCESS: 9 rules found" in _promtool("check", "rules", "alerts.yml")
    _promtool("check", "config", "prometheus.yml")
    _promtool("test", "rules", "alerts.test.yml")


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    """Each panel's query parses (promtool checks it as a recording rule)."""
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{i}", "expr": expr}
                    for i, expr in enumerate(_dashboard_queries())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard.rules.json"  # YAML is a superset of JSON
    path.write_text(json.dumps(rules))
    _promtool("check", "rules", str(path), cwd=tmp_path)


def test_rules_and_dashboard_name_only_series_the_code_serves(telemetry: Telemetry) -> None:
    """Every pricing_ha_* series in alerts.yml and the dashboard is on the code's /metrics."""
    served = {
        name for fam in parse(telemetry.prometheus_text()).values() for name, *_ in fam.samples
    }
    used = set(_SERIES.findall((PROMETHEUS / "alerts.yml").read_text()))
    used |= {name for expr in _dashboard_queries() for name in _SERIES.findall(expr)}
    assert len(used) >= 14
    assert used <= served, sorted(used - served)


def test_dashboard_is_provisioned_from_the_repository() -> None:
    """The provisioning files load the dashboard folder and the datasource its panels use."""
    doc = json.loads(DASHBOARD.read_text())
    uids = {t["datasource"]["uid"] for p in doc["panels"] for t in p["targets"]}
    datasources = (GRAFANA / "provisioning/datasources/prometheus.yaml").read_text()
    assert uids == {"pricing-ha-prometheus"}
    assert "uid: pricing-ha-prometheus" in datasources
    providers = (GRAFANA / "provisioning/dashboards/pricing-ha.yaml").read_text()
    assert re.search(r"type: file\s+[\s\S]*path: /var/lib/grafana/dashboards/pricing-ha", providers)
    assert doc["uid"] == "pricing-ha"
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))

"""deploy/terraform, checked offline: parsed with python-hcl2, then scanned by checkov.

No terraform binary, provider or cloud account is needed. The structural tests read what the
configuration says (and evaluate the small pieces of it that decide placement), so that "P1 and
P2 never share an AZ" is a property of the code, not a convention.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.unit.project.test_deploy_tools import (
    TERRAFORM,
    blocks,
    resources,
    run_tool,
    terraform_files,
    tool,
    top_level,
    v,
)

MODULE_DIRS = ["", "modules/network", "modules/msk", "modules/service", "examples/two-az"]


def all_blocks(kind: str) -> dict[str, dict[str, Any]]:
    """``{"dir:name": body}`` of every top-level ``kind`` block in every directory."""
    found: dict[str, dict[str, Any]] = {}
    for d in MODULE_DIRS:
        for name, body in top_level(kind, d).items():
            found[f"{d or '.'}:{name}"] = body
    return found


def root_services() -> dict[str, dict[str, Any]]:
    """The ``local.services`` table of the root module: role -> AZ indexes, command, topics."""
    services: dict[str, dict[str, Any]] = _root_local("services")
    return services


def _root_local(name: str) -> Any:
    """The expression (or literal) of ``local.<name>`` in the root module."""
    for path, doc in terraform_files().items():
        if "/" in path:
            continue
        for entry in doc.get("locals", []):
            if name in entry:
                return v(entry, name)
    raise AssertionError(f"local.{name} not found in the root module")


def test_every_directory_parses_and_has_the_standard_files() -> None:
    """Root, modules and example each have main/variables/outputs/versions .tf files."""
    files = set(terraform_files())
    for d in MODULE_DIRS:
        prefix = f"{d}/" if d else ""
        expected = {f"{prefix}{n}.tf" for n in ("main", "outputs", "versions")}
        if d != "":
            expected.add(f"{prefix}variables.tf")
        assert expected <= files, f"{d or 'root'}: missing {expected - files}"
    assert "variables.tf" in files


def test_every_variable_has_description_and_type() -> None:
    """Every variable, in every module and example, has a non-empty description and a type."""
    variables = all_blocks("variable")
    assert len(variables) > 40
    for name, body in variables.items():
        assert str(v(body, "description")).strip(), f"{name}: no description"
        assert "type" in body, f"{name}: no type"


def test_every_output_has_a_description() -> None:
    """Every output has a non-empty description."""
    outputs = all_blocks("output")
    assert len(outputs) > 15
    for name, body in outputs.items():
        assert str(v(body, "description")).strip(), f"{name}: no description"


@pytest.mark.parametrize("directory", MODULE_DIRS)
def test_terraform_and_providers_are_pinned(directory: str) -> None:
    """required_version and every provider's version have a lower and an upper bound."""
    docs = [
        doc
        for path, doc in terraform_files().items()
        if str(Path(path).parent) == (directory or ".")
    ]
    settings = [t for doc in docs for t in doc.get("terraform", [])]
    assert len(settings) == 1, f"{directory or 'root'}: one terraform block expected"
    block = settings[0]
    bounded = re.compile(r">=\s*[\d.]+,\s*<\s*[\d.]+|~>\s*[\d.]+")
    assert bounded.fullmatch(v(block, "required_version")), v(block, "required_version")
    providers = v(block, "required_providers")
    assert providers, "no required_providers"
    for name, value in providers.items():
        spec = value[0] if isinstance(value, list) else value
        assert spec["source"] == f"hashicorp/{name}"
        assert bounded.fullmatch(spec["version"]), f"{name}: {spec['version']}"


def test_publishing_groups_run_in_distinct_azs_on_disjoint_subnets() -> None:
    """P1 runs only in AZ a's subnet, P2 only in AZ b's: evaluated from the placement code."""
    services = root_services()
    assert services["p1"]["azs"] == [0]
    assert services["p2"]["azs"] == [1]
    assert services["p1"]["command"] == ["run", "--group", "p1"]
    assert services["p2"]["command"] == ["run", "--group", "p2"]
    call = top_level("module")["service"]
    # Each service gets exactly the subnets of its AZ indexes, and is pinned to that AZ.
    assert v(call, "subnet_ids") == "${[for i in each.value.azs : local.subnet_ids[i]]}"
    assert "local.azs[each.value.azs[0]]" in v(call, "availability_zone")
    # Subnet i is in AZ i: created so by the network module, or checked for existing subnets.
    subnet = resources("aws_subnet", "modules/network")["modules/network:private"]
    assert v(subnet, "count") == 2
    assert v(subnet, "availability_zone") == "${var.azs[count.index]}"
    check = resources("terraform_data", ".")[".:subnets_match_azs"]
    condition = v(blocks(check["lifecycle"][0], "precondition")[0], "condition")
    assert "data.aws_subnet.selected[0].availability_zone == local.azs[0]" in condition
    assert "data.aws_subnet.selected[1].availability_zone == local.azs[1]" in condition
    # The two AZs are distinct by validation.
    azs = top_level("variable")["availability_zones"]
    assert "length(distinct(var.availability_zones)) == 2" in v(
        blocks(azs, "validation")[0], "condition"
    )
    # Evaluate the placement for a concrete pair of subnets: disjoint, and in distinct AZs.
    subnet_az = {"subnet-a": "az-a", "subnet-b": "az-b"}
    subnet_ids = list(subnet_az)
    p1 = {subnet_ids[i] for i in services["p1"]["azs"]}
    p2 = {subnet_ids[i] for i in services["p2"]["azs"]}
    assert p1.isdisjoint(p2)
    assert {subnet_az[s] for s in p1}.isdisjoint({subnet_az[s] for s in p2})


def test_pinned_service_accepts_only_one_subnet_in_its_az() -> None:
    """The service module refuses a pinned service with several subnets or the wrong AZ."""
    service = resources("aws_ecs_service", "modules/service")["modules/service:this"]
    network = blocks(service, "network_configuration")[0]
    assert v(network, "subnets") == "${var.subnet_ids}"
    assert v(network, "assign_public_ip") is False
    condition = v(blocks(service["lifecycle"][0], "precondition")[0], "condition")
    assert "length(var.subnet_ids) == 1" in condition
    assert "data.aws_subnet.pinned[0].availability_zone" in condition


def test_relay_has_members_in_both_azs_and_feed_is_its_own_service() -> None:
    """relay_a and relay_b (one relay group) cover both AZs; the feed runs alone."""
    services = root_services()
    relays = {k: s for k, s in services.items() if s["command"][0] == "dedupe"}
    assert {tuple(s["command"]) for s in relays.values()} == {("dedupe", "--group", "relay")}
    assert sorted(i for s in relays.values() for i in s["azs"]) == [0, 1]
    assert services["feed"]["command"] == ["feed"]
    assert sorted(services["feed"]["azs"]) == [0, 1]
    assert set(services) == {"p1", "p2", "relay_a", "relay_b", "feed"}


def test_msk_uses_iam_auth_and_tls_in_transit_and_at_rest() -> None:
    """MSK: IAM only (no unauthenticated, no SCRAM), TLS everywhere, CMK at rest, private."""
    cluster = resources("aws_msk_cluster", "modules/msk")["modules/msk:this"]
    auth = blocks(cluster, "client_authentication")[0]
    assert v(auth, "unauthenticated") is False
    sasl = blocks(auth, "sasl")[0]
    assert v(sasl, "iam") is True
    assert v(sasl, "scram") is False
    encryption = blocks(cluster, "encryption_info")[0]
    assert v(encryption, "encryption_at_rest_kms_key_arn") == "${aws_kms_key.this.arn}"
    transit = blocks(encryption, "encryption_in_transit")[0]
    assert v(transit, "client_broker") == "TLS"
    assert v(transit, "in_cluster") is True
    group = blocks(cluster, "broker_node_group_info")[0]
    access = blocks(blocks(group, "connectivity_info")[0], "public_access")[0]
    assert v(access, "type") == "DISABLED"
    key = resources("aws_kms_key", "modules/msk")["modules/msk:this"]
    assert v(key, "enable_key_rotation") is True
    # The broker count is a multiple of the two AZs.
    count = top_level("variable")["broker_count"]
    assert "var.broker_count % 2 == 0" in v(blocks(count, "validation")[0], "condition")
    # The tasks use the IAM listener and the msk_iam auth of the application.
    assert "bootstrap_brokers_sasl_iam" in _root_local("bootstrap")
    auth_env = _root_local("kafka_auth_environment")
    assert "PRICING_HA__BROKER__AUTH" in auth_env
    assert "msk_iam" in auth_env


def test_bring_your_own_kafka_skips_msk() -> None:
    """kafka_bootstrap_servers set: no MSK cluster; the tasks use the given servers."""
    assert _root_local("create_msk") == "${var.kafka_bootstrap_servers == None}"
    assert v(top_level("module")["msk"], "count") == "${local.create_msk ? 1 : 0}"
    assert "var.kafka_bootstrap_servers" in _root_local("bootstrap")


def _all_text() -> str:
    """Every .tf file's text."""
    return "\n".join(p.read_text() for p in sorted(TERRAFORM.rglob("*.tf")))


def test_no_ingress_from_anywhere() -> None:
    """No security group rule, inline or separate, admits 0.0.0.0/0 or ::/0."""
    text = _all_text()
    assert "0.0.0.0/0" not in text
    assert "::/0" not in text
    for name, sg in resources("aws_security_group").items():
        assert "ingress" not in sg, f"{name}: inline ingress; use referenced-SG rules"
    rules = resources("aws_vpc_security_group_ingress_rule")
    assert len(rules) == 4
    for name, rule in rules.items():
        assert "referenced_security_group_id" in rule, name
        assert "cidr_ipv4" not in rule
        assert "cidr_ipv6" not in rule
    assert not resources("aws_security_group_rule")


def test_brokers_admit_only_the_services() -> None:
    """The brokers' only ingress comes from the task security groups, on the Kafka port."""
    rules = resources("aws_vpc_security_group_ingress_rule", ".")
    kafka = {k: r for k, r in rules.items() if "kafka" in k}
    assert set(kafka) == {".:kafka_from_services", ".:kafka_from_topics_task"}
    assert v(kafka[".:kafka_from_services"], "referenced_security_group_id") == (
        "${module.service[each.key].security_group_id}"
    )
    for rule in kafka.values():
        assert v(rule, "from_port") == v(rule, "to_port") == "${local.kafka_port}"


def test_iam_names_specific_topics_and_groups() -> None:
    """Kafka permissions: no kafka-cluster:* and no "*" resource; topic/group ARNs per role."""
    docs = resources("data.aws_iam_policy_document")
    kafka = docs[".:task_kafka"]
    statements = list(blocks(kafka, "statement"))
    statements += [d["statement"]["content"][0] for d in blocks(kafka, "dynamic")]
    assert len(statements) == 8
    for st in statements:
        actions = v(st, "actions")
        assert all(a.startswith("kafka-cluster:") and "*" not in a for a in actions), actions
        resource = v(st, "resources")
        assert resource != ["*"]
        assert "*" not in str(resource)
        text = str(resource)
        assert (
            "local.cluster_arn" in text
            or "local.topic_arn_prefix" in text
            or "local.group_arn_prefix" in text
            or "local.transactional_id_arn_prefix" in text
        )
    prefixes = {_root_local(n) for n in ("topic_arn_prefix", "group_arn_prefix")}
    assert any('":cluster/", ":topic/"' in p for p in prefixes)
    assert any('":cluster/", ":group/"' in p for p in prefixes)
    services = root_services()
    # Each role touches only its own topics (docs/architecture.md 2.1) and groups (2.3).
    assert services["feed"]["write"] == ["quotes"]
    assert services["feed"]["read"] == []
    for group in ("p1", "p2"):
        assert set(services[group]["write"]) == {"neli", "raw", "dlq"}
        assert set(services[group]["read"]) == {"quotes", "neli"}
        assert set(services[group]["groups"]) == {f"pricing.{group}", f"pricing.{group}.quotes"}
    for relay in ("relay_a", "relay_b"):
        assert "raw" not in services[relay]["write"]
        assert "prices" in services[relay]["write"]
    # A "*" resource anywhere in IAM is justified inline for checkov (X-Ray, ECR token, keys).
    for path in sorted(TERRAFORM.rglob("*.tf")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if re.search(r'resources\s*=\s*\["\*"\]', line):
                window = "\n".join(lines[i : i + 5])
                assert "checkov:skip" in window or "in a key policy" in line, (
                    f"{path}:{i + 1}: unjustified * resource"
                )
                assert "kafka" not in "\n".join(lines[max(0, i - 3) : i + 1]).lower()


def test_sigterm_grace_covers_a_hand_over() -> None:
    """stopTimeout is a variable, 15-120 s, defaulting above the publishers' threshold T."""
    container = _service_local("pricing_ha")
    assert container["stopTimeout"] == "${var.stop_timeout_seconds}"
    assert container["linuxParameters"]["initProcessEnabled"] is True
    grace = top_level("variable")["stop_timeout_seconds"]
    default = v(grace, "default")
    timing = v(top_level("variable")["timing"], "type")
    threshold = re.search(r"publisher_threshold_ms\W+optional\(number,\s*(\d+)", timing)
    session = re.search(r"publisher_session_timeout_ms\W+optional\(number,\s*(\d+)", timing)
    assert threshold is not None
    assert session is not None
    threshold_ms, session_ms = int(threshold[1]), int(session[1])
    assert default * 1000 > threshold_ms + session_ms
    assert "var.stop_timeout_seconds <= 120" in v(blocks(grace, "validation")[0], "condition")
    # The rolling update keeps every old task until its successor runs.
    service = resources("aws_ecs_service", "modules/service")["modules/service:this"]
    assert v(service, "deployment_minimum_healthy_percent") == 100
    assert v(service, "deployment_maximum_percent") == 200


def _service_local(name: str) -> Any:
    """The expression (or literal) of ``local.<name>`` in modules/service."""
    for path, doc in terraform_files().items():
        if path.startswith("modules/service/"):
            for entry in doc.get("locals", []):
                if name in entry:
                    return v(entry, name)
    raise AssertionError(name)


def test_containers_get_az_group_and_otlp_endpoint() -> None:
    """Pinned services get their AZ and rack; every container the OTLP sidecar endpoint."""
    call = top_level("module")["service"]
    env = v(call, "environment")
    assert "PRICING_HA__TELEMETRY__AZ" in env
    assert "PRICING_HA__BROKER__LIBRDKAFKA__CLIENT_RACK" in env
    common = _root_local("common_environment")
    assert "PRICING_HA__TELEMETRY__OTLP_ENDPOINT" in common
    assert "http://127.0.0.1:4318" in common
    assert "PRICING_HA_BOOTSTRAP" in common
    assert v(call, "command") == "${each.value.command}"
    for var in ("desired_count", "cpu", "memory"):
        assert f"var.services[each.key].{var}" in v(call, var)
    assert v(call, "image") == "${var.image}"


def test_otel_collector_sidecar_exports_traces_and_metrics() -> None:
    """An ADOT collector runs beside pricing-ha; its pipelines export traces and metrics."""
    collector = _service_local("otel_collector")
    assert collector["essential"] is False
    default_image = v(top_level("variable")["otel_collector_image"], "default")
    assert default_image.startswith("public.ecr.aws/aws-observability/aws-otel-collector:v")
    assert not default_image.endswith(":latest")
    config = (TERRAFORM / "modules/service/otel-collector.yaml").read_text()
    assert "127.0.0.1:4318" in config
    assert re.search(r"traces:\s*\n\s*receivers: \[otlp\][\s\S]*exporters: \[awsxray\]", config)
    assert re.search(r"metrics:\s*\n\s*receivers: \[otlp[\s\S]*exporters: \[awsemf\]", config)


def test_log_groups_have_retention_and_encryption() -> None:
    """Every CloudWatch log group has a retention and a KMS key."""
    groups = resources("aws_cloudwatch_log_group")
    assert len(groups) == 4
    for name, group in groups.items():
        assert "retention_in_days" in group, name
        assert "kms_key_id" in group, name
    container = _service_local("log_configuration")
    assert container["logDriver"] == "awslogs"


def test_topics_are_created_by_a_one_shot_task_before_the_services() -> None:
    """`pricing-ha topics create` runs once as a task; the services start after it."""
    task = top_level("module")["topics_task"]
    assert v(task, "command") == ["topics", "create"]
    assert v(task, "create_service") is False
    assert "${terraform_data.topics}" in v(top_level("module")["service"], "depends_on")
    run = resources("terraform_data", ".")[".:topics"]
    command = v(blocks(run, "provisioner")[0]["local-exec"], "command")
    assert "aws ecs wait tasks-stopped" in command
    assert "exitCode" in command


def test_checkov_passes_on_terraform() -> None:
    """checkov finds no failed check in deploy/terraform; every skip carries a reason."""
    done = run_tool(
        tool("checkov"),
        "-d",
        TERRAFORM,
        "--framework",
        "terraform",
        "--skip-download",
        "--compact",
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["summary"]["failed"] == 0
    assert report["summary"]["parsing_errors"] == 0
    assert report["summary"]["passed"] > 200
    for skipped in report["results"]["skipped_checks"]:
        reason = skipped["check_result"].get("suppress_comment", "")
        assert len(reason) > 20, f"{skipped['check_id']} skipped without a reason"


def test_metrics_reach_cloudwatch_by_one_path_only() -> None:
    """The collector takes metrics by OTLP push alone: no scrape of /metrics into awsemf too."""
    config = (TERRAFORM / "modules/service/otel-collector.yaml").read_text()
    pipeline = re.search(r"metrics:\s*\n\s*receivers: \[(?P<receivers>[^\]]*)\]", config)
    assert pipeline is not None
    assert pipeline["receivers"] == "otlp"
    assert "prometheus:" not in config
    assert "%{ if scrape" not in config
    service_main = (TERRAFORM / "modules/service/main.tf").read_text()
    assert "scrape" not in service_main

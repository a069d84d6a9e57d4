"""One node of a three-node local Kafka per host (network namespace): config and validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.broker import LocalKafka

HOSTS = ("10.213.1.2", "10.213.2.2", "10.213.3.2")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def _settings(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return dict(line.split("=", 1) for line in lines if line)


def _node_two(tmp_path: Path) -> LocalKafka:
    return LocalKafka(
        nodes=3, hosts=HOSTS, port=9092, node_id=2, cluster_id=CLUSTER_ID, workdir=tmp_path
    )


def test_node_listens_on_its_own_host_and_names_every_voter_at_theirs(tmp_path: Path) -> None:
    """Node 2 binds clients and controller to its host; the quorum names all three hosts."""
    settings = _settings(_node_two(tmp_path).node(2).write_config())
    assert settings["node.id"] == "2"
    assert settings["broker.rack"] == "b"
    assert settings["listeners"] == "PLAINTEXT://10.213.2.2:9092,CONTROLLER://10.213.2.2:9093"
    assert settings["advertised.listeners"] == "PLAINTEXT://10.213.2.2:9092"
    assert settings["controller.quorum.voters"] == (
        "1@10.213.1.2:9093,2@10.213.2.2:9093,3@10.213.3.2:9093"
    )
    assert settings["min.insync.replicas"] == "2"
    assert settings["default.replication.factor"] == "3"


def test_node_runs_only_itself_and_knows_the_cluster(tmp_path: Path) -> None:
    """Only node 2 is this object's to run; the bootstrap and cluster id are the cluster's."""
    kafka = _node_two(tmp_path)
    assert [n.node_id for n in kafka.local_nodes] == [2]
    assert kafka.bootstrap == "10.213.1.2:9092,10.213.2.2:9092,10.213.3.2:9092"
    assert kafka.cluster_id == CLUSTER_ID
    assert not kafka.running


def test_three_nodes_on_one_host_still_use_loopback_and_distinct_ports(tmp_path: Path) -> None:
    """Without hosts, every node stays on 127.0.0.1 with ports PORT, PORT+1, PORT+2."""
    kafka = LocalKafka(nodes=3, port=39092, workdir=tmp_path)
    assert kafka.bootstrap == "127.0.0.1:39092,127.0.0.1:39093,127.0.0.1:39094"
    assert [n.node_id for n in kafka.local_nodes] == [1, 2, 3]
    settings = _settings(kafka.node(3).write_config())
    assert settings["listeners"].startswith("PLAINTEXT://127.0.0.1:39094,CONTROLLER://127.0.0.1:")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hosts": HOSTS[:2]}, "one address per node"),
        ({"hosts": (HOSTS[0], HOSTS[0], HOSTS[2])}, "distinct"),
        ({"hosts": HOSTS, "port": None}, "port"),
        ({"hosts": None, "node_id": 1, "cluster_id": CLUSTER_ID}, "hosts"),
        ({"node_id": 1, "cluster_id": None}, "cluster_id"),
        ({"node_id": 4, "cluster_id": CLUSTER_ID}, "node_id"),
        ({"node_id": 1, "cluster_id": CLUSTER_ID, "secured": True}, "secured"),
    ],
)
def test_spread_cluster_refuses_what_cannot_form_a_quorum(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    """Bad hosts, a missing port or cluster id, or an unknown node are refused, named."""
    args: dict[str, object] = {"nodes": 3, "hosts": HOSTS, "port": 9092, "workdir": tmp_path}
    args.update(kwargs)
    with pytest.raises(LocalKafkaError, match=message):
        LocalKafka(**args)  # type: ignore[arg-type]

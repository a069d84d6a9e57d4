"""The relay's fences against a real broker: a successor's takeover shuts the old owner out.

The relay always fences this way; this checks the mechanism itself on
whichever broker the tests run against: after a successor's ``init_transactions`` for the same
partitions, the old owner's next transaction fails, it reports those partitions lost, and none
of its records lands; a partition nobody took over goes on as before.
"""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Producer

from pricing_ha.dedupe.fences import Fences
from pricing_ha.local.cluster import read_topic


def test_a_successors_fence_rejects_the_old_owners_writes(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Callable[[str], str]
) -> None:
    topic = topic_factory(3)
    prefix = unique_name("relay-fences")
    lost: list[int] = []

    def fences(on_lost: Callable[[int], None]) -> Fences:
        return Fences(
            {"bootstrap.servers": bootstrap},
            id_prefix=prefix,
            client_prefix="test-fences",
            make=Producer,
            on_lost=on_lost,
            workers=3,
        )

    old, new = fences(lost.append), fences(lambda p: None)
    try:
        assert old.fence([0, 1, 2], 10) == {0, 1, 2}
        for p in (0, 1, 2):
            producer = old.begin(p)
            assert producer is not None
            producer.produce(topic, b"before", partition=p)
        assert old.commit_open() == set()

        assert new.fence([0, 1], 10) == {0, 1}
        for p in (0, 1, 2):
            producer = old.begin(p)
            assert producer is not None  # it does not know yet
            producer.produce(topic, b"zombie", partition=p)
        assert old.commit_open() == {0, 1}
        assert sorted(lost) == [0, 1]
        assert old.begin(0) is None  # its producer for 0 is gone: only a new takeover may emit
        assert old.problem is not None
        for p in (0, 1):
            producer = new.begin(p)
            assert producer is not None
            producer.produce(topic, b"successor", partition=p)
        assert new.commit_open() == set()
    finally:
        old.close()
        new.close()

    landed = {(r.partition, r.value) for r in read_topic(bootstrap, topic, 3)}
    assert landed == {
        (0, b"before"),
        (1, b"before"),
        (2, b"before"),
        (2, b"zombie"),  # partition 2 was not taken over: its owner goes on
        (0, b"successor"),
        (1, b"successor"),
    }

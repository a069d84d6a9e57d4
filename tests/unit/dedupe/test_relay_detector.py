"""The takeover detector's decisions (pure: heartbeats as received, the tail's last records)."""

from __future__ import annotations

import pytest

from neli.wire import Heartbeat
from pricing_ha.config import RelayConfig
from pricing_ha.dedupe.detector import Detector, successor
from pricing_ha.dedupe.liveness import Liveness
from pricing_ha.errors import ConfigError

G = "pricing.relay"
D = 0.35


def hb(member: str, led: tuple[int, ...] = (), group: str = G) -> Heartbeat:
    return Heartbeat(
        group=group,
        member_id=member,
        member_name=member,
        incarnation=1,
        counter=1,
        sent_mono=0.0,
        sent_wall=0.0,
        led=led,
    )


class World:
    """Two members' heartbeats every 0.1 s; the tail's last record per partition by hand."""

    def __init__(self, me: str = "r2") -> None:
        self.liveness = Liveness(G, me, D)
        self.last = {0: 0.0, 1: 0.0}
        self.recovering = False
        self.detector = Detector(
            D,
            self.liveness,
            last_record=lambda p: self.last[p],
            caught_up=lambda p: True,
            recovering=lambda: self.recovering,
            started=0.0,
        )

    def beat(self, t0: float, t1: float, members: dict[str, tuple[int, ...]]) -> None:
        t = t0
        while t <= t1 + 1e-9:
            for member, led in members.items():
                self.liveness.observe(hb(member, led), t)
            t += 0.1


def test_rendezvous_successor_is_order_free_and_moves_only_the_removed_members() -> None:
    """Every member computes the same successor; removing one moves only its partitions."""
    members = ["r1/a", "r2/b", "r3/c", "r4/d"]
    first = {p: successor(p, members) for p in range(64)}
    assert first == {p: successor(p, list(reversed(members))) for p in range(64)}
    assert len(set(first.values())) == 4  # spread over every member
    without = {p: successor(p, [m for m in members if m != "r3/c"]) for p in range(64)}
    assert {p for p in range(64) if first[p] != without[p]} == {
        p for p in range(64) if first[p] == "r3/c"
    }
    assert successor(0, []) is None


def test_a_crashed_owners_partition_is_taken_by_its_successor_only_after_d() -> None:
    """Owner r1 stops (heartbeats and output): after D, exactly the successor acts."""
    worlds = {me: World(me) for me in ("r2", "r3")}
    for w in worlds.values():
        w.beat(0.0, 2.0, {"r1": (0, 1), "r2": (), "r3": ()})
        w.last = {0: 2.0, 1: 2.0}
        w.beat(2.1, 2.3, {"r2": (), "r3": ()})  # r1 is gone
        assert w.detector.take_over([0, 1], 2.3) == []  # quiet 0.3 s < D
    taken = {me: w.detector.take_over([0, 1], 2.4) for me, w in worlds.items()}
    for p in (0, 1):
        assert [me for me, parts in taken.items() if p in parts] == [successor(p, ["r2", "r3"])]


def test_a_live_owners_idle_partition_is_not_suspected_while_its_heartbeats_claim_it() -> None:
    """No output for long, but heartbeats of r1 claiming the partition: never suspected."""
    w = World()
    w.beat(0.0, 5.0, {"r1": (0, 1), "r2": ()})
    assert w.detector.take_over([0, 1], 5.0) == []


def test_records_on_the_partition_keep_it_alive_without_any_claim() -> None:
    """Claimed by nobody: the partition with recent output is kept; the silent one is taken once."""
    taken = {}
    for me in ("r1", "r2"):
        w = World(me)
        w.beat(0.0, 5.0, {"r1": (), "r2": ()})
        w.last = {0: 4.9, 1: 4.5}
        assert w.detector.quiet_for(0, 5.0) == pytest.approx(5.0 - 4.9)
        taken[me] = w.detector.take_over([0, 1], 5.0)
    assert sorted(taken.values()) == [[], [1]]  # partition 0 by nobody, 1 by its successor only
    assert taken[successor(1, ["r1", "r2"]) or ""] == [1]


def test_a_member_whose_own_heartbeats_stopped_suspects_nobody() -> None:
    """Cut off (its own heartbeats no longer come back): everybody looks silent; it waits."""
    w = World("r2")
    w.beat(0.0, 2.0, {"r1": (0, 1), "r2": ()})
    assert w.detector.quiet_for(0, 3.0) is None
    assert w.detector.take_over([0, 1], 3.0) == []


def test_silence_counts_only_from_when_the_own_view_came_back() -> None:
    """After a gap in its own heartbeats, a member waits D of good view before suspecting."""
    w = World("r2")
    w.beat(0.0, 1.0, {"r1": (0, 1), "r2": ()})
    w.beat(3.0, 3.2, {"r2": ()})  # back after 2 s; r1 silent since 1.0
    assert w.detector.quiet_for(0, 3.2) is not None
    assert w.detector.take_over([0], 3.2) == []  # good view for 0.2 s only
    w.beat(3.3, 3.5, {"r2": ()})
    assert w.detector.quiet_for(0, 3.5) > D  # type: ignore[operator]


def test_a_member_in_its_stall_guard_suspects_nobody() -> None:
    """NELI's stall guard (recovering after a pause) holds detection off."""
    w = World("r2")
    w.beat(0.0, 2.0, {"r2": ()})
    w.recovering = True
    assert w.detector.take_over([0, 1], 2.0) == []
    w.recovering = False
    assert w.detector.take_over([0, 1], 2.0) == [0, 1]  # the only live member


def test_heartbeats_of_other_groups_count_for_nothing() -> None:
    """A publishing group's heartbeats neither make members live nor claim partitions."""
    live = Liveness(G, "r2", D)
    live.observe(hb("p1/x", (0,), group="pricing.p1"), 1.0)
    assert live.live(D, 1.0) == []
    assert live.claimed_at(0) == float("-inf")


def test_the_threshold_is_at_least_two_pulses_and_defaults_to_them() -> None:
    """D below two heartbeat pulses is refused, naming the key; unset, it follows the pulse."""
    with pytest.raises(ConfigError) as info:
        RelayConfig(pulse_interval_ms=150, takeover_after_ms=200)
    assert info.value.key == "takeover_after_ms"
    assert RelayConfig().takeover_after_s == 0.35
    assert (
        RelayConfig(
            threshold_ms=1600, session_timeout_ms=2000, pulse_interval_ms=300
        ).takeover_after_s
        == 0.6
    )
    assert RelayConfig(takeover_after_ms=0).takeover_after_s == 0

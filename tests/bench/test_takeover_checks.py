"""What the relay takeover benchmark judges from prices: zombie records, takeovers, seq defects,
config."""

from __future__ import annotations

from pathlib import Path

import orjson

from bench.relay_failover.checks import relay_section, takeovers_in, zombie_records
from pricing_ha.config import AppConfig, RelayConfig, load_config
from pricing_ha.local.cluster import Record
from pricing_ha.local.tails import locate_defects, seq_defects


def _price(partition: int, offset: int, instrument: str, seq: int, epoch: int = 0) -> Record:
    value = orjson.dumps({"instrument": instrument, "seq": seq, "epoch": epoch})
    headers = {"seq": str(seq), "relay": "r1"}
    return Record(partition, offset, instrument.encode(), value, headers, 1000 + offset)


def test_a_stopped_relays_record_after_its_successors_first_is_a_zombie() -> None:
    """r1's records after r2's first price (produced after the stop) count; those before not."""
    recs = [(10, 900, "r1"), (11, 950, "r1"), (12, 1500, "r2"), (13, 1510, "r1"), (14, 1520, "r1")]
    assert zombie_records(recs, [], "r1", stop_ms=1000) == 2


def test_no_other_relay_after_the_stop_means_no_zombie() -> None:
    """A stopped relay that resumed with nobody else emitting meanwhile wrote no zombie record."""
    recs = [(10, 900, "r2"), (11, 950, "r1"), (12, 3100, "r1"), (13, 3200, "r1")]
    assert zombie_records(recs, [], "r1", stop_ms=1000) == 0


def test_the_stopped_relays_records_in_a_new_term_of_its_own_are_not_zombies() -> None:
    """After its own takeover marker above the successor's first price, r1 owns again."""
    recs = [(12, 1500, "r2"), (13, 1510, "r1"), (15, 4000, "r1"), (16, 4100, "r1")]
    controls = [(11, 1490, "r2", "takeover"), (14, 3990, "r1", "takeover")]
    assert zombie_records(recs, controls, "r1", stop_ms=1000) == 1


def test_takeovers_in_a_window_are_the_takeover_markers_produced_in_it() -> None:
    """Only takeover markers count, and only those produced inside the window."""
    controls = [
        (1, 500, "r1", "takeover"),
        (2, 1500, "r2", "takeover"),
        (3, 1600, "r2", "checkpoint"),
        (4, 1700, "r1", "handover"),
        (5, 2500, "r1", "takeover"),
    ]
    assert takeovers_in(controls, 1000, 2000) == [(2, 1500, "r2", "takeover")]


def test_seq_defects_count_duplicates_reorderings_and_gaps_from_the_topic() -> None:
    """A repeated seq, a seq below a higher one and a seq never seen are each counted."""
    prices = [
        _price(0, 0, "A", 1),
        _price(0, 1, "A", 2),
        _price(0, 2, "A", 2),  # duplicate
        _price(0, 3, "A", 5),  # 3 and 4 absent...
        _price(0, 4, "A", 4),  # ...4 arrives late: out of order; 3 stays a gap
        _price(1, 0, "B", 1),
        _price(1, 1, "B", 1, epoch=1),  # a restarted feed: a new epoch, not a duplicate
    ]
    assert seq_defects(prices) == {"instruments": 2, "duplicates": 1, "out_of_order": 1, "gaps": 1}


def test_seq_defects_of_a_clean_topic_are_zero() -> None:
    """Every seq once and in order: nothing counted."""
    prices = [_price(p, o, f"I{p}", o + 1) for p in range(2) for o in range(5)]
    assert seq_defects(prices) == {"instruments": 2, "duplicates": 0, "out_of_order": 0, "gaps": 0}


def test_the_relay_section_configures_the_relays_as_given(tmp_path: Path) -> None:
    """The section, loaded as a config file, yields exactly the relay config it was made from."""
    relay = RelayConfig(
        session_timeout_ms=6000, threshold_ms=600, pulse_interval_ms=150, takeover_after_ms=500
    )
    path = tmp_path / "c.toml"
    path.write_text(relay_section(relay))
    assert load_config(path, env={}).relay == relay
    assert relay != AppConfig().relay  # the section changed something


def test_locate_defects_says_where_a_seq_was_skipped() -> None:
    """A skip of seqs 3 and 4 is located at the record after it, with how many were skipped."""
    prices = [_price(0, 0, "A", 1), _price(0, 1, "A", 2), _price(0, 2, "A", 5)]
    found = locate_defects(prices)["first"]
    assert [(d["kind"], d["seq"], d["skipped"], d["record"]["offset"]) for d in found] == [
        ("gap", 5, 2, 2)
    ]


def test_the_relay_section_leaves_an_unset_threshold_to_the_relays_default(tmp_path: Path) -> None:
    """A config whose D is unset loads back unset (the relay then applies its own default)."""
    relay = RelayConfig(session_timeout_ms=6000)
    path = tmp_path / "c.toml"
    path.write_text(relay_section(relay))
    assert load_config(path, env={}).relay == relay

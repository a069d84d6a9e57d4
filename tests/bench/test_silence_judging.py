"""The publish-silence benchmark's reading of a run: first publications and the gaps between."""

from __future__ import annotations

from bench.publishing.silence_judging import first_publications, gaps_between, worst_per_instrument
from pricing_ha.local.cluster import Record


def _rec(instrument: str, seq: int, group: str, publish_ns: int) -> Record:
    headers = {"seq": str(seq), "group": group, "publish_ns": str(publish_ns)}
    return Record(0, 0, instrument.encode(), b"{}", headers, publish_ns // 1_000_000)


def test_the_union_keeps_each_seqs_earliest_publication_and_a_group_only_its_own() -> None:
    """Two groups publishing the same seq: the union holds the earlier time, a group its own."""
    records = [_rec("EURUSD", 1, "p1", 2_000), _rec("EURUSD", 1, "p2", 1_000)]
    assert first_publications(records) == {("EURUSD", 1): 1_000}
    assert first_publications(records, "p1") == {("EURUSD", 1): 2_000}


def test_a_gap_counts_only_when_the_next_seq_lands_inside_the_window() -> None:
    """Gaps are seconds to seq + 1's first publication, for seq + 1 within [lo, hi] only."""
    first = {("A", 1): 0, ("A", 2): 2_000_000_000, ("A", 3): 2_500_000_000, ("B", 1): 0}
    gaps = gaps_between(first, 1e9, 3e9)
    assert gaps == {("A", 1): 2.0, ("A", 2): 0.5}
    assert worst_per_instrument(gaps) == {"A": 2.0}
    assert gaps_between(first, 2.1e9, 3e9) == {("A", 2): 0.5}

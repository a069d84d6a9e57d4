"""The publisher's sequence check: its fast path decides exactly as the general one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pricing_ha.publishing.epochs import position
from pricing_ha.publishing.quotes import SeqCheck, SequenceGuard

NOW_MS = 1_000_000
QUOTES = st.lists(
    st.tuples(
        st.sampled_from(["A", "B", "C"]),
        st.sampled_from([0, 5, NOW_MS, NOW_MS + 50, NOW_MS + 500]),  # the last beyond the skew
        st.integers(min_value=1, max_value=30),
    ),
    max_size=60,
)


def _guard() -> SequenceGuard:
    return SequenceGuard(2, max_seq_jump=5, max_epoch_skew_ms=100, clock_ms=lambda: NOW_MS)


def _general(guard: SequenceGuard, instrument: str, seq: int, epoch: int) -> SeqCheck:
    last = guard._last.pop(instrument, None)
    return guard._check_slowly(instrument, seq, epoch, position(epoch, seq), last)


@given(quotes=QUOTES)
def test_fast_and_general_checks_agree(quotes: list[tuple[str, int, int]]) -> None:
    """Same verdicts, gaps, evictions and remembered order over any sequence of quotes."""
    fast, general = _guard(), _guard()
    for instrument, epoch, seq in quotes:
        assert fast.check(instrument, seq, epoch) == _general(general, instrument, seq, epoch)
        assert list(fast._last.items()) == list(general._last.items())
        assert fast._jumped == general._jumped
    assert (fast.gaps, fast.evicted) == (general.gaps, general.evicted)


def test_a_contiguous_quote_is_accepted_without_a_gap() -> None:
    """The next seq of the same epoch is accepted with gap 0; a step of 3 reports gap 2."""
    guard = _guard()
    assert guard.check("A", 1, 5).ok
    assert guard.check("A", 2, 5) == SeqCheck(None, 0)
    assert guard.check("A", 5, 5) == SeqCheck(None, 2)
    assert not guard.check("A", 5, 5).ok
    assert guard.gaps == 2

"""The one polling helper shared by the demo, the tests and the benchmarks
(``pricing_ha.local.waiting``): bounded, raising for tests, a bool for benchmarks."""

from __future__ import annotations

import itertools

import pytest

from pricing_ha.local.waiting import wait_for, wait_for_async, wait_until


def test_wait_for_returns_once_the_predicate_holds() -> None:
    """A predicate that turns true on its third call ends the wait without an error."""
    calls = itertools.count(1)
    assert wait_for(lambda: next(calls) >= 3, 5, "the third call", interval_s=0) > 0


def test_wait_for_names_what_it_waited_for_on_timeout() -> None:
    """A predicate that never holds fails with an AssertionError naming the wait."""
    with pytest.raises(AssertionError, match=r"timed out after 0\.0 s waiting for nothing"):
        wait_for(lambda: False, 0.01, "nothing", interval_s=0)


def test_wait_for_builds_a_costly_description_only_on_timeout() -> None:
    """A callable ``what`` is called once, when the wait fails, not while polling."""
    described: list[int] = []

    def what() -> str:
        described.append(1)
        return "a diagnosis"

    wait_for(lambda: True, 1, what)
    assert described == []
    with pytest.raises(AssertionError, match="a diagnosis"):
        wait_for(lambda: False, 0.01, what, interval_s=0)
    assert described == [1]


async def test_wait_for_async_fails_like_wait_for() -> None:
    """The asyncio variant raises the same timeout error."""
    with pytest.raises(AssertionError, match="waiting for the loop"):
        await wait_for_async(lambda: False, 0.01, "the loop", interval_s=0)


def test_wait_until_answers_a_bool_instead_of_raising() -> None:
    """The benchmarks' variant returns False on timeout and True once the condition holds."""
    assert wait_until(lambda: False, 0.01, poll_s=0) is False
    calls = itertools.count(1)
    assert wait_until(lambda: next(calls) >= 2, 5, poll_s=0) is True

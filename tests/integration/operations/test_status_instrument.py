"""``pricing-ha status --instrument``: its answer against each member's own ``is_leader``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from typer.testing import CliRunner

from neli import Mode, Neli, NeliConfig, Variant
from pricing_ha.cli import app
from pricing_ha.config import AppConfig, BrokerConfig, TopicsConfig
from pricing_ha.local.waiting import wait_for_async
from pricing_ha.status import InstrumentStatus, read_instrument_owners
from tests.integration.neli_harness import SESSION_MS

M = 4
SYMBOLS = ("EURUSD", "GBPUSD", "SYM007")


async def test_owners_match_each_members_is_leader(
    bootstrap: str, topic_factory: Callable[..., str], unique_name: Any
) -> None:
    """Per group the answer names the member whose is_leader(SYM) holds, also after a fail-over."""
    topic = topic_factory(M)
    groups = {name: unique_name(f"pricing.{name}") for name in ("p1", "p2", "relay")}

    def member(group: str, name: str) -> Neli:
        exclusive = group == "relay"  # as deployed: publishers full non-exclusive, relay fast
        return Neli(
            NeliConfig(
                bootstrap_servers=bootstrap,
                group_id=groups[group],
                topic=topic,
                member_name=f"{group}/{name}",
                session_timeout_ms=SESSION_MS,
                variant=Variant.FAST if exclusive else Variant.FULL,
                mode=Mode.EXCLUSIVE if exclusive else Mode.NON_EXCLUSIVE,
            )
        )

    members = {g: [member(g, "a"), member(g, "b")] for g in ("p1", "relay")}
    members["p2"] = [member("p2", "a")]
    cfg = AppConfig(
        broker=BrokerConfig(bootstrap_servers=bootstrap),
        topics=TopicsConfig(neli=topic, partitions=M),
    )
    answers: dict[str, InstrumentStatus] = {}

    async def agrees() -> bool:
        """Read once per symbol; compare with every member's is_leader right after."""
        for symbol in SYMBOLS:
            status = await asyncio.to_thread(
                read_instrument_owners, cfg, symbol, list(groups.values()), 1.0
            )
            answers[symbol] = status
            named = {g.group: {o.member_id for o in g.owners} for g in status.groups}
            for group, ms in members.items():
                leading = {m.member_id for m in ms if m.is_leader(symbol)}
                if len(leading) != 1 or named.get(groups[group]) != leading:
                    return False
        return True

    async def settle(what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 90
        while not await agrees():
            assert loop.time() < deadline, f"{what}: {answers}"
            await asyncio.sleep(0.5)

    everyone = [m for ms in members.values() for m in ms]
    try:
        for m in everyone:
            await m.start()
        await wait_for_async(
            lambda: all(any(m.led_partitions() for m in ms) for ms in members.values()),
            60,
            "every group has a leader",
        )
        await settle("the answer matches every member's is_leader")
        for symbol, status in answers.items():
            for g in status.groups:
                (owner,) = g.owners
                assert g.stale_by_s is not None
                assert 0 <= owner.age_s <= status.max_age_s
                assert g.stale_by_s == round(owner.age_s + status.clock_skew_s, 3), symbol

        # Fail-over: the relay member owning EURUSD leaves; the answer follows its successor.
        (leaving,) = [m for m in members["relay"] if m.is_leader("EURUSD")]
        closed_at = time.time()
        await leaving.close()
        members["relay"].remove(leaving)
        await settle("the answer follows the relay fail-over")
        relay = next(g for g in answers["EURUSD"].groups if g.group == groups["relay"])
        assert [o.member_id for o in relay.owners] == [members["relay"][0].member_id]
        # Its run is new (exact, or from the read's start when that came later): never older.
        assert relay.owners[0].since_wall >= closed_at - answers["EURUSD"].clock_skew_s

        # The command line: the same owners, read by a separate client.
        env = {"PRICING_HA__TOPICS__NELI": topic, "PRICING_HA__TOPICS__PARTITIONS": str(M)}
        args = ["status", "--bootstrap", bootstrap, "--instrument", "EURUSD", "--json"]
        result = await asyncio.to_thread(CliRunner().invoke, app, args, env=env)
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        printed = {g["group"]: {o["member_id"] for o in g["owners"]} for g in doc["groups"]}
        for group, ms in members.items():
            assert printed[groups[group]] == {m.member_id for m in ms if m.is_leader("EURUSD")}
        assert {"pricing.p1", "pricing.p2", "pricing.relay"} <= set(printed)
    finally:
        for m in everyone:
            await m.close()

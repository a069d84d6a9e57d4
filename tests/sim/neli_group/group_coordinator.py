"""The group coordinator of the group simulation (Kafka's classic group protocol), and the
messages between it and the members.

The coordinator keeps true time and no clock of its own. It expires a member after S without a
group heartbeat, answers heartbeats (flagging a rebalance in progress), joins, rejoins and clean
leaves, and completes a rebalance once every member has rejoined: eagerly (every partition
assigned round-robin, after every member revoked everything) or in two cooperative rounds
(round one withholds the partitions that change owner; their old owners revoke them and rejoin;
round two assigns them). A stalled coordinator answers nobody and expires nobody (resuming, it
reads what was queued first, or with ``Scenario.stall_expires_first`` expires first); a cut
coordinator link delays messages until it heals (TCP), it does not drop them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.sim.neli_group.groupsim import Simulation


@dataclass(order=True)
class Message:
    """A message in flight to the coordinator (``kind`` starting with ``c:``) or from it to a
    member, ordered by arrival time (then by when it was sent)."""

    at: int
    seq: int
    kind: str = field(compare=False)
    member_id: str = field(compare=False)
    data: object = field(compare=False, default=None)


class Coordinator:
    """The group coordinator of the classic protocol (true time; no clock of its own)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.inbox: list[Message] = []
        self.members: dict[str, int] = {}  # member id -> last heartbeat (true ms)
        self.owner: dict[int, str] = {}
        self.rebalancing = False
        self.joined: set[str] = set()
        self.epochs: dict[str, int] = {}  # the member's (re)join count its assignment answers
        self.resumed = True  # False while stalled, until the first step after the stall

    def step(self) -> None:
        sim = self.sim
        now, sc = sim.now, sim.scenario
        if now < sim.stalled_until:
            self.resumed = False
            return  # stalled: requests wait, no reply, no session expiry
        if not self.resumed:
            self.resumed = True
            if sc.stall_expires_first:
                self._expire(now)
        # A cut link delays messages until it heals (TCP retransmits), it does not drop them.
        kept: list[Message] = []
        while self.inbox and self.inbox[0].at <= now:
            msg = self.inbox.pop(0)
            slot = int(msg.member_id[1 : msg.member_id.index("/")])
            if sim.is_cut("cut_coord", slot):
                kept.append(msg)
            else:
                self._handle(msg, slot)
        self.inbox[:0] = kept
        self._expire(now)
        if self.rebalancing and self.joined >= set(self.members):
            self._complete()

    def _expire(self, now: int) -> None:
        for mid, last in list(self.members.items()):
            if now - last >= self.sim.scenario.session_ms:
                self._remove(mid)

    def _reply(self, _slot: int, kind: str, member_id: str, data: object = None) -> None:
        self.sim.send(kind, member_id, data)

    def _handle(self, msg: Message, slot: int) -> None:
        mid, now = msg.member_id, self.sim.now
        if msg.kind == "c:hb":
            if mid not in self.members:
                self._reply(slot, "unknown", mid, msg.data)
                return
            self.members[mid] = now
            self._reply(slot, "hb_ok", mid, self.rebalancing and mid not in self.joined)
        elif msg.kind == "c:rejoin" and mid not in self.members:
            self._reply(slot, "unknown", mid, msg.data[0])  # type: ignore[index]
        elif msg.kind in ("c:join", "c:rejoin"):
            self.epochs[mid] = msg.data[0]  # type: ignore[index]
            new = mid not in self.members
            self.members[mid] = now
            if new or not self.rebalancing:
                self._rebalance()
            self.joined.add(mid)
        elif msg.kind == "c:leave" and mid in self.members:
            self._remove(mid)

    def _remove(self, mid: str) -> None:
        del self.members[mid]
        self.joined.discard(mid)
        for p in [p for p, o in self.owner.items() if o == mid]:
            del self.owner[p]
        self._rebalance()

    def _rebalance(self) -> None:
        if not self.rebalancing:
            self.rebalancing = True
            self.joined = set()

    def _complete(self) -> None:
        sc = self.sim.scenario
        self.rebalancing = False
        members = sorted(self.members)
        if not members:
            self.owner.clear()
            return
        if not sc.cooperative:  # eager round-robin: everything was revoked
            self.owner = {p: members[p % len(members)] for p in range(sc.partitions)}
        else:  # cooperative-sticky: keep what stays, withhold what moves (round one)
            quota = {m: sc.partitions // len(members) for m in members}
            for m in members[: sc.partitions % len(members)]:
                quota[m] += 1
            keep: dict[int, str] = {}
            count = dict.fromkeys(members, 0)
            for p in sorted(self.owner):
                m = self.owner[p]
                if m in count and count[m] < quota[m]:
                    keep[p] = m
                    count[m] += 1
            moving = [p for p in self.owner if p not in keep]
            free = [p for p in range(sc.partitions) if p not in self.owner]
            for p in free:
                m = min(members, key=lambda x: (count[x] - quota[x], x))
                keep[p] = m
                count[m] += 1
            self.owner = keep
            if moving:
                self._rebalance()  # their old owners revoke and rejoin: round two
        for m in members:
            slot = int(m[1 : m.index("/")])
            mine = {p for p, o in self.owner.items() if o == m}
            self._reply(slot, "assign", m, (self.epochs.get(m, 0), mine))

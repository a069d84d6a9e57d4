"""The faults ``pricing-ha demo --nodes 3`` adds: a broker's SIGKILL, and the loss of AZ a.

**Where things stand.** The three nodes stand in racks (AZs) a, b and c. P1's members are AZ
a's, P2's are AZ b's (as in the one-node demo's view, ``P1/a`` and ``P2/b``); relay r1 stands in
AZ a and r2 in AZ b, and a relay started to replace a killed one (r3) stands where the killed
one stood. AZ c holds broker 3 alone (the feed and the verifying subscriber are outside the
fault domain, as the observer must be).

**The broker SIGKILL** hits the broker leading the most partitions of ``prices`` at that
moment (:func:`~pricing_ha.local.broker_faults.busiest_leader`), as a crash: its log directory
stays, and it is started again later with its data (it catches up and rejoins the ISR).

**The AZ a outage** freezes broker 1 and every live AZ a member (P1's and the relay in AZ a)
at once with SIGSTOP, and lets them all continue (SIGCONT) when the AZ comes back. Without root
there is no network namespace to cut, and SIGSTOP is the nearest thing to a cut that a process
can do to another: the frozen processes' TCP connections stay open and go silent, so their
peers see what a partition looks like (requests hang until their own timeouts, sessions
expire, the controller fences the silent broker), and when the AZ heals its members come back
with their old state, believing they still lead: the zombies that fencing must stop. A SIGKILL
would instead close every socket at once (peers learn at once, a much kinder fault) and bring
the members back as new processes, which tests no fencing at all.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from pricing_ha.errors import LocalKafkaError
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.broker_faults import busiest_leader, partition_leaders
from pricing_ha.local.procs import Proc, freeze

__all__ = ["AZ_A_BROKER", "BrokerFaults", "Zones"]

#: The node of AZ a (rack ``a``).
AZ_A_BROKER = 1
_FALLBACK_BROKER = 2  # killed when the cluster cannot say who leads prices


@dataclass
class Zones:
    """Which AZ each member of the demo stands in (see the module docstring)."""

    of: dict[str, str] = field(default_factory=lambda: {"relay-r1": "a", "relay-r2": "b"})

    def zone(self, name: str) -> str | None:
        """The AZ of member ``name`` (``p1-*``: a, ``p2-*``: b), or ``None`` if it has none."""
        if name in self.of:
            return self.of[name]
        return {"p1": "a", "p2": "b"}.get(name.split("-", 1)[0])

    def replaced(self, new: str, old: str) -> None:
        """``new`` stands in the AZ ``old`` stood in."""
        zone = self.zone(old)
        if zone is not None:
            self.of[new] = zone


class BrokerFaults:
    """The demo's broker and AZ faults on a three-node :class:`LocalKafka`.

    Args:
        kafka: the cluster (three nodes, started).
        prices_topic: the topic whose partition leaders pick the broker to kill.
        members: the demo's processes by name (looked up when a fault strikes).
        zones: where each member stands.
        fault: the demo's ``fault(text, opens=..., closes=...)``: notes a fault on its timeline.
    """

    def __init__(
        self,
        kafka: LocalKafka,
        prices_topic: str,
        members: dict[str, Proc],
        zones: Zones,
        fault: Callable[..., None],
    ) -> None:
        """Hold what the faults act on (nothing happens until one is called)."""
        self.kafka = kafka
        self.prices_topic = prices_topic
        self.members = members
        self.zones = zones
        self._fault = fault
        self._admin_client: AdminClient | None = None
        self._killed: int | None = None
        self._frozen: list[Proc] = []

    @property
    def _admin(self) -> AdminClient:
        """An admin client of the cluster, made on first use (it connects at once)."""
        if self._admin_client is None:
            self._admin_client = AdminClient(
                {"bootstrap.servers": self.kafka.bootstrap, "log_level": 0}
            )
        return self._admin_client

    def kill_busiest(self) -> None:
        """SIGKILL the broker leading the most partitions of ``prices`` (a lasting fault)."""
        try:
            leaders = partition_leaders(self._admin, self.prices_topic)
            node = busiest_leader(self._admin, self.prices_topic)
            led = sorted(p for p, n in leaders.items() if n == node)
            why = f"it led prices partition(s) {', '.join(map(str, led))} of {len(leaders)}"
        except (KafkaException, LocalKafkaError) as exc:
            # A demo on a struggling machine still injects its fault, and says it guessed.
            node, why = _FALLBACK_BROKER, f"prices' leaders unknown ({exc}): a guess"
        self.kafka.node(node).kill()
        self._killed = node
        self._fault(
            f"SIGKILL broker {node} (rack {self.kafka.node(node).rack}; {why})", opens="broker"
        )

    def restart_killed(self) -> None:
        """Start the killed broker again from its own log directory (returns at once)."""
        if self._killed is None:
            return
        self.kafka.node(self._killed).start()
        self._fault(
            f"broker {self._killed} restarted (with its data; it catches up)", closes="broker"
        )
        self._killed = None

    @property
    def frozen(self) -> list[str]:
        """The members the AZ a outage froze (empty when AZ a is up)."""
        return sorted(p.name for p in self._frozen)

    def lose_az_a(self) -> None:
        """Freeze broker 1 and AZ a's live members together (SIGSTOP), a lasting fault."""
        node = self.kafka.node(AZ_A_BROKER)
        procs = [
            p for name, p in self.members.items() if self.zones.zone(name) == "a" and p.alive()
        ]
        pids = [node.pid, *(p.pid for p in procs)]
        for pid in pids:  # every SIGSTOP queued first: the AZ goes at once
            os.kill(pid, signal.SIGSTOP)
        for pid in pids:
            freeze(pid)
        self._frozen = procs
        names = ", ".join(sorted(p.name for p in procs)) or "no member"
        self._fault(f"AZ a lost: SIGSTOP broker {AZ_A_BROKER} and {names}", opens="az-a")

    def heal_az_a(self) -> None:
        """Let AZ a's broker and members continue (SIGCONT)."""
        self.kafka.node(AZ_A_BROKER).resume()
        for p in self._frozen:
            p.resume()
        names = ", ".join(sorted(p.name for p in self._frozen)) or "no member"
        self._frozen = []
        self._fault(f"AZ a back: SIGCONT broker {AZ_A_BROKER} and {names}", closes="az-a")

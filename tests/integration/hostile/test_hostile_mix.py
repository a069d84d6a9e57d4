"""Issue 45's goal, judged from outside: a hostile mix at 1,000 records/s beside real traffic.

Processes: P1 and P2 (one publisher each), two relays, two subscribers (relay path and direct
A/B), the synthetic feed (8 instruments at 20 Hz), on fresh topics of the session broker. For
:data:`HOSTILE_S` seconds a producer in the test writes every class of
:mod:`tests.integration.hostile.hostile` to ``md.quotes``, ``prices.raw`` and the NELI topic. Then
fresh ``read_committed`` consumers judge, per class:

* no process exited (and, where its log says why, the class that made it exit fails too);
* every real quote's price (real: what the feed wrote to ``md.quotes``, read back) is on
  ``prices`` exactly once, in order per instrument; no price of seq 2^63-1 is there;
* every hostile record meets its class's fate (:data:`tests.integration.hostile.hostile.FATES`):
  found by its source partition and offset in the dead-letter topic of each role that consumes
  it, with a reason of at most 256 bytes; or, where the class allows it, on ``prices`` once with
  only the relay's own headers;
* NELI records (no dead-letter topic): every group's genuine members still lead every
  partition afterwards (from their heartbeats, decoded by the judge itself), and every role
  process counted refused NELI records (``pricing_ha.neli.heartbeats.rejected`` on /metrics).

``PRICING_HA_HOSTILE_S`` shortens the run and ``PRICING_HA_HOSTILE_CLASSES=k1,k2`` sends only
those classes, to see one class's effect on its own (diagnosis; CI runs the whole minute).

The longest silence per instrument on ``prices`` during the run is printed. All verdicts are
collected and reported per class before the test fails, so one run shows every class that fails.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from pricing_ha.local.cluster import PricingCluster
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.waiting import wait_for
from pricing_ha.member.health import read_health_file
from pricing_ha.publishing.publisher import neli_group_id
from tests.integration.hostile.hostile import ROLES, HostileMix, HostileRecord
from tests.integration.hostile.hostile_judge import (
    Rec,
    Run,
    Sent,
    genuine_leaders,
    judge,
    longest_silences,
    order_key,
    read_all,
)

pytestmark = [pytest.mark.timeout(330)]

HOSTILE_S = int(os.environ.get("PRICING_HA_HOSTILE_S", "60"))
"""How long the hostile mix runs (1,000 records a second); the issue asks for 60 s."""
#: Comma-separated classes to send on their own (diagnosis); empty: the whole mix.
ONLY = os.environ.get("PRICING_HA_HOSTILE_CLASSES", "")
PARTITIONS = 4
INSTRUMENTS = 8
RATE_HZ = 20.0
SETTLE_S = 40.0  # bound on waiting, after the run, for prices and dead letters to settle
LEAD_S = 20.0  # bound on waiting, after the run, for every group to lead every partition
SLICES = 10  # each second's records go out in this many slices

#: What a process's log says when a class made it exit (for the report and the class verdict).
#: (class, process-name prefix, pattern). A relay's record too large is its standby
#: checkpoint, grown by the name flood; a publisher's is the dead letter of an oversized quote.
EXIT_CAUSES = [
    ("neli.huge_numbers", "", r"OverflowError"),
    ("neli.deep_nesting", "", r"RecursionError"),
    ("quote.oversized", "p", r"MSG_SIZE_TOO_LARGE"),
    ("quote.flood", "relay", r"MSG_SIZE_TOO_LARGE"),
    ("raw.flood", "relay", r"MSG_SIZE_TOO_LARGE"),
    ("raw.publish_ns_superscript", "", r"invalid literal for int\(\).*'²"),
    ("raw.non_utf8_header", "", r"UnicodeDecodeError"),
]


class Sender:
    """Produces hostile records and remembers where the broker put each."""

    def __init__(self, bootstrap: str, topics: dict[str, str]) -> None:
        """A producer for this cluster's topics."""
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
        )
        self.topics = topics
        self.sent: list[Sent] = []
        self.errors: list[str] = []

    def finish(self) -> None:
        """Wait for every acknowledgement, then let the producer go (before the broker does)."""
        assert self.producer.flush(30) == 0, "hostile records not acknowledged"
        del self.producer

    def send(self, rec: HostileRecord) -> None:
        """Queue one record (explicit partition, as the default partitioner would choose)."""

        def done(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self.errors.append(f"{rec.kind}: {err}")
                return
            name = rec.key.decode(errors="replace") if rec.key is not None else None
            self.sent.append(Sent(rec.kind, rec.role, rec.partition, msg.offset() or 0, name))

        while True:
            try:
                self.producer.produce(
                    self.topics[rec.role],
                    key=rec.key,
                    value=rec.value,
                    partition=rec.partition,
                    headers=list(rec.headers),
                    on_delivery=done,
                )
            except BufferError:  # the local queue is full: serve acknowledgements first
                self.producer.poll(0.05)
            else:
                return


#: A background job of a process that failed while the process lives on (it prices no more).
WORKER_FAILED = re.compile(r"ERROR \S+ (\S+) failed$", re.MULTILINE)


class Watch:
    """Notes every role process that exits, or whose worker fails, and which class its log names.

    ``exits`` maps a process name to ``exited <code> at +<s> s, causes k1,k2`` or
    ``worker <name> failed at +<s> s, causes ...`` (see :func:`hostile_judge.judge`).
    """

    def __init__(self, c: PricingCluster, names: list[str]) -> None:
        """Watch ``names`` of ``c.members``."""
        self.c, self.names, self.t0 = c, names, time.monotonic()
        self.exits: dict[str, str] = {}

    def __call__(self, *, logs: bool = True) -> None:
        """Look once (``logs``: read the logs too, for failed workers)."""
        for name in self.names:
            proc = self.c.members[name]
            if name in self.exits:
                continue
            when = time.monotonic() - self.t0
            if not proc.alive():
                causes = ",".join(_causes(name, _log(proc)))
                self.exits[name] = (
                    f"exited {proc.popen.returncode} at +{when:.0f} s, causes {causes}"
                )
            elif logs and (failed := WORKER_FAILED.search(text := _log(proc))):
                causes = ",".join(_causes(name, text))
                self.exits[name] = f"worker {failed[1]} failed at +{when:.0f} s, causes {causes}"


def _log(proc: Proc) -> str:
    return proc.log_path.read_text(errors="replace") if proc.log_path.exists() else ""


def _causes(name: str, log: str) -> list[str]:
    return [
        k for k, who, pattern in EXIT_CAUSES if name.startswith(who) and re.search(pattern, log)
    ]


Real = dict[str, list[tuple[int, int]]]


def _real_quotes(c: PricingCluster, hostile: set[tuple[int, int]]) -> Real:
    """Per instrument, the (epoch, seq) of every quote the feed wrote, in order."""
    out: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for r in read_all(c.bootstrap, c.topics["quotes"], c.partitions, timeout_s=60):
        got = order_key(r.value)
        if (r.partition, r.offset) not in hostile and got is not None:
            out[got[0]].add(got[1])
    return {k: sorted(v) for k, v in out.items()}


def _read(c: PricingCluster, sender: Sender, real: Real, watch: Watch, led: str | None) -> Run:
    def topic(role: str) -> list[Rec]:
        return read_all(c.bootstrap, c.topics[role], c.partitions)

    groups = frozenset({c.group("p1"), c.group("p2")})
    prices, dlq, raw_dlq = topic("prices"), topic("dlq"), topic("raw_dlq")
    return Run(sender.sent, real, prices, dlq, raw_dlq, groups, dict(watch.exits), led)


def _mix_for(c: PricingCluster) -> HostileMix:
    """A mix keyed by the feed's symbols and in its format (epoch or not), once it is feeding."""
    first: dict[str, bytes] = {}

    def feeding() -> bool:
        for r in read_all(c.bootstrap, c.topics["quotes"], c.partitions, 5):
            if (got := order_key(r.value)) is not None:
                first.setdefault(got[0], r.value or b"")
        return len(first) == INSTRUMENTS

    wait_for(feeding, 30, lambda: f"the feed's {INSTRUMENTS} instruments on md.quotes")
    sample = next(iter(first.values()))
    got = order_key(sample)
    assert got is not None
    return HostileMix(
        PARTITIONS,
        sorted(first),
        {g: neli_group_id(c.group(g)) for g in ("p1", "p2", "relay")},
        epoch=got[1][0] if b'"epoch"' in sample else None,
        only=frozenset(ONLY.split(",")) if ONLY else None,
    )


def _send(mix: HostileMix, sender: Sender, watch: Watch) -> None:
    """:data:`HOSTILE_S` seconds of the mix, each second in :data:`SLICES` paced slices."""
    t0 = time.monotonic()
    for i in range(HOSTILE_S):
        records = mix.second(i, HOSTILE_S)
        for j in range(SLICES):
            for rec in records[j::SLICES]:
                sender.send(rec)
            sender.producer.poll(0)
            watch(logs=j == 0)
            time.sleep(max(0.0, t0 + i + (j + 1) / SLICES - time.monotonic()))  # the pacing
    sender.finish()
    took = time.monotonic() - t0
    refused = f"{len(sender.errors)} refused {sender.errors[:3]}"
    print(f"hostile: {len(sender.sent)} records sent in {took:.1f} s, {refused}")


def _member(c: PricingCluster, name: str, *args: str) -> None:
    """Start a role process that writes where its /metrics listens (``health-<name>.json``)."""
    c.cli(name, *args, "--health-file", str(c.workdir / f"health-{name}.json"))


REFUSED = re.compile(
    r"^pricing_ha_neli_heartbeats_rejected_total\{(.*)\} ([0-9.e+]+)$", re.MULTILINE
)


def _refused(c: PricingCluster, name: str) -> dict[str, float]:
    """Refused NELI records by reason (``pricing_ha.neli.heartbeats.rejected``) of a process."""
    url = read_health_file(c.workdir / f"health-{name}.json")
    if url is None or not c.members[name].alive():
        return {}
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for labels, value in REFUSED.findall(text):
        reason = re.search(r'reason="([^"]*)"', labels)
        key = reason[1] if reason else labels
        out[key] = out.get(key, 0.0) + float(value)
    return out


def _leading(c: PricingCluster, groups: dict[str, str]) -> str | None:
    """Why the groups' genuine members do not lead every partition (bounded wait), or ``None``.

    Judged from their heartbeats of the last 2 s, read back and decoded here: the project's
    own leadership views decode heartbeats with the code under test.
    """
    every = set(range(c.partitions))
    missing: dict[str, list[int]] = {}
    deadline = time.monotonic() + LEAD_S
    while time.monotonic() < deadline:
        since_ms = time.time_ns() // 1_000_000 - 2000
        neli = read_all(c.bootstrap, c.topics["neli"], c.partitions)
        led = genuine_leaders(neli, groups, since_ms)
        missing = {g: sorted(every - parts) for g, parts in led.items() if parts != every}
        if not missing:
            return None
        time.sleep(1.0)
    return f"not led after the run (group: partitions): {missing}"


def test_hostile_mix_costs_no_real_price(
    procs: ProcessGroup, bootstrap: str, tmp_path: Path
) -> None:
    """1,000 hostile records/s for 60 s: no exit, real prices once each, every hostile fate."""
    c = PricingCluster(procs, bootstrap, tmp_path, partitions=PARTITIONS)
    c.create_topics()
    for g in ("p1", "p2"):
        _member(c, f"{g}-a", "run", "--group", c.group(g), "--member", "a")
    for r in ("r1", "r2"):
        _member(c, f"relay-{r}", "dedupe", "--group", c.group("relay"), "--member", r)
    c.wait_led(["p1", "p2", "relay"])
    c.cli("sub-relay", "subscribe", "--from-beginning")
    c.cli("sub-direct", "subscribe", "--direct", "--from-beginning")
    watch = Watch(c, ["p1-a", "p2-a", "relay-r1", "relay-r2", "sub-relay", "sub-direct"])
    feed = c.feed(instruments=INSTRUMENTS, rate=RATE_HZ, duration=HOSTILE_S + 4)
    mix = _mix_for(c)
    print(f"hostile: the feed's instruments {mix.real}, epoch {mix.epoch}")
    sender = Sender(c.bootstrap, c.topics)
    start_ms = time.time_ns() // 1_000_000
    _send(mix, sender, watch)
    end_ms = time.time_ns() // 1_000_000
    assert feed.wait(60) == 0, feed.log_tail()
    neli_problem = _leading(c, mix.groups)
    refused = {name: _refused(c, name) for name in ("p1-a", "p2-a", "relay-r1", "relay-r2")}
    print(f"hostile: NELI records refused, per process and reason: {refused}")
    if any(mix.wanted(k) for k in ROLES if k.startswith("neli.")):
        uncounted = sorted(name for name, counts in refused.items() if not sum(counts.values()))
        if uncounted and neli_problem is None:
            neli_problem = f"no refused NELI record counted by {uncounted}"
    real = _real_quotes(c, {(s.partition, s.offset) for s in sender.sent if s.role == "quotes"})
    assert sorted(real) == mix.real, sorted(real)

    deadline = time.monotonic() + (SETTLE_S if not watch.exits else 10.0)
    while True:  # until every fate is met, or the bound
        watch()
        run = _read(c, sender, real, watch, neli_problem)
        verdicts = judge(run)
        if not verdicts.failed or time.monotonic() > deadline:
            break
        time.sleep(2.0)

    silences = sorted(
        longest_silences(run.prices, real, start_ms, end_ms).items(), key=lambda kv: -kv[1]
    )
    print(
        "hostile: longest silence on prices during the run, per instrument: "
        + ", ".join(f"{k} {s:.2f} s" for k, s in silences)
    )
    sent = [k for k in ROLES if mix.wanted(k)]
    classes = [
        "process.exits",
        "process.worker_failures",
        "real.exactly_once",
        "prices.values",
        "prices.headers",
        *sent,
    ]
    print("hostile: verdicts per class\n" + verdicts.report(classes))
    assert not verdicts.failed, (
        f"classes failed: {verdicts.failed}\n{verdicts.report(verdicts.failed)}"
    )

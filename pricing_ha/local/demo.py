"""``pricing-ha demo``: the whole system on one machine, with injected fail-overs and a verdict.

Starts (as separate OS processes, all stopped by PID at the end, also on Ctrl-C or failure) a
local Apache Kafka (unless ``--bootstrap``), publishers P1 x2 ("AZ a") and P2 x2 ("AZ b"), relays
x2, a verifying subscriber and the feed. While the feed runs it injects, on a schedule scaled to
the duration: a P1 member SIGKILL, the loss of all of P2 and its restart, a SIGKILL of the
active relay, and a SIGSTOP/SIGCONT of a publisher. With ``--nodes 3`` (a three-node cluster,
topics at replication factor 3 and ``min.insync.replicas`` 2) it also kills the broker leading
most of ``prices`` and restarts it, and loses AZ a, broker 1 with it, for a while
(:mod:`pricing_ha.local.demo_faults`). At the end it stops every process (SIGTERM,
then SIGKILL after a grace), writes its run record beside the span files and renders the
traces, then compares the feed's own record of what it produced with what ``prices`` carries,
per instrument: OK, DEGRADED (exactly once and in order, but a silence over the availability
bound, with its cause) or FAILED (see :mod:`pricing_ha.local.verdict`).
"""

from __future__ import annotations

import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType

import orjson

from pricing_ha.dedupe.relay import relay_group_id
from pricing_ha.local.broker import LocalKafka
from pricing_ha.local.cluster import PricingCluster, Record
from pricing_ha.local.demo_faults import BrokerFaults, Zones
from pricing_ha.local.demo_report import (
    RunRecord,
    broker_line,
    pipeline_report,
    report,
    trace_notes,
    write_verdict,
)
from pricing_ha.local.demo_screen import demo_screen
from pricing_ha.local.demo_view import LiveView
from pricing_ha.local.judging import judge
from pricing_ha.local.procs import ProcessGroup
from pricing_ha.local.verdict import Fault, SilenceBound, State, Verdict
from pricing_ha.local.waiting import wait_for
from pricing_ha.publishing.publisher import neli_group_id


@dataclass
class DemoOptions:
    """What the demo runs."""

    bootstrap: str | None = None
    #: Nodes of the local Apache Kafka (1, or 3: adds a broker SIGKILL and the AZ a outage).
    nodes: int = 1
    duration_s: float = 45.0
    instruments: int = 20
    rate_hz: float = 10.0
    partitions: int = 4
    session_ms: int = 3000
    workdir: Path | None = None
    live: bool = True
    #: Land the topics with the Spark pipeline and write its report (``--report``).
    report: bool = False
    #: The availability bound per instrument in seconds (``None``: derived, see
    #: :class:`~pricing_ha.local.verdict.SilenceBound`).
    silence_bound_s: float | None = None
    #: How long every process gets to stop after SIGTERM at the end before it is SIGKILLed.
    stop_grace_s: float = 40.0


@dataclass
class DemoResult:
    """What the demo found."""

    verdict: Verdict
    subscriber: dict[str, object]
    events: list[str] = field(default_factory=list)
    workdir: Path = Path()
    #: The pipeline report's exactly-once verdict (None: no ``--report``).
    report_ok: bool | None = None

    @property
    def state(self) -> State:
        """OK, DEGRADED or FAILED (a report that disagrees or fails makes the run FAILED)."""
        return State.FAILED if self.report_ok is False else self.verdict.state

    @property
    def ok(self) -> bool:
        """Exactly once, in order, within the availability bound, and the report (if any)
        agrees."""
        return self.state is State.OK


#: A slot of the fault schedule: its label, its action, and (label, action) ending it if it lasts.
_Slot = tuple[str, Callable[[], None], tuple[str, Callable[[], None]] | None]


class _Run:
    def __init__(
        self,
        cluster: PricingCluster,
        view: LiveView,
        out: Callable[[str], None],
        kafka: LocalKafka | None = None,
    ):
        self.cluster = cluster
        self.view = view
        self.out = out
        self.events: list[str] = []
        self.record = RunRecord.start()
        #: Faults and planned changes (every scheduled action), for the verdict's causes.
        self.faults: list[Fault] = []
        self._open: dict[str, int] = {}  # fault key -> index of a fault that lasts
        self.zones = Zones()
        self.killed_relay = "relay-r1"
        self.hold_s = 0.0  # how long a lasting fault lasts (set by schedule())
        # Broker and AZ faults need a broker of our own with three nodes to hit.
        self.brokers = (
            BrokerFaults(kafka, cluster.topics["prices"], cluster.members, self.zones, self.fault)
            if kafka is not None and len(kafka.nodes) == 3
            else None
        )

    @property
    def now(self) -> float:
        return self.record.now()

    def note(self, text: str) -> None:
        stamp = f"t={self.now:5.1f}s {text}"
        self.events.append(stamp)
        self.out(f"  >> {stamp}")

    def fault(self, text: str, *, opens: str | None = None, closes: str | None = None) -> None:
        """Note ``text`` and add it to the fault timeline (``opens``/``closes`` a lasting one)."""
        self.note(text)
        if closes is not None and closes in self._open:
            i = self._open.pop(closes)
            self.faults[i] = replace(self.faults[i], until_s=self.now)
            return
        if opens is not None:
            self._open[opens] = len(self.faults)
        self.faults.append(Fault(round(self.now, 3), text))

    def kill(self, name: str) -> None:
        self.cluster.members[name].kill()
        self.record.ended(self.cluster.members[name], f"SIGKILL (fault) at t={self.now:.1f} s")
        self.fault(f"SIGKILL {name}")

    def slots(self) -> list[_Slot]:
        """The demo's faults in the order they strike: (label, action, what ends it, if it
        lasts). With a three-node broker, its SIGKILL and the AZ a outage are among them."""
        c = self.cluster

        def kill_active_relay() -> None:
            active = self.view.active_relay() or "r1"
            self.killed_relay = f"relay-{active}"
            self.kill(self.killed_relay)

        def pause_p1() -> None:
            c.members["p1-b"].pause()
            self.fault(f"SIGSTOP p1-b (for {self.hold_s:.0f} s)", opens="pause")

        def resume_p1() -> None:
            c.members["p1-b"].resume()
            self.fault("SIGCONT p1-b", closes="pause")

        def restart_p2() -> None:
            c.publisher("p2", "c")
            c.publisher("p2", "d")
            self.fault("AZ b back: started p2-c, p2-d", closes="az")

        def lose_p2() -> None:
            for name in ("p2-a", "p2-b"):
                c.members[name].kill()
                self.record.ended(c.members[name], f"SIGKILL (AZ b lost) at t={self.now:.1f} s")
            self.fault("AZ b lost: SIGKILL p2-a and p2-b", opens="az")

        def new_relay() -> None:
            c.relay("r3")
            self.zones.replaced("relay-r3", self.killed_relay)
            self.fault("started relay r3 (a relay rebalance: partitions move to it)")

        def new_p1() -> None:
            c.publisher("p1", "c")
            self.fault("started p1-c (a P1 rebalance)")

        out: list[_Slot] = [
            ("kill p1-a", lambda: self.kill("p1-a"), None),
            ("new p1", new_p1, None),
            ("lose p2", lose_p2, ("restart p2", restart_p2)),
            ("kill relay", kill_active_relay, ("new relay", new_relay)),
            ("pause p1", pause_p1, ("resume p1", resume_p1)),
        ]
        if self.brokers is not None:
            b = self.brokers
            out.insert(3, ("kill broker", b.kill_busiest, ("restart broker", b.restart_killed)))
            out.append(("lose AZ a", b.lose_az_a, ("heal AZ a", b.heal_az_a)))
        return out

    def schedule(self, duration: float, s: float) -> list[tuple[float, str, Callable[[], None]]]:
        """When each action runs (seconds after the feed started).

        One node: the slots at fixed fractions of the duration, lasting faults held 2 S.
        Three nodes: seven slots evenly spaced, the last half slot left for recovery, lasting
        faults held 2 S or 80 % of a slot, whichever is shorter, so none overlaps the next.
        """
        slots = self.slots()
        if self.brokers is None:
            starts = [f * duration for f in (0.12, 0.22, 0.30, 0.55, 0.75)]
            self.hold_s = 2 * s
        else:
            width = duration / (len(slots) + 0.5)
            starts = [(k + 0.25) * width for k in range(len(slots))]
            self.hold_s = min(2 * s, 0.8 * width)
        out: list[tuple[float, str, Callable[[], None]]] = []
        for at, (label, action, end) in zip(starts, slots, strict=True):
            out.append((at, label, action))
            if end is not None:
                out.append((at + self.hold_s, *end))
        return sorted(out, key=lambda a: a[0])


def _exit_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally blocks that stop processes


def run_demo(options: DemoOptions, out: Callable[[str], None] = print) -> DemoResult:
    """Run the demo and return its verdict.

    The verdict and the traces are rendered only after every process the demo started has
    stopped (SIGTERM, then SIGKILL after ``stop_grace_s``), so that every term a stopping
    member ended is in its span file.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="pricing-ha-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if options.bootstrap and options.nodes != 1:
        raise ValueError("a three-node demo starts its own brokers: it takes no bootstrap")
    broker = (
        None
        if options.bootstrap
        # Three JVMs starting at once on a busy machine can take minutes to form a quorum.
        else LocalKafka(
            nodes=options.nodes,
            workdir=workdir / "kafka",
            startup_timeout_s=60.0 if options.nodes == 1 else 180.0,
        )
    )
    try:
        if broker is not None:
            broker.start()
            out(broker_line(broker))
        bootstrap = options.bootstrap or (broker.bootstrap if broker else "")
        with ProcessGroup(workdir / "logs") as procs:
            cluster = PricingCluster(
                procs,
                bootstrap,
                workdir,
                partitions=options.partitions,
                session_ms=options.session_ms,
                replication_factor=min(options.nodes, 3),
                # Every process writes its spans here (JSON lines) unless OTLP is configured.
                env={"PRICING_HA__TELEMETRY__TRACES_DIR": str(workdir / "traces")},
            )
            view = LiveView(
                cluster.bootstrap,
                cluster.topics["neli"],
                cluster.topics["prices"],
                cluster.partitions,
            )
            try:
                run, data = _drive(cluster, view, options, workdir, out, kafka=broker)
                run.note(
                    f"stopping every process (SIGTERM, SIGKILL after {options.stop_grace_s:.0f} s)"
                )
                procs.close(grace_s=options.stop_grace_s)
                for proc in procs.procs:
                    run.record.stopped(proc)
                run.note("every process stopped")
                run.record.heartbeats = view.last_heartbeats()
            finally:
                view.close()
            run.record.faults = run.faults
            run.record.write(workdir / "traces")
            verdict = _judge(cluster, options, run, data, workdir)
            report(verdict, data.subscriber, run.events, workdir, out)
            write_verdict(verdict, run.faults, workdir)
            report_ok = (
                pipeline_report(cluster.config_path, verdict, workdir, out)
                if options.report
                else None
            )
    finally:
        if broker is not None:
            broker.stop()
    result = DemoResult(verdict, data.subscriber, run.events, workdir, report_ok)
    out(verdict.headline() if report_ok is not False else "VERDICT: FAILED - the pipeline report")
    return result


@dataclass
class _Data:
    expected: dict[str, int]
    prices: list[Record]
    raw: list[Record]
    subscriber: dict[str, object]


def _drive(
    cluster: PricingCluster,
    view: LiveView,
    options: DemoOptions,
    workdir: Path,
    out: Callable[[str], None],
    *,
    kafka: LocalKafka | None,
) -> tuple[_Run, _Data]:
    s = options.session_ms / 1000
    cluster.create_topics()
    out(f"topics created ({options.partitions} partitions each); work dir {workdir}")
    for g in ("p1", "p2"):
        cluster.publisher(g, "a")
        cluster.publisher(g, "b")
    cluster.relay("r1")
    cluster.relay("r2")
    groups = {
        "P1/a": neli_group_id(cluster.group("p1")),
        "P2/b": neli_group_id(cluster.group("p2")),
        "relay": relay_group_id(cluster.group("relay")),
    }
    run = _Run(cluster, view, out, kafka)
    every = set(range(cluster.partitions))
    wait_for(
        lambda: all(
            {p for p, ms in view.leaders(g).items() if ms} == every for g in groups.values()
        ),
        90,
        "P1, P2 and the relays to lead every partition",
    )
    run.note("every group leads every partition")
    summary_path = workdir / "subscriber-summary.json"
    subscriber = cluster.cli(
        "subscriber", "subscribe", "--from-beginning", f"--summary-out={summary_path}"
    )
    feed = cluster.feed(
        instruments=options.instruments, rate=options.rate_hz, duration=options.duration_s
    )
    run.note(f"feed: {options.instruments} instruments at {options.rate_hz:g} Hz")
    feed_t0 = time.monotonic()
    actions = run.schedule(options.duration_s, s)
    with demo_screen(lambda: view.state(groups, run.now), out, live=options.live) as screen:
        while feed.alive():
            elapsed = time.monotonic() - feed_t0
            while actions and actions[0][0] <= elapsed:
                actions.pop(0)[2]()
            screen.tick()
            time.sleep(0.1)
    for _, _, action in actions:  # a feed that ended early still gets every fault
        action()
    if feed.wait(10) != 0:
        raise RuntimeError(f"the feed failed:\n{feed.log_tail()}")
    expected = cluster.expected()
    run.note("feed finished; waiting for prices to drain")
    try:
        wait_for(lambda: judge(expected, cluster.read("prices", idle_s=0.5)).ok, 90, "prices")
    except AssertionError:
        run.note("prices did not become complete within 90 s")
    time.sleep(1.0)  # let the subscriber read the tail before it is stopped
    subscriber.terminate()
    subscriber.wait(30)
    data = _Data(expected, cluster.read("prices"), cluster.read("raw"), _load(summary_path))
    return run, data


def _judge(
    cluster: PricingCluster, options: DemoOptions, run: _Run, data: _Data, workdir: Path
) -> Verdict:
    """The verdict with its availability bound; breaches annotated from the traces."""
    from pricing_ha.config import load_app_config

    reorder_ms = load_app_config(cluster.config_path).relay.reorder_window_ms
    bound = SilenceBound(
        tick_s=1 / options.rate_hz,
        reorder_window_s=reorder_ms / 1000,
        override_s=options.silence_bound_s,
    )
    verdict = judge(
        data.expected,
        data.prices,
        raw=data.raw,
        bound=bound,
        origin_wall_s=run.record.t0_wall_ns / 1e9,
        faults=run.faults,
        # A relay fail-over heals after S + a rebalance + the takeover.
        horizon_s=4 * options.session_ms / 1000,
        subscriber_ok=bool(data.subscriber.get("ok")),
    )
    return trace_notes(verdict, workdir / "traces", relay_group_id(cluster.group("relay")))


def _load(path: Path) -> dict[str, object]:
    try:
        return dict(orjson.loads(path.read_bytes()))
    except (OSError, orjson.JSONDecodeError):
        return {"ok": False, "error": f"no subscriber summary at {path}"}

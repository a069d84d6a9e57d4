"""Does ``pricing-ha subscribe --direct`` keep up at a given rate? (for ``line_rate.py``).

A fresh product path (:func:`bench.price_path.cases.start_product`: both publishing groups and
both relays, which keep running: a direct subscriber shares the machine with them) and, before
the feed starts, one ``pricing-ha subscribe --direct --from-beginning`` arbitrating both groups'
copies on ``prices.raw``. The feed then sends R quotes/s (100 instruments) for ``step_s``.
Its progress is read from its own ``/metrics`` (``pricing_ha_prices_delivered_total``, summed
over partitions; the subscriber flushes it once per poll), scraped every :data:`SCRAPE_S`,
beside the publishers' (half the records on ``prices.raw``, from its high watermarks: a
subscriber behind is told from a path behind); its CPU from ``/proc``. Once it has every
price, or has stopped growing for :data:`STALL_S`, it is stopped with SIGTERM and its summary
(``--summary-out``) is judged against the feed's.

Kept up = every price received exactly once (per instrument, seqs 1..last as the feed sent them,
no gap, duplicate or reordering, nothing undecodable), at most R / 2 prices behind when the
feed exited, and drained within 1 s of it: the ladder's criteria (:mod:`.cases`).
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.common.cluster import feed_and_wait
from bench.common.procstat import ProcSampler, load
from bench.price_path.cases import WARM_S, drop_topics, start_product
from bench.price_path.feed_rate import Watch
from bench.price_path.line_rate_report import rate_item
from pricing_ha.local.procs import Proc, ProcessGroup
from pricing_ha.local.waiting import wait_until

SCRAPE_S = 0.2
STALL_S = 10.0
DRAINED_WITHIN_S = 1.0
DELIVERED = "pricing_ha_prices_delivered_total"
_SAMPLE = re.compile(r"^(\w+)(\{[^}]*\})?\s+(\S+)")


def delivered_from_metrics(text: str) -> int:
    """The subscriber's prices delivered, summed over partitions, from its ``/metrics`` body
    (a subscriber's process counts only its own deliveries there)."""
    total = 0.0
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) == DELIVERED:
            total += float(m.group(3))
    return int(total)


def direct_rates(spec: str, sustained: float | None) -> list[float]:
    """``--direct-rate`` values: totals/s, or ``0.8x`` for 0.8 x the run's sustained rate."""
    rates = (rate_item(x.strip(), sustained) for x in spec.split(",") if x.strip())
    return [rate for rate in rates if rate is not None]


def _count_at(samples: list[tuple[float, int]], t: float) -> int:
    before = [c for s, c in samples if s <= t]
    return before[-1] if before else 0


def keepup_figures(
    samples: list[tuple[float, int]], *, n: int, rate: float, feed_end: float
) -> dict[str, Any]:
    """Behind at the feed's exit (prices, seconds at R) and the drain after it, from (time,
    delivered) samples."""
    behind = n - _count_at(samples, feed_end)
    done = next((t for t, c in samples if c >= n), None)
    drain = None if done is None else round(max(0.0, done - feed_end), 2)
    return {
        "behind_at_feed_exit": behind,
        "behind_at_feed_exit_s": round(behind / rate, 3),
        "drain_after_feed_exit_s": drain,
        "kept_pace": behind <= 0.5 * rate and drain is not None and drain <= DRAINED_WITHIN_S,
    }


def publishers_behind(
    raw_samples: list[tuple[float, int]], *, n: int, feed_end: float
) -> dict[str, Any]:
    """How far the publishers themselves were behind at the feed's exit: ``n`` minus half the
    records on ``prices.raw`` then (both groups write a copy of each price; an estimate, as
    one group may be ahead of the other), so that a subscriber behind can be told from a path
    behind."""
    published = _count_at(raw_samples, feed_end) // 2
    return {"publishers_behind_at_feed_exit_estimate": max(0, n - published)}


def exactly_once(summary: dict[str, Any], expected: dict[str, int]) -> dict[str, Any]:
    """The subscriber's summary against the feed's last seq per instrument."""
    per = summary.get("instruments", {})
    wrong = sorted(
        name
        for name, last in expected.items()
        if (s := per.get(name)) is None
        or (s["delivered"], s["first_seq"], s["last_seq"]) != (last, 1, last)
    )
    extra = sorted(set(per) - set(expected))
    defects = {k: summary.get(k, 0) for k in ("gaps", "duplicates", "out_of_order", "invalid")}
    return {
        "ok": not wrong and not extra and not any(defects.values()),
        "expected": sum(expected.values()),
        "delivered": summary.get("delivered"),
        "instruments_wrong": wrong[:10],
        "instruments_unexpected": extra[:10],
        **defects,
        "copies_dropped": summary.get("copies_dropped"),
    }


class _Scraper:
    """Scrapes a subscriber's delivered count every :data:`SCRAPE_S`, in a thread."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.samples: list[tuple[float, int]] = [(time.monotonic(), 0)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-scrape", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(SCRAPE_S):
            try:
                with urllib.request.urlopen(f"{self.url}/metrics", timeout=2) as r:
                    count = delivered_from_metrics(r.read().decode())
            except OSError:
                continue
            self.samples.append((time.monotonic(), count))

    @property
    def last(self) -> int:
        return self.samples[-1][1]

    def stalled(self) -> bool:
        """No growth for :data:`STALL_S`."""
        now, last = time.monotonic(), self.last
        grew = max((t for t, c in self.samples if c < last), default=self.samples[0][0])
        return now - grew > STALL_S

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _health_url(proc: Proc) -> str | None:
    m = re.search(r"health: (http://\S+)/healthz", proc.log_path.read_text(errors="replace"))
    return m.group(1) if m else None


def direct_case(
    bootstrap: str,
    broker_pid: int | None,
    workdir: Path,
    *,
    rate: float,
    step_s: float,
    instruments: int,
    partitions: int,
) -> dict[str, Any]:
    """Feed ``rate`` quotes/s for ``step_s`` with a direct subscriber reading; did it keep up?

    ``broker_pid``: the broker's process, sampled beside the others (None: not sampled).
    """
    n = int(rate * step_s)
    summary_path = workdir / "subscriber-direct.json"
    with ProcessGroup(workdir / "logs") as procs:
        run = start_product(procs, bootstrap, workdir, partitions)
        sub = run.cluster.cli(
            "subscribe-direct",
            "subscribe",
            "--direct",
            "--from-beginning",
            f"--summary-out={summary_path}",
        )
        if not wait_until(lambda: _health_url(sub) is not None or not sub.alive(), 60):
            raise AssertionError(f"the direct subscriber did not start: {sub.log_tail()}")
        url = _health_url(sub)
        assert url is not None, sub.log_tail()
        pids = {"subscriber": sub.pid} | ({} if broker_pid is None else {"broker": broker_pid})
        sampler = ProcSampler(pids | {k: p.pid for k, p in run.workers.items()})
        scraper = _Scraper(url)
        raw = Watch(bootstrap, run.cluster.topics["raw"], partitions, SCRAPE_S)
        try:
            load_before = load()
            t0, feed_end = feed_and_wait(run.cluster, sampler, instruments, rate, n)
            wait_until(lambda: scraper.last >= n or scraper.stalled(), 120)
            load_after = load()
        finally:
            scraper.close()
            raw.close()
            sampler.close()
        sub.terminate()
        sub.wait(60)
        expected = run.cluster.expected()
    figures = keepup_figures(scraper.samples, n=n, rate=rate, feed_end=feed_end)
    figures |= publishers_behind([(x.t, x.records) for x in raw.samples], n=n, feed_end=feed_end)
    verdict = exactly_once(json.loads(summary_path.read_text()), expected)
    window = sampler.window(t0 + WARM_S, feed_end).get("subscriber")
    cpu: dict[str, float | None] = {"cpu_us_per_price": None, "cpu_percent_of_a_core": None}
    if window is not None:
        ta, tb, seconds = window
        prices = _count_at(scraper.samples, tb) - _count_at(scraper.samples, ta)
        cpu = {
            "cpu_us_per_price": round(seconds / prices * 1e6, 1) if prices else None,
            "cpu_percent_of_a_core": round(seconds / (tb - ta) * 100, 1),
        }
    out: dict[str, Any] = {
        "offered_per_s": rate,
        "instruments": instruments,
        "partitions": partitions,
        "prices": n,
        "kept_up": verdict["ok"] and figures["kept_pace"],
        "exactly_once": verdict,
        **figures,
        "subscriber_cpu": cpu,
        "progress_from": f"the subscriber's /metrics ({DELIVERED}), every {SCRAPE_S} s",
        "load_average_1m_before": load_before,
        "load_average_1m_after": load_after,
        "topics_deleted": drop_topics(bootstrap, run.topics),
    }
    print(
        f"    direct subscriber at {rate:.0f}/s: kept up {out['kept_up']}, behind "
        f"{figures['behind_at_feed_exit']} at the feed's exit, drained in "
        f"{figures['drain_after_feed_exit_s']} s, {cpu['cpu_us_per_price']} µs/price",
        flush=True,
    )
    return out

"""The subscriber's telemetry over the scripted fake consumer: process spans, switches, metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message

from pricing_ha.config import AppConfig, TelemetryConfig
from pricing_ha.telemetry import Telemetry, load_spans, setup_telemetry
from tests.unit.subscribing.test_subscriber import Clock, raw, started
from tests.unit.telemetry.prometheus_format import parse, value

TRACE = "0af7651916cd43dd8448eb211c80319c"


@pytest.fixture
def telemetry(tmp_path: Path) -> Iterator[Telemetry]:
    """Subscriber telemetry writing spans to one file; price sampling at 0 (headers decide)."""
    cfg = AppConfig(telemetry=TelemetryConfig(traces_dir=tmp_path, price_sample_ratio=0.0))
    tel = setup_telemetry(cfg, service_role="subscriber", group=None, member="s1", env={})
    yield tel
    tel.shutdown()


def traced(msg: Message, span_id: str, *, sampled: bool = True) -> Message:
    """``msg`` with a traceparent header naming ``span_id``."""
    flags = "01" if sampled else "00"
    headers = [*(msg.headers() or []), ("traceparent", f"00-{TRACE}-{span_id}-{flags}".encode())]
    return Message(
        topic=msg.topic(),
        partition=msg.partition(),
        offset=msg.offset(),
        key=msg.key(),
        value=msg.value(),
        headers=headers,
    )


async def test_sampled_prices_end_their_trace_with_a_process_span(telemetry: Telemetry) -> None:
    """A sampled price gets `process prices` (child of the relay's send); unsampled ones none."""
    sub, fake = await started(telemetry=telemetry)
    fake.batches = [
        [
            traced(raw("X", 1), "00000000000000a1"),
            traced(raw("X", 2), "00000000000000a2", sampled=False),
            raw("X", 3),
            traced(raw("X", 3, offset=9), "00000000000000a3"),  # a relay defect: dropped
        ]
    ]
    got = await sub.poll(0.1)
    assert [d.seq for d in got] == [1, 2, 3]
    await sub.close()
    telemetry.shutdown()
    assert telemetry.trace_file is not None
    spans = load_spans(telemetry.trace_file)
    assert [s["name"] for s in spans] == [f"process {sub.topic}"] * 2
    first, dropped = spans
    assert (first["trace_id"], first["parent"]) == (TRACE, "00000000000000a1")
    assert first["kind"] == "CONSUMER"
    a = first["attributes"]
    assert a["messaging.consumer.group.name"] == sub.group_id
    assert a["messaging.destination.name"] == sub.topic
    assert a["messaging.destination.partition.id"] == "0"
    assert a["messaging.kafka.message.key"] == "X"
    assert a["pricing_ha.arbitration"] == "delivered"
    assert dropped["parent"] == "00000000000000a3"
    assert dropped["attributes"]["pricing_ha.arbitration"] == "duplicate"
    assert dropped["attributes"]["messaging.kafka.offset"] == 9


async def test_direct_mode_switch_is_a_subscriber_switch_span(telemetry: Telemetry) -> None:
    """Direct mode: P1 stops, P2 goes on: one subscriber.switch span with from/to and overlap."""
    clock = Clock()
    sub, fake = await started(direct=True, clock=clock, telemetry=telemetry)
    fake.batches = [
        [raw("X", 1, "p1"), raw("X", 1, "p2"), raw("X", 2, "p1"), raw("X", 2, "p2")],
        [raw("X", 3, "p2")],  # P1 missed 3: not yet a switch (P1 may only be slower)
        [raw("X", 4, "p2")],  # P1 missed 3 and 4: P2 takes over
    ]
    await sub.poll(0.1)
    clock.now += 0.1
    assert [d.switched_from for d in await sub.poll(0.1)] == [None]
    clock.now += 0.2
    assert [d.switched_from for d in await sub.poll(0.1)] == ["p1/a"]
    await sub.close()
    telemetry.shutdown()
    assert telemetry.trace_file is not None
    (span,) = load_spans(telemetry.trace_file)
    assert span["name"] == "subscriber.switch X"
    a = span["attributes"]
    assert (a["pricing_ha.switch.from"], a["pricing_ha.switch.to"]) == ("p1/a", "p2/a")
    assert a["pricing_ha.switch.duplicates_dropped"] == 2
    assert a["pricing_ha.switch.gap_seq"] == 0
    assert a["pricing_ha.switch.silence_s"] == pytest.approx(0.2)
    assert a["pricing_ha.observer"] == sub.group_id


async def test_delivered_duplicates_gaps_and_latency_are_measured(telemetry: Telemetry) -> None:
    """Counters per partition and the latency histograms follow what was delivered."""
    sub, fake = await started(telemetry=telemetry)
    fake.batches = [[raw("X", 1), raw("X", 2), raw("X", 2, "p2"), raw("X", 5)]]
    await sub.poll(0.1)
    fams = parse(telemetry.prometheus_text())
    assert value(fams, "pricing_ha_prices_delivered_total", partition="0") == 3
    assert (
        value(fams, "pricing_ha_duplicates_dropped_total", stage="subscriber", partition="0") == 1
    )
    assert value(fams, "pricing_ha_seq_gaps_total", stage="subscriber", partition="0") == 2
    assert value(fams, "pricing_ha_price_latency_seconds_count", stage="subscriber") == 3
    # wall 2.0 s, source 500 ns: about 2 s from the source, in the 2.5 s bucket
    assert value(fams, "pricing_ha_price_latency_seconds_sum", stage="subscriber") == (
        pytest.approx(3 * (2.0 - 500e-9))
    )
    assert value(fams, "pricing_ha_partition_staleness_seconds", partition="0") >= 0
    assert "pricing_ha_instrument_staleness_seconds" not in fams  # opt-in only
    assert sub.started
    await sub.close()
    assert not sub.started


async def test_relay_mode_leaves_switch_spans_to_the_relay(telemetry: Telemetry) -> None:
    """On `prices` the same change of publisher is the relay's switch: no subscriber span."""
    sub, fake = await started(telemetry=telemetry)
    fake.batches = [[raw("X", 1, "p1"), raw("X", 2, "p1"), raw("X", 3, "p2"), raw("X", 4, "p2")]]
    got = await sub.poll(0.1)
    assert [d.switched_from for d in got] == [None, None, None, "p1/a"]
    await sub.close()
    telemetry.shutdown()
    assert telemetry.trace_file is not None
    assert load_spans(telemetry.trace_file) == []

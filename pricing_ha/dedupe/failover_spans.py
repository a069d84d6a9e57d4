"""Fail-over spans: one span per instrument switch of publisher seen by an arbiter.

The relay (and the subscriber's direct mode) arbitrates the copies that P1 and P2 publish. When
an instrument's emission comes from another source than the one it followed because that source
missed a seq (:attr:`pricing_ha.dedupe.arbitration.Emission.switched_from`), that is a fail-over as
the consumers see it. :func:`trace_switch` records it as an INTERNAL span, always (it is a root,
so price-path sampling never drops it), named ``{stage}.switch {instrument}``, lasting from the
instrument's previous emission to this one (the silence), with:

=========================================  ==================================================
``pricing_ha.switch.from`` / ``.to``       the sources, ``group/member``
``pricing_ha.switch.from_group`` / ``..``  their groups
``pricing_ha.switch.gap_seq``              seqs declared missing right before this one
``pricing_ha.switch.silence_s``            time since the instrument's previous emission
``pricing_ha.switch.duplicates_dropped``   copies dropped since the previous switch (overlap)
``pricing_ha.instrument``, ``pricing_ha.seq``, ``messaging.destination.partition.id``
=========================================  ==================================================

When the emission's price is traced, the span links to its ``send`` span.
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext, SpanKind
from opentelemetry.util.types import AttributeValue

from pricing_ha.dedupe.arbitration import Emission

__all__ = ["switch_attributes", "trace_switch"]


def _group(source: str) -> str:
    return source.rsplit("/", 1)[0]


def switch_attributes(
    emission: Emission[Any], *, stage: str, partition: int | None
) -> dict[str, AttributeValue]:
    """The attributes of a switch span (see the module docstring)."""
    assert emission.switched_from is not None, "not a switch"
    attrs: dict[str, AttributeValue] = {
        "pricing_ha.stage": stage,
        "pricing_ha.instrument": emission.instrument,
        "pricing_ha.seq": emission.seq,
        "pricing_ha.switch.from": emission.switched_from,
        "pricing_ha.switch.to": emission.source,
        "pricing_ha.switch.from_group": _group(emission.switched_from),
        "pricing_ha.switch.to_group": _group(emission.source),
        "pricing_ha.switch.gap_seq": emission.gap_before,
        "pricing_ha.switch.silence_s": round(emission.silence_s, 6),
        "pricing_ha.switch.duplicates_dropped": emission.dropped_since_switch,
    }
    if partition is not None:
        attrs["messaging.destination.partition.id"] = str(partition)
        attrs["pricing_ha.partition"] = partition
    return attrs


def trace_switch(
    tracer: trace.Tracer,
    emission: Emission[Any],
    *,
    stage: str,
    partition: int | None,
    observer: str,
    at_ns: int | None = None,
    price_span: SpanContext | None = None,
) -> Span:
    """Record one switch of publisher as a finished span (see the module docstring).

    Args:
        tracer: where the span goes.
        emission: an emission with ``switched_from`` set.
        stage: ``relay`` or ``subscriber``: the span is named ``{stage}.switch {instrument}``.
        partition: the partition the instrument is on, if known.
        observer: who saw the switch (the relay member), as ``pricing_ha.observer``.
        at_ns: when the switching emission happened (wall, ns); default now.
        price_span: the traced price's ``send`` span, linked if given.

    Returns:
        The ended span.
    """
    end_ns = time.time_ns() if at_ns is None else at_ns
    start_ns = end_ns - max(0, int(emission.silence_s * 1e9))
    attrs = switch_attributes(emission, stage=stage, partition=partition)
    attrs["pricing_ha.observer"] = observer
    links = [Link(price_span, {"pricing_ha.link": "switching price"})] if price_span else []
    span = tracer.start_span(
        f"{stage}.switch {emission.instrument}",
        context=Context(),  # a root: never sampled away with a price-path parent
        kind=SpanKind.INTERNAL,
        attributes=attrs,
        links=links,
        start_time=start_ns,
    )
    span.end(end_time=end_ns)
    return span

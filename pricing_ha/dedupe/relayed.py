"""What the relay writes on ``prices``: only what it wrote, whatever came in on ``prices.raw``.

Anyone with write access to ``prices.raw`` (a buggy or hostile publisher) chooses every byte of
a raw record. The relay therefore never copies a raw record onto ``prices`` as it is:

* the **value** is the canonical encoding (:func:`~pricing_ha.publishing.pricing.encode_price`)
  of the price the relay decoded and arbitrated on (:func:`.records.parse_raw_record`), so
  unknown fields, odd spacing or a second encoding of the same price never reach subscribers;
* the **headers** are built, not copied (:func:`relayed_headers`), from this allow-list:

  ================  ===========================================================================
  header            why it is kept, and how
  ================  ===========================================================================
  ``seq``           written by the relay from the value (a forged ``seq`` header is dropped):
                    tools and tests read it without decoding the value; no reader of ``prices``
                    in this project trusts it over the value.
  ``group``         the publisher of the winning copy: the pipeline's fail-over analysis and
  ``member``        the subscriber's ``source``. Informational (publishers are not
                    authenticated by these); kept only if at most :data:`MAX_IDENTITY_BYTES`.
  ``publish_ns``    the publisher's produce time, for the hop latency; kept only as 1-19 ASCII
                    digits.
  ``traceparent``   W3C trace context (DESIGN: price messages carry it), kept only in its exact
                    version-00 form; a sampled price gets the relay's own ``send`` span instead.
  ``relay``         added by the relay (:mod:`.output`): who relayed it, and when.
  ``relay_ns``
  ================  ===========================================================================

  Anything else (``tracestate``, the control header, unknown headers) is dropped, so a control
  header forged on a raw price cannot reach ``prices``; the key rule of
  :func:`~pricing_ha.kafka.headers.is_control` would not take such a record for a control
  record anyway (a price always has a key).
"""

from __future__ import annotations

import re

from pricing_ha.kafka.headers import Headers, HeaderValue, header_pairs

__all__ = ["MAX_IDENTITY_BYTES", "RELAYED_HEADERS", "relayed_headers"]

#: Every header a record the relay writes on ``prices`` may carry (see the module docstring).
RELAYED_HEADERS = ("seq", "group", "member", "publish_ns", "traceparent", "relay", "relay_ns")

#: Longest ``group`` or ``member`` header copied (longer ones are dropped, not cut).
MAX_IDENTITY_BYTES = 64

_TRACEPARENT = re.compile(rb"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_IDENTITY = frozenset(("group", "member"))
_COPIED = _IDENTITY | {"publish_ns", "traceparent"}


def relayed_headers(raw_headers: Headers, seq: int) -> list[tuple[str, HeaderValue]]:
    """The allow-listed headers of a relayed price (``relay`` and ``relay_ns`` come later).

    Args:
        raw_headers: the raw record's headers, as confluent-kafka returns them.
        seq: the seq of the price's value.

    Returns:
        ``seq`` from the value, then the raw record's ``group``, ``member``, ``publish_ns`` and
        ``traceparent`` if well-formed (the last of a repeated header wins, as for
        :func:`~pricing_ha.kafka.headers.header_dict`).
    """
    kept: dict[str, HeaderValue] = {}
    if raw_headers:
        for name, value in header_pairs(raw_headers):
            if name not in _COPIED:
                continue
            data = value.encode() if isinstance(value, str) else value
            if data is not None and (
                (name == "publish_ns" and 0 < len(data) <= 19 and data.isdigit())
                or (name == "traceparent" and _TRACEPARENT.fullmatch(data) is not None)
                or (name in _IDENTITY and len(data) <= MAX_IDENTITY_BYTES)
            ):
                kept[name] = data
            else:
                kept.pop(name, None)
    return [("seq", str(seq).encode()), *kept.items()]

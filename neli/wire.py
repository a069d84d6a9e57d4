"""NELI's heartbeat record, for code that reads the NELI topic itself.

A member's heartbeats are ordinary Kafka records on the NELI topic: :class:`Heartbeat` encodes
and decodes them (:class:`HeartbeatDecodeError` names why a record was refused), and
:class:`OwnerDirectory` turns a stream of decoded heartbeats into "who owns partition k of
group G now, and since when" (the pure part of :class:`neli.OwnerLookup`, for an application
that already consumes the topic). A plain NELI user never needs this module.
"""

from __future__ import annotations

from neli._heartbeat import Heartbeat, HeartbeatDecodeError
from neli._owners import OwnerDirectory

__all__ = ["Heartbeat", "HeartbeatDecodeError", "OwnerDirectory"]

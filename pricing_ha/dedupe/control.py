"""Control records on ``prices``, and the view of a partition they fold into.

A relay member writes control records (:data:`~pricing_ha.kafka.headers.CONTROL_HEADER`) beside
the prices on ``prices[k]``; every member's standby tail (:mod:`.standby`) folds the prices and
the control records of each partition, in order, into a :class:`PartitionView`. The fold is
a pure function of the records: the view after ``[0, position)`` is the same whoever read it,
which is what makes a checkpoint (a view written to the partition) valid for every reader.

The kinds of control record on ``prices[k]``:

* ``takeover``: a relay is about to emit on k. Its offset is that owner's *term*; everything
  appended before it is below it, so reading up to it yields complete high-water marks.
* ``release``: the owner of term t stopped emitting on k and every record it produced there was
  acknowledged before this record was written (header ``term`` = t). A member revoked while
  taking k up releases the term it never began; if it found k not released below its
  takeover marker, the release says so (header ``before`` = ``unclean``) and does not count
  as one: the owner of the earlier term may still be emitting. It then also names that
  earlier term (headers ``below`` and ``below_wall``): if the term it ends is still the
  latest, readers take the earlier one as the latest again, so a term that never began hides
  nothing from whoever is next (the partition looks released again if that owner had
  released it).
* ``probe``: a relay assigned k, still in its grace period, asking what the end looks like.
* ``checkpoint``: the writer's own :class:`PartitionView` of k at some ``position`` below the
  record (its value, JSON). Owners write one about every second while prices arrive.
* ``reset``: an operator's reset of one instrument's mark (header ``instrument``): the view
  forgets the instrument's mark (:mod:`.mark_reset`).
* ``tick``: written by an owner handing k over that may not emit because its tail has not
  seen the end of k lately (k idle: nothing of its own to read back). Its own tail reading it
  back has seen everything appended before it, a successor's request included. It means
  nothing to anyone else.

A control record of any other kind (``handover`` and ``kept`` are on topics written by earlier
relays) is read past: it changes nothing in the view.

:class:`Snapshot` is the state of a partition just *before* one of this member's own control
records (recognised by the ``marker`` header this member's token starts), captured by the tail
as it passes the record: what a takeover starts from, and whether the partition was *cleanly
released* (the owner of the latest term released it, and nothing but control records came
after): then no earlier owner can still append, and the new owner need not wait out its grace.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import msgspec
import orjson
from confluent_kafka import Message

from pricing_ha.kafka.headers import CONTROL_HEADER, Headers, header_int, header_list, is_control
from pricing_ha.publishing.epochs import MAX_EPOCH, epoch_of, position, seq_in_epoch
from pricing_ha.publishing.quotes import MAX_SEQ

__all__ = [
    "CHECKPOINT",
    "PROBE",
    "RELEASE",
    "RESET",
    "TAKEOVER",
    "TICK",
    "PartitionView",
    "Snapshot",
    "control_kind",
    "control_of",
    "seq_of",
]

TAKEOVER = b"takeover"
RELEASE = b"release"
PROBE = b"probe"
CHECKPOINT = b"checkpoint"
TICK = b"tick"
RESET = b"reset"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A partition's state just before one of this member's control records.

    Attributes:
        offset: the control record's offset.
        high: every instrument's highest position below ``offset`` (its seq in epoch 0).
        clean: the partition was cleanly released below ``offset`` (see the module docstring),
            or never had an owner.
        term: the offset of the last takeover marker below ``offset`` (-1: none).
        term_wall: that marker's timestamp in seconds (when its writer produced it, by its
            clock), -1 if not known.
    """

    offset: int
    high: dict[str, int]
    clean: bool
    term: int = -1
    term_wall: float = -1.0


@dataclass(slots=True)
class PartitionView:
    """What the tail knows about one partition of ``prices``."""

    position: int = 0  # the next offset to read
    high: dict[str, int] = field(default_factory=dict)
    last_data: int = -1  # offset of the last price
    term: int = -1  # offset of the last takeover marker
    term_wall: float = -1.0  # its timestamp (s; its writer's clock), -1: not known
    released_term: int = -1  # the term named by the last release marker
    released_at: int = -1  # offset of the last release marker
    # member token -> offset of its last probe or takeover, from the last takeover on (what
    # a reader needs to know whether *another* member asked since its own term; the same
    # whoever reads it, so that a checkpoint is valid for every reader)
    requests: dict[str, int] = field(default_factory=dict)
    at_end: bool = False  # reached the end of the partition at least once
    end_mono: float = float("-inf")  # when the tail last reached the end (monotonic)

    @property
    def clean(self) -> bool:
        """Released by the owner of the latest term, with no price after the release."""
        if self.term < 0 and self.last_data < 0:
            return True  # never owned
        return self.released_term == self.term and self.released_at > self.last_data

    def requested_after(self, offset: int, me: str) -> bool:
        """Whether a member other than token ``me`` asked for the partition after ``offset``
        (exact for ``offset`` at or above the last takeover: earlier requests are forgotten
        when a takeover comes, and a reader asks about its own latest term)."""
        return any(at > offset and who != me for who, at in self.requests.items())

    def fold_price(self, offset: int, got: tuple[str, int] | None) -> None:
        """A price at ``offset`` (its instrument and seq, if it has them)."""
        if got is not None:
            instrument, seq = got
            if seq > self.high.get(instrument, 0):
                self.high[instrument] = seq
        self.last_data = offset

    def fold_control(self, offset: int, kind: bytes, values: dict[str, bytes], wall: float) -> None:
        """A control record at ``offset`` (its kind, headers, and timestamp in seconds)."""
        marker = values.get("marker", b"")
        if kind == TAKEOVER:
            self.term, self.term_wall = offset, wall
            self.requests.clear()
        if kind in (TAKEOVER, PROBE):
            self.requests[marker.rpartition(b":")[0].decode(errors="replace")] = offset
        elif kind == RESET:
            self.high.pop(values.get("instrument", b"").decode(errors="replace"), None)
        elif kind == RELEASE and values.get("before") == b"unclean":
            # A release saying it found the partition unclean ends a term that never began: an
            # earlier owner may still be emitting, so the partition stays unreleased, and if
            # that term is still the latest, the one below it is the latest again (released
            # if its owner had released it).
            below = _signed(values.get("below", b""))
            if below is not None and -1 <= below < self.term == _signed(values.get("term", b"")):
                self.term = below
                try:
                    wall = float(values.get("below_wall", b"-1"))
                except ValueError:
                    wall = -1.0
                self.term_wall = wall if math.isfinite(wall) else -1.0
        elif kind == RELEASE:
            term = header_int(values.get("term"))
            released = -2 if term is None else term
            if 0 <= released < self.term and self.released_term == self.term:
                # A late release of an earlier term (a deposed owner that noticed its loss
                # only now) says nothing about the latest term's owner, which has released
                # already: the partition stays released. Before, it made the partition look
                # unreleased, and a member resuming it waited for a release nobody would
                # write (the fault drill: 1.2 s, while the rebalance waited on it).
                return
            self.released_term = released
            self.released_at = offset

    def encode(self) -> bytes:
        """The view as a checkpoint record's value (everything but when it was read)."""
        return orjson.dumps(
            {
                "v": 1,
                "position": self.position,
                "high": {k: _encode_mark(v) for k, v in self.high.items()},
                "last_data": self.last_data,
                "term": self.term,
                "term_wall": self.term_wall,
                "released_term": self.released_term,
                "released_at": self.released_at,
                "requests": self.requests,
            }
        )

    @classmethod
    def decode(cls, value: bytes, offset: int) -> PartitionView | None:
        """The view a checkpoint record at ``offset`` carries; ``None`` if it is not one (a
        malformed value, or a position above the record itself)."""
        try:
            doc = orjson.loads(value)
            view = cls(
                position=_int(doc["position"]),
                high={str(k): _decode_mark(v) for k, v in doc["high"].items()},
                last_data=_int(doc["last_data"]),
                term=_int(doc["term"]),
                term_wall=float(doc.get("term_wall", -1.0)),
                released_term=_int(doc["released_term"]),
                released_at=_int(doc["released_at"]),
                requests={str(k): _int(v) for k, v in doc["requests"].items()},
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError):
            return None
        if doc.get("v") != 1 or not 0 <= view.position <= offset:
            return None
        return view


def _signed(raw: bytes) -> int | None:
    """A header's integer value (may be negative), or ``None``."""
    number = header_int(raw[1:] if raw.startswith(b"-") else raw)
    return None if number is None else (-number if raw.startswith(b"-") else number)


def _encode_mark(pos: int) -> int | list[int]:
    """A mark in a checkpoint: its seq in epoch 0 (as before epochs), else ``[epoch, seq]``
    (a packed position does not fit JSON's 64-bit integers)."""
    epoch = epoch_of(pos)
    return pos if epoch == 0 else [epoch, seq_in_epoch(pos)]


def _decode_mark(value: object) -> int:
    if isinstance(value, list) and len(value) == 2:
        epoch, seq = _int(value[0]), _int(value[1])
        if not (0 <= epoch <= MAX_EPOCH and 0 <= seq <= MAX_SEQ):
            raise ValueError(value)
        return position(epoch, seq)
    return _int(value)


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(value)
    return value


def control_kind(
    key: bytes | str | None, headers: Headers
) -> tuple[bytes, dict[str, bytes]] | None:
    """``(kind, headers)`` of a control record, or ``None`` for a price.

    A control record is what :func:`~pricing_ha.kafka.headers.is_control` says it is (no key,
    and the control header): the one rule every reader of ``prices`` applies.
    """
    if not is_control(key, headers):
        return None
    values = {k: v.encode() if isinstance(v, str) else (v or b"") for k, v in header_list(headers)}
    return values[CONTROL_HEADER], values


def control_of(msg: Message) -> tuple[bytes, dict[str, bytes]] | None:
    """:func:`control_kind` of a record as read.

    A keyed record is a price whatever its headers, so its header list (which
    confluent-kafka builds anew at every call) is not built at all: the readers of ``prices``
    read a price far more often than a control record.
    """
    key = msg.key()
    return None if key is not None else control_kind(key, msg.headers())


def seq_of(msg: Message) -> tuple[str, int] | None:
    """Instrument and position (``(epoch, seq)`` packed: :mod:`pricing_ha.publishing.epochs`;
    its seq in epoch 0) of a price on ``prices``, from its value (never from a header: the
    value is what subscribers read and what the relay arbitrated on).

    The relay wrote that value canonically after validating it, so only the fields read here
    are checked (a fraction of :func:`~pricing_ha.publishing.pricing.decode_price`'s
    cost: the tail reads every partition). The instrument is interned, as the relay's arbiter
    interns it (``records``): the view's mark and the arbiter's line then share one string
    per instrument, not one copy each.
    """
    if not isinstance(msg.key(), bytes):
        return None
    try:
        got = _POSITION.decode(msg.value() or b"")
    except msgspec.MsgspecError:
        return None  # not JSON, not an object, or a field missing or of another type
    instrument, seq, epoch = got.instrument, got.seq, got.epoch
    if not 1 <= seq <= MAX_SEQ or not 0 <= epoch <= MAX_EPOCH:
        return None
    return sys.intern(instrument), position(epoch, seq)


class _Position(msgspec.Struct):
    """The fields of a price :func:`seq_of` reads (the others are skipped unread)."""

    instrument: str
    seq: int
    epoch: int = 0


_POSITION = msgspec.json.Decoder(_Position)

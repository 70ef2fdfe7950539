"""The bytes of the secure sum's messages, and of the documents that keep a party's or the
coordinator's state between stages: UTF-8 JSON that names its format, its stage and the
session, byte strings and words in base64, and the digest of its content, so that bytes
changed on the way (a file cut short, a flipped bit) are refused before anything is read
of them (a check against accidents: what a hostile sender could alter is the signatures'
and the sealed shares' to catch).

Reading takes the bytes as hostile: their size is bounded from the agreement before they
are parsed (a message's by the largest message of the sum, a state's by its shape), and
every value is checked against the stage's exact shape (its keys, the lengths of keys,
commitments, shares, digests and signatures, parties of the sum, ``agreement.length`` words),
a misfit refused with a `SecureSumError` that names the field. What the parties and the
coordinator then check of a message (that it fits the roster, that shares open, that
signatures verify) is their methods' job, unchanged.

The messages, by stage, as the methods of `SecureSumParty` and `SecureSumCoordinator`
give and take them:

- to the coordinator: ``keys`` (`SecureSumParty.advertise`), ``shares``
  (``share_keys``), ``masked`` (``masked_input``), ``confirm`` and ``unmask``;
- to a party: ``roster`` (`SecureSumCoordinator.collect_keys`), ``routed`` (one party's
  entry of ``route_shares``), ``survivors`` (``collect_masked``) and ``request``
  (``unmask_request``, which ``unmask`` takes as keyword arguments).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from . import _primitives as crypto
from ._agreement import Agreement, SecureSumError
from ._encoding import WORD
from ._shamir import SHARE_BYTES
from ._signed import ENTRY, KEYS, SHARED

MESSAGE_FORMAT = "skfedkt secure sum message 4"
# what a party seals for another: a share of each of its secrets
SEALED_PLAINTEXT_BYTES = len(SHARED) * SHARE_BYTES
SEALED_BYTES = SEALED_PLAINTEXT_BYTES + crypto.SEAL_OVERHEAD
_INDEX = re.compile(r"0|[1-9][0-9]*")  # a party's index as a key, written one way only
# beyond the most a document of its shape takes: room for a short misfit, refused by its
# field rather than by its size
_SLACK = 1024


@dataclass(frozen=True)
class Place:
    """Where a value lies in a document (`field`), and how a misfit there is refused."""

    agreement: Agreement
    refuse: Callable[[str, str], Exception]
    root: str
    path: str = ""

    @property
    def field(self) -> str:
        return self.path or self.root

    def at(self, name: object) -> Place:
        return replace(self, path=f"{self.path}.{_brief(name)}" if self.path
                       else _brief(name))

    def item(self, key: object) -> Place:
        return replace(self, path=f"{self.field}[{_brief(key)}]")

    def misfit(self, reason: str) -> Exception:
        return self.refuse(self.field, reason)


def _brief(text: object) -> str:
    """`text` short enough for a refusal, however long a hostile sender made it."""
    text = str(text)
    return text if len(text) <= 40 else text[:37] + "..."


class Shape(Protocol):
    """The one shape a value of a document has: `write` turns it into JSON's values,
    `read` back, refusing any other; `bound` is the most bytes it takes as JSON."""

    def write(self, value: Any, place: Place) -> Any: ...

    def read(self, value: Any, place: Place) -> Any: ...

    def bound(self, agreement: Agreement) -> int: ...


def _base64_length(size: int) -> int:
    return 4 * math.ceil(size / 3)


def _from_base64(value: Any, size: int, place: Place, what: str) -> bytes:
    if isinstance(value, str) and len(value) == _base64_length(size):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == size:
            return raw
    raise place.misfit(f"not {what} in base64")


@dataclass(frozen=True)
class Bytes:
    """A byte string of exactly `size` bytes."""

    size: int

    def write(self, value: Any, place: Place) -> str:
        if not isinstance(value, bytes) or len(value) != self.size:
            raise place.misfit(f"not {self.size} bytes")
        return base64.b64encode(value).decode("ascii")

    def read(self, value: Any, place: Place) -> bytes:
        return _from_base64(value, self.size, place, f"{self.size} bytes")

    def bound(self, agreement: Agreement) -> int:
        return _base64_length(self.size) + 2


class Words:
    """The ``agreement.length`` words of a vector, little-endian."""

    def write(self, value: Any, place: Place) -> str:
        length = place.agreement.length
        if not (isinstance(value, np.ndarray) and value.dtype == WORD
                and value.shape == (length,)):
            raise place.misfit(f"not {length} words")
        return base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii")

    def read(self, value: Any, place: Place) -> np.ndarray:
        length = place.agreement.length
        raw = _from_base64(value, 8 * length, place, f"{length} words")
        return np.frombuffer(raw, dtype=WORD).copy()

    def bound(self, agreement: Agreement) -> int:
        return _base64_length(8 * agreement.length) + 2


def _index(value: Any, place: Place) -> int:
    # bool is an int to Python, not to JSON
    if type(value) is not int or not 0 <= value < len(place.agreement.parties):
        raise place.misfit(f"{_brief(repr(value))} is not a party of the sum")
    return value


def _index_bound(agreement: Agreement) -> int:
    return len(str(len(agreement.parties) - 1))


class Index:
    """A party, by its index in ``agreement.parties``."""

    write = read = staticmethod(_index)

    def bound(self, agreement: Agreement) -> int:
        return _index_bound(agreement)


@dataclass(frozen=True)
class Indices:
    """Parties, each once, as a `container` (tuple or list) of their indices."""

    container: type

    def write(self, value: Any, place: Place) -> list[int]:
        if not isinstance(value, (list, tuple)):
            raise place.misfit("not a list of parties")
        return list(self.read(list(value), place))

    def read(self, value: Any, place: Place) -> Any:
        if not isinstance(value, list) or len(value) > len(place.agreement.parties):
            raise place.misfit("not a list of parties")
        indices = [_index(index, place.item(at)) for at, index in enumerate(value)]
        if len(set(indices)) != len(indices):
            raise place.misfit("names a party twice")
        return self.container(indices)

    def bound(self, agreement: Agreement) -> int:
        return 2 + len(agreement.parties) * (_index_bound(agreement) + 1)


@dataclass(frozen=True)
class ByParty:
    """A mapping of parties (their indices, as JSON's keys) to values of one shape."""

    value: Shape

    def write(self, value: Any, place: Place) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise place.misfit("not a mapping of parties")
        written = {}
        for index, item in value.items():
            inner = place.item(index)
            written[str(_index(index, inner))] = self.value.write(item, inner)
        return written

    def read(self, value: Any, place: Place) -> dict[int, Any]:
        if not isinstance(value, dict):
            raise place.misfit("not a mapping of parties")
        read = {}
        for key, item in value.items():
            inner = place.item(key)
            # a key's length is checked first: Python refuses ints of over 4300 digits
            if len(key) > _index_bound(place.agreement) or not _INDEX.fullmatch(key):
                raise inner.misfit("not a party of the sum")
            read[_index(int(key), inner)] = self.value.read(item, inner)
        return read

    def bound(self, agreement: Agreement) -> int:
        # each entry: its key in quotes, a colon, its value, a comma
        return 2 + len(agreement.parties) * (
            _index_bound(agreement) + 4 + self.value.bound(agreement))


@dataclass(frozen=True)
class Record:
    """A mapping of exactly these names to values of their shapes."""

    fields: Mapping[str, Shape]

    def write(self, value: Any, place: Place) -> dict[str, Any]:
        self._check_names(value, place)
        return {name: shape.write(value[name], place.at(name))
                for name, shape in self.fields.items()}

    def read(self, value: Any, place: Place) -> dict[str, Any]:
        self._check_names(value, place)
        return {name: shape.read(value[name], place.at(name))
                for name, shape in self.fields.items()}

    def _check_names(self, value: Any, place: Place) -> None:
        if not isinstance(value, Mapping):
            raise place.misfit(f"not a mapping of {', '.join(self.fields)}")
        for name in value:
            if name not in self.fields:
                raise place.at(name).misfit("not a field of this document")
        for name in self.fields:
            if name not in value:
                raise place.at(name).misfit("missing")

    def bound(self, agreement: Agreement) -> int:
        # each entry: its name in quotes, a colon, its value, a comma
        return 2 + sum(len(name) + 4 + shape.bound(agreement)
                       for name, shape in self.fields.items())


@dataclass(frozen=True)
class Choice:
    """One of a few strings."""

    values: tuple[str, ...]

    def write(self, value: Any, place: Place) -> str:
        return self.read(value, place)

    def read(self, value: Any, place: Place) -> str:
        if value not in self.values:
            raise place.misfit(f"{_brief(repr(value))} is none of {', '.join(self.values)}")
        return value

    def bound(self, agreement: Agreement) -> int:
        return 2 + max(map(len, self.values))


# the bytes of each field of a party's entry of the roster (`_signed.ENTRY`): its round
# keys, its commitment to its self-mask seed, and its identity's signature of them
ENTRY_BYTES = dict(zip(ENTRY, (crypto.KEY_BYTES,) * len(KEYS) + (
    crypto.DIGEST_BYTES, crypto.SIGNATURE_BYTES)))
_ENTRY = {name: Bytes(size) for name, size in ENTRY_BYTES.items()}
ROSTER_ENTRY = Record(_ENTRY)
# the shares a party was dealt by one dealer, and their digests, which the dealer signs
SHARE = Bytes(SHARE_BYTES)
DEALT = Record(dict.fromkeys(SHARED, SHARE))
DIGESTS = Record(dict.fromkeys(SHARED, Bytes(crypto.DIGEST_BYTES)))
MESSAGES: dict[str, Shape] = {
    "keys": Record(dict(party=Index(), **_ENTRY)),
    "shares": Record(dict(party=Index(), sealed=ByParty(Bytes(SEALED_BYTES)),
                          digests=ByParty(DIGESTS), signature=Bytes(crypto.SIGNATURE_BYTES))),
    "masked": Record(dict(party=Index(), masked=Words())),
    "confirm": Record(dict(party=Index(), signature=Bytes(crypto.SIGNATURE_BYTES))),
    "unmask": Record(dict(party=Index(), seed_shares=ByParty(SHARE),
                          mask_shares=ByParty(SHARE))),
    "roster": ByParty(ROSTER_ENTRY),
    "routed": ByParty(Record(dict(sealed=Bytes(SEALED_BYTES), digests=DIGESTS))),
    "survivors": Indices(tuple),
    "request": Record(dict(survivors=Indices(list), dropped=Indices(list),
                           signatures=ByParty(Bytes(crypto.SIGNATURE_BYTES)))),
}
TO_COORDINATOR = ("keys", "shares", "masked", "confirm", "unmask")


def _document(header: Mapping[str, str], agreement: Agreement, content: Any) -> bytes:
    return json.dumps(dict(header, session=agreement.session.hex(), content=content,
                           digest=_digest(content)), separators=(",", ":")).encode()


def _digest(content: Any) -> str:
    """The digest of a document's content, as JSON of its writing (hex)."""
    return crypto.digest(json.dumps(content, separators=(",", ":")).encode()).hex()


def dump(header: Mapping[str, str], shape: Shape, value: Any, agreement: Agreement,
         root: str) -> bytes:
    """The bytes of a document: `header`'s fields, the session, and `value` as its
    content, named `root` in refusals. A value not of `shape` raises a ValueError
    naming the field."""

    def refuse(field: str, reason: str) -> Exception:
        return ValueError(f"Cannot write the {root} of the secure sum: {field}: {reason}.")

    return _document(header, agreement, shape.write(value, Place(agreement, refuse, root)))


def parse(header: Mapping[str, str], content_bound: int, data: Any, agreement: Agreement,
          refuse: Callable[[str, str], Exception]) -> Any:
    """The JSON content of the document `data`, once its size (its header's and at most
    `content_bound` bytes of content) and its header are what `header` and the
    agreement allow (its shape's `read` then checks the content)."""
    bound = len(_document(header, agreement, 0)) + content_bound + _SLACK
    if not isinstance(data, bytes):
        raise refuse("bytes", f"a {type(data).__name__}, not bytes")
    if len(data) > bound:
        raise refuse("bytes", f"{len(data)} bytes, more than the {bound} it can take")
    try:
        document = json.loads(data.decode("utf-8"), object_pairs_hook=_each_key_once,
                              parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:
        raise refuse("bytes", f"not UTF-8 JSON ({_brief(str(error))}): cut short, or "
                     "not a file of the secure sum; ask for the intact file") from None
    if not isinstance(document, dict):
        raise refuse("bytes", "not a JSON object")
    expected = dict(header, session=agreement.session.hex())
    for name, value in expected.items():
        if document.get(name) != value:
            raise refuse(name, f"not {value!r}")
    for name in document:
        if name not in expected and name not in ("content", "digest"):
            raise refuse(_brief(name), "not a field of this document")
    if "content" not in document:
        raise refuse("content", "missing")
    if document.get("digest") != _digest(document["content"]):
        raise refuse("digest", "not the digest of its content: its bytes changed after "
                     "they were written (cut short, or altered on the way); ask for the "
                     "intact file")
    return document["content"]


def load(header: Mapping[str, str], shape: Shape, data: Any, agreement: Agreement,
         root: str, refuse: Callable[[str, str], Exception]) -> Any:
    """The value of `shape` that `data` holds, as `dump` wrote it; anything else is
    refused with ``refuse(field, reason)``."""
    content = parse(header, shape.bound(agreement), data, agreement, refuse)
    return shape.read(content, Place(agreement, refuse, root))


def _each_key_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise ValueError("a key appears twice in one object")
    return dict(pairs)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number of this format")


def message_to_bytes(stage: str, message: Any, agreement: Agreement) -> bytes:
    """The bytes of a message of the secure sum.

    Parameters
    ----------
    stage : str
        The message's stage, one of `MESSAGES`: ``keys``, ``shares``, ``masked``,
        ``confirm``, ``unmask`` (a party's, to the coordinator); ``roster``, ``routed``,
        ``survivors``, ``request`` (the coordinator's, to a party).
    message : object
        The message as the party's or the coordinator's method gives it (for ``routed``,
        one recipient's entry).
    agreement : Agreement
        The sum, whose session the bytes name.

    Returns
    -------
    bytes
        UTF-8 JSON naming the format, the stage and the session.

    Raises
    ------
    ValueError
        A message not of its stage's shape, naming the field.
    """
    return dump(_header(stage), MESSAGES[stage], message, agreement, stage)


def message_from_bytes(stage: str, data: bytes, agreement: Agreement,
                       reader: int | None = None) -> Any:
    """The message of `stage` that `data` holds, as the methods that take it expect it.

    Parameters
    ----------
    stage : str
        The stage the reader expects, one of `MESSAGES`.
    data : bytes
        What arrived, read as hostile.
    agreement : Agreement
        The sum, whose session the bytes must name.
    reader : int or None, default=None
        The index of the party that reads the coordinator's messages (``roster``,
        ``routed``, ``survivors``, ``request``); None for the coordinator, which reads
        the parties' messages.

    Returns
    -------
    object
        A dict (``survivors``: a tuple of parties) of ints, bytes, dicts of int to bytes
        and word arrays, as `message_to_bytes` was given it.

    Raises
    ------
    SecureSumError
        Bytes over the size a message of `stage` in this sum can take, not UTF-8 JSON,
        of another format, stage or session, or of another shape, naming the field (the
        sender, where the refused message names a party of the sum).
    """
    header = _header(stage)
    if (reader is None) != (stage in TO_COORDINATOR):
        raise ValueError(f"The coordinator reads the messages {TO_COORDINATOR}, a party "
                         f"the others: {stage!r} read by {reader!r}.")
    refused_by = None if reader is None else agreement.name(reader)
    sender: Hashable = None  # named once the content names a party of the sum

    def refuse(field: str, reason: str) -> Exception:
        return SecureSumError(refused_by, sender, field, reason)

    # bounded by the largest message of the sum: one of another stage is refused by its
    # stage, which says what was mixed up, not by its size
    content = parse(header, max(shape.bound(agreement) for shape in MESSAGES.values()),
                    data, agreement, refuse)
    party = content.get("party") if reader is None and isinstance(content, dict) else None
    if type(party) is int and 0 <= party < len(agreement.parties):
        sender = agreement.name(party)
    return MESSAGES[stage].read(content, Place(agreement, refuse, stage))


def _header(stage: str) -> dict[str, str]:
    if stage not in MESSAGES:
        raise ValueError(f"The secure sum's messages are {', '.join(MESSAGES)}; got "
                         f"{stage!r}.")
    return dict(format=MESSAGE_FORMAT, stage=stage)

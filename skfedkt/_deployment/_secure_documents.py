"""The documents of a secure deployment (its session, a party's and the coordinator's
state), read as hostile: UTF-8 JSON of a bounded size, each key once, no constant
outside JSON, every field checked, a misfit refused naming the document and field."""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ._channel import Layout

# the most words a secure sum of a deployment adds
MAX_WORDS = 2 ** 26


class Document:
    """A refusal that names the document and the field, for documents read here."""

    def __init__(self, what: str):
        self.what = what

    def refuse(self, field: str, reason: str) -> ValueError:
        return ValueError(f"{self.what}, {field}: {reason}.")

    def parse(self, data: Any, max_bytes: int, format_: str) -> dict[str, Any]:
        if not isinstance(data, (bytes, bytearray)):
            raise self.refuse("bytes", f"a {type(data).__name__}, not bytes")
        if len(data) > max_bytes:
            raise self.refuse("bytes", f"{len(data)} bytes, more than {max_bytes}")
        try:
            document = json.loads(bytes(data).decode("utf-8"),
                                  object_pairs_hook=_each_key_once,
                                  parse_constant=_no_constant)
        except (ValueError, RecursionError) as error:
            raise self.refuse("bytes", f"not UTF-8 JSON ({str(error)[:60]})") from None
        if not isinstance(document, dict):
            raise self.refuse("bytes", "not a JSON object")
        if document.get("format") != format_:
            raise self.refuse("format", f"not {format_!r}")
        return document

    def fields(self, document: Mapping[str, Any], names: Sequence[str]) -> None:
        for name in document:
            if name not in names:
                raise self.refuse(str(name)[:40], "not a field of this document")
        for name in names:
            if name not in document:
                raise self.refuse(name, "missing")

    def count(self, value: Any, field: str, low: int, high: int) -> int:
        if type(value) is not int or not low <= value <= high:
            raise self.refuse(field, f"not an integer from {low} to {high}")
        return value

    def digest(self, value: Any, field: str) -> str:
        if not is_hex32(value):
            raise self.refuse(field, "not a digest of 32 bytes in hexadecimal")
        return value

    def raw(self, value: Any, field: str, size: int | None = None) -> bytes:
        try:
            raw = base64.b64decode(value, validate=True) if isinstance(value, str) else None
        except (binascii.Error, ValueError):
            raw = None
        if raw is None or size is not None and len(raw) != size:
            raise self.refuse(field, "not base64" if size is None
                              else f"not {size} bytes in base64")
        return raw


def _each_key_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({name for name, _ in pairs}) != len(pairs):
        raise ValueError("a key appears twice in one object")
    return dict(pairs)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number of this format")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def is_hex32(value: Any) -> bool:
    """Whether `value` is 32 bytes in lowercase hexadecimal (a digest, a session, a
    public key, as the documents write them)."""
    return (isinstance(value, str) and len(value) == 64
            and all(c in "0123456789abcdef" for c in value))


def dumps(document: Mapping[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def layout_json(layout: Layout) -> list[list[Any]]:
    return [[name, list(shape), kind] for name, shape, kind in layout]


def layout_read(value: Any, reader: Document) -> Layout:
    """The layout of sums written by `_layout_json`, of at most `MAX_WORDS` words."""
    if not isinstance(value, list) or len(value) > 64:
        raise reader.refuse("sums", "not a list of at most 64 sums")
    layout: Layout = []
    for entry in value:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)
                and len(entry[0]) <= 64 and entry[2] in ("i", "f")
                and isinstance(entry[1], list) and len(entry[1]) <= 4
                and all(type(size) is int and 0 <= size <= MAX_WORDS
                        for size in entry[1])):
            raise reader.refuse("sums", "not a sum's name, shape and kind")
        layout.append((entry[0], tuple(entry[1]), entry[2]))
    names = [name for name, _, _ in layout]
    if names != sorted(set(names)):
        raise reader.refuse("sums", "names not sorted, or named twice")
    if sum(math.prod(shape) for _, shape, _ in layout) > MAX_WORDS:
        raise reader.refuse("sums", f"more than {MAX_WORDS} words")
    return layout


def majority(values: list[Any]) -> Any:
    """The value most of `values` share (the first seen among equals): the round and the
    sums of most uploads, against which the odd one out is refused."""
    return max(values, key=values.count)


def party_and_round(parties: Sequence[Any], manifest: Any,
                    ) -> tuple[Any, int, tuple[str, str] | None]:
    """An upload manifest's party (one of `parties`) and round, and what is wrong with
    them (the field and why), or None."""
    party = manifest.get("party") if isinstance(manifest, Mapping) else None
    if isinstance(party, bool) or not isinstance(party, (str, int)) or (
            party not in parties):
        return (party if isinstance(party, (str, int)) else None, 0,
                ("party", "not a party of the secure session"))
    round_ = manifest.get("round", 0)
    if type(round_) is not int or not 0 <= round_ < 2 ** 31:
        return party, 0, ("round", "not a round from 0 to 2**31 - 1")
    return party, round_, None


def started_round(data: bytes, format_: str, session: str, who: str) -> int | None:
    """The round a saved state of `format_` (a party's or the coordinator's) started in
    the session named `session` (hex); None for a state of another session."""
    reader = Document(f"{who}'s secure state refused")
    document = reader.parse(data, 1 << 30, format_)
    if document.get("session") != session:
        return None
    return reader.count(document.get("round"), "round", 0, 2 ** 31)

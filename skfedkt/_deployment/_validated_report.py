"""Validated sums in a deployment: what every side agrees on (the sums' specs, what a
party signs, where its shares for the helper are sealed), and each party's report in its
upload (`party_report`). `_validated_coordinator` and `_validated_helper` are the two
aggregators' sides.

A party step under a session that names a helper writes, in its upload, one Prio3
report per sum: in the manifest the joint randomness parts and the helper's shares
sealed to the helper's key (HPKE), in the payload the leader's share (the
coordinator's), all signed by the party's identity. Nothing of it stays at the party: a
party that drops after its upload costs the sum nothing. Neither aggregator sees a
party's values: the coordinator holds one share of each, the helper the other, and
each proof's check reveals only its verdict.

Every document read here is bounded in size and parsed strictly, its refusals naming
the party and the field.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from .._secure_sum._primitives import digest
from .._validated_sum._sealing import seal_to
from .._validated_sum._sums import SumSpec, ValidatedSum, party_reports
from ._channel import Layout
from ._secure_documents import MAX_WORDS, Document, b64, dumps, layout_json

_REPORT = b"skfedkt validated report 1"
SHARE_INFO, KEY_INFO = b"skfedkt validated share ", b"skfedkt verify key "
REQUEST_FORMAT = "skfedkt validated request 1"
ANSWER_FORMAT = "skfedkt validated answer 1"
# a request holds a few hundred bytes a party and sum; an answer the helper's totals
MAX_DOCUMENT_BYTES = 1 << 30
MAX_REASON = 300  # characters of a refusal the helper gives
# the most field elements a party's encoded input takes: each bit of each value is one
_MAX_ENCODED = 1 << 26
REPORT_FIELDS = ("session", "sums", "specs", "parts", "helper", "signature")


def specs_json(specs: Sequence[SumSpec]) -> list[list[Any]]:
    return [[spec.name, list(spec.shape), spec.scale, spec.offset, spec.max_measurement,
             None if spec.row_totals is None else list(spec.row_totals), spec.at_most,
             spec.multiple, None if spec.norms is None else list(spec.norms)]
            for spec in specs]


def specs_read(value: Any, reader: Document, n_parties: int) -> tuple[SumSpec, ...]:
    """The specs `specs_json` wrote, each field checked, of a bounded size to prove."""

    def count(item: Any, low: int = 0) -> bool:
        return type(item) is int and low <= item < 2 ** 62

    def per_party(item: Any, low: int = 0) -> bool:
        return item is None or isinstance(item, list) and len(item) == n_parties and all(
            count(each, low) for each in item)

    if not isinstance(value, list) or len(value) > 64:
        raise reader.refuse("specs", "not a list of at most 64 sums")
    specs, encoded = [], 0
    for entry in value:
        if not (isinstance(entry, list) and len(entry) == 9 and isinstance(entry[0], str)
                and 0 < len(entry[0]) <= 64 and isinstance(entry[1], list)
                and len(entry[1]) <= 4 and all(count(size) and size <= MAX_WORDS
                                               for size in entry[1])
                and count(entry[2], 1) and count(entry[3]) and count(entry[4], 1)
                and isinstance(entry[6], bool) and count(entry[7], 1)
                and per_party(entry[5]) and per_party(entry[8], 1)):
            raise reader.refuse("specs", "not a sum's name, shape, scale, offset, range, "
                                "row totals (one per party), ceiling, multiple and norms "
                                "(one per party)")
        spec = SumSpec(entry[0], tuple(entry[1]), entry[2], entry[3], entry[4],
                       None if entry[5] is None else tuple(entry[5]), entry[6], entry[7],
                       None if entry[8] is None else tuple(entry[8]))
        if spec.at_most and spec.row_totals is None:
            raise reader.refuse(f"specs.{spec.name}", "a ceiling without row totals")
        if spec.norms is not None and spec.row_totals is not None:
            raise reader.refuse(f"specs.{spec.name}", "row totals and norms at once")
        encoded += spec.length * spec.max_measurement.bit_length() + (
            0 if spec.norms is None else max(spec.norms).bit_length())
        specs.append(spec)
    names = [spec.name for spec in specs]
    if names != sorted(set(names)):
        raise reader.refuse("specs", "names not sorted, or named twice")
    if encoded > _MAX_ENCODED:
        raise reader.refuse("specs", f"more than {_MAX_ENCODED} bits of values to prove")
    return tuple(specs)


def specs_digest(specs: Sequence[SumSpec]) -> bytes:
    return digest(dumps({"specs": specs_json(specs)}))


def agreement_of(session: Any, round_: int, specs: Sequence[SumSpec]) -> ValidatedSum:
    """One round's validated sum of `session`'s parties: its nonces and context are the
    round's, so that no report passes for another round's."""
    return ValidatedSum(session.round_session(round_), session.parties, tuple(specs))


def signed_report(round_session: bytes, index: int, specs: bytes, parts: Sequence[bytes],
            leader: Sequence[bytes], sealed: bytes) -> bytes:
    """What a party signs of its report: the round, itself, the specs, each sum's joint
    randomness parts and the digest of its leader share, and its sealed helper shares."""
    return digest(_REPORT, round_session, index.to_bytes(4, "big"), specs, *parts, *leader,
                  sealed)


def share_context(round_session: bytes, index: int, specs: bytes) -> tuple[bytes, bytes]:
    """The HPKE info and associated data of a party's sealed helper shares."""
    return SHARE_INFO + round_session, index.to_bytes(4, "big") + specs


def party_report(session: Any, round_: int, party: Hashable, identity_key: Any,
                 specs: Sequence[SumSpec], layout: Layout, terms: Mapping[str, np.ndarray],
                 ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A party's report of its sums `terms` (scaled by its weight already) for round
    `round_` of `session`: the manifest's secure field, signed by its identity, and its
    leader shares (the payload's `LEADER_SHARES`)."""
    index = session.index_of(party, f"Party {party!r}")
    agreement = agreement_of(session, round_, specs)
    to_leader, to_helper = party_reports(agreement, index, terms)
    names = [spec.name for spec in specs]
    specs_bytes = specs_digest(specs)
    info, associated = share_context(agreement.session, index, specs_bytes)
    sealed = seal_to(session.helper, info, b"".join(to_helper[name].share for name in names),
                     associated)
    signed = signed_report(agreement.session, index, specs_bytes,
                     [to_leader[name].parts for name in names],
                     [digest(to_leader[name].share) for name in names], sealed)
    return (dict(session=agreement.session.hex(), sums=layout_json(layout),
                 specs=specs_json(specs),
                 parts={name: b64(to_leader[name].parts) for name in names},
                 helper=b64(sealed), signature=b64(identity_key.sign(signed))),
            {name: np.frombuffer(to_leader[name].share, dtype=np.uint8) for name in names})



"""What the parties send in sum only, summed securely: each party's ``"sums"`` (named
arrays of integers, or of floats within an agreed bound) leave it masked, and the server
receives their total and the uploads without them (`secure_aggregation`)."""

from __future__ import annotations

import math
import secrets
from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .._secure_sum import (
    Agreement,
    FixedPoint,
    decode_integers,
    default_threshold,
    encode_integers,
    run_secure_sum,
)
from ._upload import PartyUpload

# the payload key of what a party sends in sum only
SUMS = "sums"
# fixed-point resolution of float terms, coarser only where the sum would overflow
_FINEST_SCALE = 2.0 ** 32


def fixed_point_for(n_parties: int, bound: float) -> FixedPoint:
    """The fixed-point encoding of floats within `bound` that `n_parties` can sum in
    64 bits: the finest power-of-two scale up to 2**32 that leaves a bit to spare."""
    room = math.floor(62 - math.log2(max(n_parties * bound, 1e-300)))
    return FixedPoint(scale=min(_FINEST_SCALE, 2.0 ** room), bound=bound)


def float_bound_of(declared: Any, plan: Any, data: Any) -> float:
    """The bound on the floats the parties of `data` (`FederatedData`) sum, which the
    algorithm's `SecureSums` (`declared`) gives for `plan`; refused, before any work,
    for fewer than 3 parties."""
    if len(data.parties) < 3:
        raise ValueError(f"secure_aggregation needs at least 3 parties, got "
                         f"{len(data.parties)}: with two, each learns the other's input "
                         "from the sum. Fit with more parties, or turn it off "
                         "(skfedkt.set_config(secure_aggregation=False)).")
    return float(declared.float_bound(plan, max(map(len, data.party_rows))))


def securely_summed(uploads: Sequence[Any], parties: Sequence[Hashable], float_bound: float,
                    ) -> tuple[list[PartyUpload], dict[str, np.ndarray], np.ndarray]:
    """The uploads without their ``"sums"``, the sums' totals by name, summed by a
    secure sum of the parties (`parties`, aligned with `uploads`) in one process, and
    the bytes each party sent in it."""
    terms = [upload.payload.get(SUMS) for upload in uploads]
    if not any(terms):  # nothing to sum this round (a final step that sends nothing)
        return list(uploads), {}, np.zeros(len(parties), dtype=np.int64)
    layout = _layout(terms[0] or {}, parties[0])
    for party, party_terms in zip(parties, terms):
        if _layout(party_terms or {}, party) != layout:
            raise ValueError(f"Party {party!r}'s sums are not the others': every party "
                             "sends the same names, shapes and kinds of numbers.")
    encoding = fixed_point_for(len(parties), float_bound)
    length = sum(int(np.prod(shape)) for _, shape, _ in layout)
    agreement = Agreement(secrets.token_bytes(32), tuple(parties),
                          default_threshold(len(parties)), max(length, 1))
    words = {index: np.concatenate([
        encode_integers(party_terms[name]) if kind == "i"
        else encoding.encode(party_terms[name]) for name, _, kind in layout]
        or [np.zeros(1, dtype="<u8")]) for index, party_terms in enumerate(terms)}
    run = run_secure_sum(agreement, words)
    total = run.total
    sums, start = {}, 0
    for name, shape, kind in layout:
        size = int(np.prod(shape))
        part = total[start:start + size]
        sums[name] = (decode_integers(part) if kind == "i" else encoding.decode(part)
                      ).reshape(shape)
        start += size
    stripped = [replace(upload, payload={key: value for key, value in upload.payload.items()
                                         if key != SUMS}) for upload in uploads]
    sent = np.zeros(len(parties), dtype=np.int64)
    for messages in run.received.values():
        for message in messages:
            sent[message["party"]] += _n_bytes(message)
    return stripped, sums, sent


def _n_bytes(value: Any) -> int:
    """The bytes of the keys, seeds, shares and words a message holds."""
    if isinstance(value, dict):
        return sum(_n_bytes(item) for item in value.values())
    if isinstance(value, (bytes, np.ndarray)):
        return len(value) if isinstance(value, bytes) else value.nbytes
    return 4  # a party's index


def _layout(terms: dict[str, Any], party: Hashable) -> list[tuple[str, tuple, str]]:
    layout = []
    for name in sorted(terms):
        values = np.asarray(terms[name])
        if values.dtype.kind not in "iubf":
            raise ValueError(f"Party {party!r}'s sum {name!r} holds {values.dtype}, not "
                             "numbers.")
        layout.append((name, values.shape, "f" if values.dtype.kind == "f" else "i"))
    return layout

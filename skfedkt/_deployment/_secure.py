"""What the parties send in the sum, summed securely in `fit`'s one process: each
party's ``"sums"`` (named arrays of integers, or of floats within an agreed bound) leave
it masked, and the server receives their total and the uploads without them
(`secure_aggregation`); and the encoding of sums as words."""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._engine._context import SumParties
from .._secure_sum import (
    Agreement,
    FixedPoint,
    decode_integers,
    default_colluding,
    default_threshold,
    encode_integers,
    new_identities,
    run_secure_sum,
)
from ._channel import (
    Channel,
    Layout,
    layout_length,
    sums_layout,
    weighted_terms,
    without_sums,
)
from ._upload import SUMS, PartyUpload

# fixed-point resolution of float terms, coarser only where the sum would overflow
_FINEST_SCALE = 2.0 ** 32


def fixed_point_for(n_parties: int, bound: float) -> FixedPoint:
    """The fixed-point encoding of floats within `bound` that `n_parties` can sum in
    64 bits: the finest power-of-two scale up to 2**32 that leaves a bit to spare."""
    room = math.floor(62 - math.log2(max(n_parties * bound, 1e-300)))
    return FixedPoint(scale=2.0 ** min(math.log2(_FINEST_SCALE), room), bound=bound,
                      parties=n_parties)


def secure_parties(channel: Channel, plan: Any, data: Any,
                   validated: bool = False) -> tuple[SumParties, float]:
    """The parties of `data` (`FederatedData`) as one secure sum holds them (the
    default threshold, and as many colluding parties as it withstands; `validated`:
    the sum that checks each party's proofs), and the bound on the floats they sum,
    which the algorithm's `channel` gives for `plan`; refused, before any work, for
    fewer than 3 parties."""
    if len(data.parties) < 3:
        raise ValueError(f"secure_aggregation needs at least 3 parties, got "
                         f"{len(data.parties)}: with two, each learns the other's input "
                         "from the sum. Fit with more parties, or turn it off "
                         "(skfedkt.set_config(secure_aggregation=False)).")
    rows = tuple(map(len, data.party_rows))
    channel.check_fits(plan, len(rows), max(rows))
    threshold = default_threshold(len(rows))
    return (SumParties(tuple(data.parties), rows, threshold,
                       default_colluding(len(rows), threshold), validated),
            channel.float_bound(plan, max(rows)))


def securely_summed(uploads: Sequence[Any], parties: SumParties, float_bound: float,
                    channel: Channel, plan: Any,
                    ) -> tuple[list[PartyUpload], dict[str, np.ndarray], np.ndarray]:
    """The uploads without their ``"sums"``, the sums' totals by name, summed by a
    secure sum of `parties` (aligned with `uploads`) in one process, each party's
    weighted sums scaled by its weight first, as it does itself; and the bytes each
    party sent in it."""
    names = parties.parties
    weights = channel.weights(plan, names, parties.party_rows, claimed=False)
    terms = [weighted_terms(upload.payload.get(SUMS) or {}, channel.fields, weight)
             for upload, weight in zip(uploads, weights)]
    stripped = [without_sums(upload) for upload in uploads]
    if not any(terms):  # nothing to sum this round (a final step that sends nothing)
        return stripped, {}, np.zeros(len(names), dtype=np.int64)
    layout = sums_layout(terms[0])
    for party, party_terms in zip(names, terms):
        if sums_layout(party_terms) != layout:
            raise ValueError(f"Party {party!r}'s sums are not the others': every party "
                             "sends the same names, shapes and kinds of numbers.")
    encoding = fixed_point_for(len(names), float_bound)
    # one process: every party's identity is made here, for this sum alone
    identity_keys, identities = new_identities(len(names))
    agreement = Agreement(secrets.token_bytes(32), tuple(names), parties.threshold,
                          layout_length(layout), identities)
    run = run_secure_sum(agreement, identity_keys,
                         {index: encoded(party_terms, layout, encoding)
                          for index, party_terms in enumerate(terms)})
    sent = np.zeros(len(names), dtype=np.int64)
    for messages in run.received.values():
        for message in messages:
            sent[message["party"]] += _n_bytes(message)
    return stripped, decoded(run.total, layout, encoding), sent


def encoded(terms: dict[str, Any], layout: Layout, encoding: FixedPoint) -> np.ndarray:
    """The words of a party's sums, in `layout`'s order: integers exactly, floats in
    fixed point."""
    words = [encode_integers(terms[name]) if kind == "i" else encoding.encode(terms[name])
             for name, _, kind in layout]
    return np.concatenate(words) if words else np.zeros(1, dtype="<u8")


def decoded(total: np.ndarray, layout: Layout, encoding: FixedPoint,
            ) -> dict[str, np.ndarray]:
    """The sums, by name, that the words `total` hold."""
    sums, start = {}, 0
    for name, shape, kind in layout:
        size = math.prod(shape)
        part = total[start:start + size]
        sums[name] = (decode_integers(part) if kind == "i" else encoding.decode(part)
                      ).reshape(shape)
        start += size
    return sums


def _n_bytes(value: Any) -> int:
    """The bytes of the keys, seeds, shares and words a message holds."""
    if isinstance(value, dict):
        return sum(_n_bytes(item) for item in value.values())
    if isinstance(value, (bytes, np.ndarray)):
        return len(value) if isinstance(value, bytes) else value.nbytes
    return 4  # a party's index

"""What the parties send in the sum, validated in `fit`'s one process: each party's
``"sums"`` leave it as shares for two aggregators with proofs that every value is what
its declaration allows (`InSum.bound` and `Validity`: ranges, rows that add up); the
aggregators check the proofs on their shares, and the server receives the total of the
parties whose proofs all passed, and their uploads without the sums. A party whose
proof fails is named, warned of, and left out of the round."""

from __future__ import annotations

import math
import secrets
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._config import get_config
from .._engine._context import SumParties
from .._validated_sum._field import FIELD64
from .._validated_sum._simulation import run_validated_sum
from .._validated_sum._sums import SumSpec, ValidatedSum
from ._channel import Channel, Layout, sums_layout, weighted_terms, without_sums
from ._fields import InSum, Validity, sum_field
from ._upload import SUMS, PartyUpload

# fixed-point fraction bits of floats under validated sums, fewer only where the field
# would overflow: each bit is a bit of every value a party proves in range
FRACTION_BITS = 16


def check_session_mode(session: Any) -> None:
    """Refuse a deployed step whose secure session's mode (validated where it names a
    helper) is not the one ``secure_aggregation`` sets."""
    mode = get_config()["secure_aggregation"]
    if (mode == "validated") != (session.helper is not None):
        raise ValueError(
            f"The secure session runs the {session.mode} sum, but secure_aggregation is "
            f"{mode!r}: run the step under skfedkt.config_context(secure_aggregation="
            f"{session.mode!r}), the session's mode (a session that names a helper is "
            "validated).")


def session_specs(channel: Channel, plan: Any, session: Any,
                  layout: Layout) -> tuple[SumSpec, ...]:
    """What each sum of `layout` must hold at every party of a deployed `session`."""
    weights = channel.weights(plan, session.parties, session.party_rows, claimed=False)
    return sum_specs(channel, plan, layout, weights, session.party_rows)


class RefusedPartyWarning(UserWarning):
    """A party's proof failed under validated sums: it is left out of the round."""


def sum_specs(channel: Channel, plan: Any, layout: Layout, weights: np.ndarray,
              party_rows: Sequence[int]) -> tuple[SumSpec, ...]:
    """What each sum of `layout` must hold at every party (of `party_rows` rows), from
    its declaration: its range in fixed point (floats) or exactly (integers), the total
    of its rows and its L2 norm, scaled by each party's weight where the sum is
    weighted."""
    n_parties, max_rows, specs = len(weights), max(party_rows), []
    for name, shape, kind in layout:
        field = sum_field(channel.fields, name)
        assert isinstance(field, InSum), f"{name} is a declared sum"
        validity = field.valid if isinstance(field.valid, Validity) else None
        party_weights = weights if field.weighted else np.ones(n_parties)
        bound = float(field.bound(plan, max_rows))
        found = [] if validity is None else [validity.norm_of(plan, rows)
                                             for rows in party_rows]
        bounded = [float(norm) for norm in found if norm is not None]
        norms = ([norm * weight for norm, weight in zip(bounded, party_weights)]
                 if bounded and len(bounded) == len(found) else None)
        length = math.prod(shape)
        if norms is not None:
            bound = min(bound, max(norms))  # no value exceeds the array's norm
        scale = 1 if kind == "i" else field.units or _scale(
            bound, n_parties, None if norms is None else (length, max(norms)))
        multiple = (validity.multiple_of(plan) if validity is not None and kind == "i"
                    and validity.multiple_of is not None else 1)
        high = math.ceil(bound * scale / multiple)
        nonnegative = validity is not None and validity.nonnegative
        totals = None
        if validity is not None and validity.row_total is not None:
            total = validity.row_total(plan) * scale / multiple
            totals = tuple(int(round(total * weight)) for weight in party_weights)
            high = max(high, max(totals))
        # each value's rounding moves the norm by at most half a unit in its direction
        squares = None if norms is None else tuple(
            math.ceil((norm * scale + math.sqrt(length) / 2) ** 2) for norm in norms)
        specs.append(SumSpec(name, tuple(shape), scale, 0 if nonnegative else high,
                             high if nonnegative else 2 * high, totals,
                             validity is not None and validity.at_most, multiple, squares))
    return tuple(specs)


def _scale(bound: float, n_parties: int, normed: tuple[int, float] | None = None) -> int:
    """2 ** FRACTION_BITS, or less where `n_parties` values in [-bound, bound] in that
    fixed point would not add up within the field, or, for an array whose norm is
    proved (`normed`: its length and the largest norm), their squares would not."""
    room = math.floor(math.log2(FIELD64.modulus / (n_parties * (2 * bound + 1)))) - 1
    if normed is not None:  # (length + 1) squares of the largest norm in units < 2**62
        length, norm = normed
        largest = 2 ** 31 / math.sqrt(length + 1) - math.sqrt(length)
        room = min(room, math.floor(math.log2(max(largest / norm, 1e-300))))
    if room < 0:
        raise ValueError(f"{n_parties} parties' values up to {bound:g} do not fit a "
                         "validated sum's field even as integers.")
    return 2 ** min(FRACTION_BITS, room)


def validated_summed(uploads: Sequence[PartyUpload], parties: SumParties, channel: Channel,
                     plan: Any) -> tuple[list[PartyUpload], dict[str, np.ndarray], np.ndarray]:
    """The uploads of the parties whose proofs passed, without their ``"sums"``, the
    total of those parties' sums by name, and the bytes each party sent the two
    aggregators; each refused party named in a `RefusedPartyWarning`."""
    names = parties.parties
    weights = channel.weights(plan, names, parties.party_rows, claimed=False)
    terms = [weighted_terms(upload.payload.get(SUMS) or {}, channel.fields, weight)
             for upload, weight in zip(uploads, weights)]
    stripped = [without_sums(upload) for upload in uploads]
    if not any(terms):
        return stripped, {}, np.zeros(len(names), dtype=np.int64)
    layout = sums_layout(terms[0])
    agreement = ValidatedSum(secrets.token_bytes(32), tuple(names),
                             sum_specs(channel, plan, layout, weights,
                                       parties.party_rows))
    for index, party_terms in enumerate(terms):
        if sums_layout(party_terms) != layout:
            raise ValueError(f"Party {names[index]!r}'s sums are not the others': every "
                             "party sends the same names, shapes and kinds of numbers.")
    run = run_validated_sum(agreement, terms, n_jobs=plan.n_jobs)
    for refusal in run.refused.values():
        warnings.warn(f"{refusal} It is left out of this round's sums and uploads.",
                      RefusedPartyWarning, stacklevel=2)
    if len(run.accepted) < parties.threshold:
        raise ValueError(f"Validated sum: {len(run.accepted)} of {len(names)} parties' "
                         f"proofs passed, fewer than the {parties.threshold} agreed.")
    sums = {name: run.totals[name].astype(np.int64) if kind == "i" else run.totals[name]
            for name, _, kind in layout}
    return [stripped[index] for index in run.accepted], sums, run.sent

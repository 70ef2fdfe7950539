"""Where the sums a server step reads come from, with secure aggregation on or off: in
`fit`, the party steps' uploads added in the clear or by a secure sum in one process
(`summed_in_fit`); at a deployed party, its upload handed to its side of the secure sum
(`sent_securely`); on a deployed server, the uploads collected and checked, then added
in the clear or taken from the finished secure sum (`received`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .._engine._context import SumParties
from ._channel import (
    Channel,
    check_fields,
    refuse_odd_layouts,
    summed_in_clear,
    sums_layout,
    weighted_terms,
    without_sums,
)
from ._ledger import input_digest
from ._protocol import collect_uploads
from ._received import UploadChecker
from ._secure import securely_summed
from ._secure_coordinator import SecureCoordinator, round_sums, surviving_uploads
from ._secure_stages import SECURE, SecureParty, SecureSession
from ._upload import LEADER_SHARES, SUMS, PartyUpload
from ._validated import session_specs, validated_summed
from ._validated_coordinator import ValidatedCoordinator
from ._validated_report import party_report


def summed_in_fit(uploads: Sequence[PartyUpload], channel: Channel, plan: Any,
                  sum_parties: SumParties | None, float_bound: float,
                  ) -> tuple[list[PartyUpload], dict[str, np.ndarray], np.ndarray]:
    """One round of `fit`: the uploads without their sums, the sums' total, and the
    bytes each party sent of them: its sums' arrays in the clear, or under secure
    aggregation (`sum_parties`, of floats within `float_bound`) its secure sum's
    messages."""
    if sum_parties is not None and sum_parties.validated:
        return validated_summed(uploads, sum_parties, channel, plan)
    if sum_parties is not None:
        return securely_summed(uploads, sum_parties, float_bound, channel, plan)
    kept, sums, odd = summed_in_clear(uploads, channel, plan, claimed=False)
    assert not odd, f"one party step gave sums of two layouts: {odd}"
    return kept, sums, np.array([sum(values.nbytes for values in (
        upload.payload.get(SUMS) or {}).values()) for upload in uploads], dtype=np.int64)


def sent_securely(upload: PartyUpload, channel: Channel, plan: Any, session: SecureSession,
                  identity: Any, data: Any, message: Any) -> PartyUpload:
    """A deployed party's `upload` under secure aggregation: its sums scaled by its
    weight, from every party's rows as `session` agrees them. Masked: kept at the party
    in its ``secure_state`` (a `SecureParty`, which knows its input by its rows `data`,
    its manifest and the server's `message`), its keys signed by its `identity` sent
    instead. Validated: its report, signed by its identity (its leader shares in the
    payload)."""
    party = data.party
    weight = channel.weights(plan, session.parties, session.party_rows, claimed=False)[
        session.index_of(party, "secure_session")]
    terms = weighted_terms(upload.payload.get(SUMS) or {}, channel.fields, weight)
    if session.helper is not None:  # validated: the report is all the party sends
        layout = sums_layout(terms)
        field, shares = party_report(session, upload.manifest.get("round", 0), party,
                                     session.identity_key(party, identity),
                                     session_specs(channel, plan, session, layout), layout,
                                     terms)
        upload = without_sums(upload)
        return replace(upload, manifest=dict(upload.manifest, **{SECURE: field}),
                       payload=dict(upload.payload, **{LEADER_SHARES: shares}))
    upload = replace(upload, payload=dict(upload.payload, **{SUMS: terms}))
    upload, state = SecureParty.start(
        session, upload, identity, noisy=plan.noisy_sums,
        input_=input_digest(data.X, data.y, upload.manifest, message))
    return replace(upload, secure_state=state)


def received(sources: Any, expected: dict[str, Any], channel: Channel, plan: Any,
             check: Callable[[UploadChecker], Any],
             secure_sum: SecureCoordinator | ValidatedCoordinator | None,
             **reading: Any) -> tuple[list[PartyUpload], dict[Any, str], dict[str, Any]]:
    """The uploads a server step fits on (without their sums), the parties left out
    and why, and the total of the parties' sums: added here in the clear, each party's
    sums checked first, or those of the finished secure sum `secure_sum`. Each upload's
    fields are checked by the algorithm's `check`, then as `channel` declares them
    (`check_fields`: its sums, and what secure aggregation withholds)."""
    secure_sums = round_sums(secure_sum)  # refuses a secure_sum out of its mode
    secure = secure_sums is not None
    if isinstance(secure_sum, ValidatedCoordinator):
        secure_sum.check_specs(session_specs(channel, plan, secure_sum.session,
                                             secure_sum.layout))

    def checked(checker: UploadChecker) -> None:
        check(checker)
        check_fields(checker, channel, plan, secure)

    collected = collect_uploads(sources, expected, check=checked,
                                withheld=channel.withheld if secure else frozenset(),
                                **reading)
    if secure_sums is not None:
        uploads, left_out = surviving_uploads(collected, secure_sum)
        return uploads, left_out, secure_sums
    uploads, left_out = collected
    kept, sums, odd = summed_in_clear(uploads, channel, plan, claimed=True)
    refuse_odd_layouts(odd, reading.get("min_parties"), len(kept))
    if odd:
        warnings.warn(f"Proceeding with the {len(kept)} parties whose sums agree; left out "
                      f"{len(odd)}: " + "; ".join(f"{party!r}: {why}"
                                                  for party, why in odd.items()),
                      UserWarning)
    return kept, {**left_out, **odd}, sums

"""A secure sum run in one process: every party and the coordinator as separate objects
that exchange only the messages a deployment would send, which are kept as the
coordinator's transcript."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import _primitives as crypto
from ._agreement import Agreement
from ._coordinator import SecureSumCoordinator
from ._party import SecureSumParty
from ._primitives import Ed25519PrivateKey

STAGES = ("keys", "shares", "masked", "confirm", "unmask")


@dataclass
class SecureSumRun:
    """What a run gives: the sum of the survivors' inputs (words modulo 2**64), the
    survivors, and every message the coordinator received, by stage."""

    total: np.ndarray
    survivors: tuple
    received: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)


def new_identities(n_parties: int) -> tuple[list[Ed25519PrivateKey], tuple[bytes, ...]]:
    """Fresh identity keys of `n_parties`, for a sum run in one process: the private
    keys, one per party, and their public keys, as `Agreement.identities` takes them."""
    keys = [crypto.new_identity_key() for _ in range(n_parties)]
    return keys, tuple(map(crypto.public_bytes, keys))


def run_secure_sum(agreement: Agreement, identity_keys: Sequence[Ed25519PrivateKey],
                   inputs: Mapping[int, np.ndarray],
                   drop_before: Mapping[int, str] | None = None) -> SecureSumRun:
    """The secure sum of `inputs` (each party's words, by index), parties in
    `drop_before` leaving before the stage it names (one of `STAGES`); each party signs
    its keys with its private key of `identity_keys`, whose public keys are the
    agreement's (`new_identities` makes both)."""
    drop_before = dict(drop_before or {})
    unknown = set(drop_before.values()) - set(STAGES)
    if unknown:
        raise ValueError(f"Stages are {STAGES}, got {sorted(unknown)}.")
    parties = {index: SecureSumParty(agreement, index, key)
               for index, key in enumerate(identity_keys)}
    if len(parties) != len(agreement.parties):
        raise ValueError(f"One identity key per party: {len(parties)} for "
                         f"{len(agreement.parties)} parties.")
    coordinator = SecureSumCoordinator(agreement)
    received: dict[str, list[Mapping[str, Any]]] = {stage: [] for stage in STAGES}

    def answering(stage, candidates):
        """The candidates that have not left before `stage`."""
        return [index for index in candidates if index not in drop_before
                or STAGES.index(drop_before[index]) > STAGES.index(stage)]

    def send(stage, messages):
        received[stage] = messages
        return messages

    keys = send("keys", [parties[i].advertise() for i in answering("keys", parties)])
    roster = coordinator.collect_keys(keys)
    shares = send("shares", [parties[i].share_keys(roster)
                             for i in answering("shares", roster)])
    routed = coordinator.route_shares(shares)
    masked = send("masked", [parties[i].masked_input(routed[i], inputs[i])
                             for i in answering("masked", routed)])
    survivors = coordinator.collect_masked(masked)
    confirmations = send("confirm", [parties[i].confirm(survivors)
                                     for i in answering("confirm", survivors)])
    request = coordinator.unmask_request(confirmations)
    confirmed = [message["party"] for message in confirmations]
    unmasked = send("unmask", [parties[i].unmask(**request)
                               for i in answering("unmask", confirmed)])
    return SecureSumRun(coordinator.total(unmasked), survivors, received)

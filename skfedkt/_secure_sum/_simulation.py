"""A secure sum run in one process: every party and the coordinator as separate objects
that exchange only the messages a deployment would send, which are kept as the
coordinator's transcript."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._agreement import Agreement
from ._coordinator import SecureSumCoordinator
from ._party import SecureSumParty

STAGES = ("keys", "shares", "masked", "confirm", "unmask")


@dataclass
class SecureSumRun:
    """What a run gives: the sum of the survivors' inputs (words modulo 2**64), the
    survivors, and every message the coordinator received, by stage."""

    total: np.ndarray
    survivors: tuple
    received: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)


def run_secure_sum(agreement: Agreement, inputs: Mapping[int, np.ndarray],
                   drop_before: Mapping[int, str] | None = None) -> SecureSumRun:
    """The secure sum of `inputs` (each party's words, by index), parties in
    `drop_before` leaving before the stage it names (one of `STAGES`)."""
    drop_before = dict(drop_before or {})
    unknown = set(drop_before.values()) - set(STAGES)
    if unknown:
        raise ValueError(f"Stages are {STAGES}, got {sorted(unknown)}.")
    parties = {index: SecureSumParty(agreement, index) for index in range(len(agreement.parties))}
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

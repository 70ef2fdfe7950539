"""Validated sums of named arrays: what each party's values must be (`SumSpec`), the
shares and proofs a party makes of them, each aggregator's check, and the total of the
parties whose every proof passed.

A party's values become integers in [0, max_measurement]: floats in fixed point (times
``scale``), signed ranges shifted by ``offset``; rows whose total is agreed are rounded so
that each adds up to it exactly, and a row whose total is a ceiling gets one more entry,
the slack, that makes it up. Each sum is one Prio3 report per party (a `RowSumVec` over
Field64), its nonce bound to the session, the party and the sum, so that no report
passes for another.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np

from ._circuits import NormSumVec, RowSumVec, SumVec
from ._field import FIELD64
from ._prio3 import NONCE_SIZE, SEED_SIZE, Prio3, VerifyState

# an algorithm id of the draft's range for private use (0xFFFF0000 and above)
ALGORITHM_ID = 0xFFFF5F01
LEADER, HELPER = 0, 1


class ValidatedSumError(ValueError):
    """A party's share refused: its proof failed, or it is not a share of this sum."""

    def __init__(self, party: Hashable, name: str, reason: str):
        self.party, self.sum_name, self.reason = party, name, reason
        super().__init__(f"Validated sum: the share of party {party!r} for {name!r} was "
                         f"refused: {reason}.")


@dataclass(frozen=True)
class SumSpec:
    """One summed array as every party and both aggregators agree on it.

    A value v is proved as the integer ``v * scale / multiple + offset``, in [0,
    max_measurement]: ``scale`` the fixed point of floats, ``multiple`` where every
    value is a multiple of it (a row of consistent votes: the students, or none).
    ``row_totals``: where each row (the last axis) adds up to an agreed total, that
    total in units, one per party (a party's weight may scale it); ``at_most``: the
    total is a ceiling (one-hot or empty rows), made up by a slack entry. ``norms``:
    where the values' L2 norm is bounded, each party's bound on the sum of their
    squares, in units squared (``value * scale``)."""

    name: str
    shape: tuple[int, ...]
    scale: int
    offset: int
    max_measurement: int
    row_totals: tuple[int, ...] | None = None
    at_most: bool = False
    multiple: int = 1
    norms: tuple[int, ...] | None = None

    @property
    def row_length(self) -> int:
        return (self.shape[-1] if self.shape else 1) + self.at_most

    @property
    def length(self) -> int:
        rows = math.prod(self.shape) // (self.shape[-1] if self.shape else 1)
        return rows * self.row_length if self.row_totals is not None else math.prod(self.shape)

    def units(self, values: np.ndarray, index: int) -> np.ndarray:
        """A party's values as the integers it proves valid (refused where they are not)."""
        values = np.asarray(values, dtype=float).reshape(self.shape)
        scaled = values * self.scale / self.multiple
        if self.multiple != 1 and np.any(scaled != np.rint(scaled)):
            raise ValueError(f"{self.name!r} holds a value that is no multiple of "
                             f"{self.multiple}")
        if self.row_totals is None:
            units = np.rint(scaled).astype(np.int64) + self.offset
        else:
            units = _rounded_rows(scaled.reshape(-1, self.shape[-1] if self.shape else 1),
                                  self.row_totals[index], self.at_most)
        if units.size and (units.min() < 0 or units.max() > self.max_measurement):
            raise ValueError(f"{self.name!r} holds a value outside its agreed range")
        return units.ravel()

    def decoded(self, total: np.ndarray, n_parties: int) -> np.ndarray:
        """The sum of the parties' values, from the sum of their units."""
        units = total.astype(np.int64)
        if self.row_totals is not None:
            units = units.reshape(-1, self.row_length)[:, :self.row_length - self.at_most]
        values = (units.astype(float) - n_parties * self.offset) * self.multiple / self.scale
        return values.reshape(self.shape)


def _rounded_rows(scaled: np.ndarray, total: int, at_most: bool) -> np.ndarray:
    """Rows rounded to integers that add up to `total` exactly (largest remainders
    rounded up), or, where `total` is a ceiling, rounded and followed by their slack."""
    floors = np.floor(scaled).astype(np.int64)
    if at_most:
        rounded = np.rint(scaled).astype(np.int64)
        return np.concatenate([rounded, total - rounded.sum(axis=1, keepdims=True)], axis=1)
    missing = total - floors.sum(axis=1)
    order = np.argsort(-(scaled - floors), axis=1, kind="stable")
    ranks = np.argsort(order, axis=1, kind="stable")
    return floors + (ranks < missing[:, None])


@dataclass(frozen=True)
class ValidatedSum:
    """One validated sum: the session, the parties, and their arrays' `specs`.

    ``proofs``: independent proofs per report (Field64's soundness, each about
    2^-50 against a party that searches for a joint randomness that lets an invalid
    input pass, compounds to about 2^-100 with two)."""

    session: bytes
    parties: tuple[Hashable, ...]
    specs: tuple[SumSpec, ...]
    proofs: int = 2

    def __post_init__(self):
        if not isinstance(self.session, bytes) or len(self.session) < 16:
            raise ValueError("A validated sum's session is at least 16 bytes.")
        for spec in self.specs:
            if len(self.parties) * spec.max_measurement >= FIELD64.modulus:
                raise ValueError(f"{spec.name!r}: {len(self.parties)} parties' values up to "
                                 f"{spec.max_measurement} overflow the field; agree on a "
                                 "coarser scale.")

    @cached_property
    def context(self) -> bytes:
        return b"skfedkt validated sum " + self.session

    def prio3(self, spec: SumSpec, index: int) -> Prio3:
        return _prio3(spec, index, self.proofs)

    def nonce(self, spec: SumSpec, index: int) -> bytes:
        return hashlib.sha256(self.session + index.to_bytes(4, "big")
                              + spec.name.encode()).digest()[:NONCE_SIZE]

    def spec(self, name: str) -> SumSpec:
        return next(spec for spec in self.specs if spec.name == name)


@cache
def _prio3(spec: SumSpec, index: int, proofs: int) -> Prio3:
    total = None if spec.row_totals is None else spec.row_totals[index]
    length = spec.length
    bits = spec.max_measurement.bit_length()
    # the gadget's calls a power of two less one, so that its wire polynomials (the
    # calls and a seed) fill their roots of unity; about half the draft's square root,
    # which measured fastest (their transforms shrink faster than the wires grow)
    calls = (1 << (math.isqrt(length * bits) // 2 + 1).bit_length() - 1) - 1
    chunk = -(-length * bits // max(calls, 1))
    if spec.norms is not None:
        circuit: SumVec = NormSumVec(FIELD64, length, spec.max_measurement, chunk,
                                     offset=spec.offset, norm_squared=spec.norms[index])
    elif total is None:
        circuit = SumVec(FIELD64, length, spec.max_measurement, chunk)
    else:
        circuit = RowSumVec(FIELD64, length, spec.max_measurement, chunk,
                            row_length=spec.row_length, row_total=total)
    return Prio3(circuit, algorithm_id=ALGORITHM_ID, proofs=proofs)


@dataclass(frozen=True)
class Report:
    """What a party sends one aggregator for one sum: the joint randomness parts (both
    aggregators get them) and its input share."""

    parts: bytes
    share: bytes


def party_reports(agreement: ValidatedSum, index: int,
                  values: Mapping[str, np.ndarray]) -> tuple[dict[str, Report],
                                                             dict[str, Report]]:
    """A party's reports of its sums to the leader and to the helper."""
    to_leader, to_helper = {}, {}
    for spec in agreement.specs:
        prio = agreement.prio3(spec, index)
        meas = prio.circuit.encode(spec.units(values[spec.name], index))
        parts, shares = prio.shard(agreement.context, meas, agreement.nonce(spec, index),
                                   secrets.token_bytes(prio.rand_size))
        public = b"".join(parts or [])
        to_leader[spec.name] = Report(public, prio.encode_input_share(shares[LEADER]))
        to_helper[spec.name] = Report(public, prio.encode_input_share(shares[HELPER]))
    return to_leader, to_helper


@dataclass(frozen=True)
class Aggregator:
    """One of the two aggregators: it checks each party's proofs on its shares (with
    the other's verifier shares), then adds the output shares of the parties that
    passed every one."""

    agreement: ValidatedSum
    agg_id: int
    verify_key: bytes

    def checked(self, index: int, reports: Mapping[str, Report],
                ) -> tuple[dict[str, VerifyState], dict[str, bytes]]:
        """This aggregator's state and verifier share of each of a party's reports."""
        party = self.agreement.parties[index]
        if set(reports) != {spec.name for spec in self.agreement.specs}:
            raise ValidatedSumError(party, ", ".join(sorted(reports)) or "(none)",
                                    "not the agreed sums")
        states, shares = {}, {}
        for spec in self.agreement.specs:
            prio, report = self.agreement.prio3(spec, index), reports[spec.name]
            try:
                share = prio.decode_input_share(self.agg_id, report.share)
                public = _parts(report.parts, prio)
                states[spec.name], verifier = prio.verify_init(
                    self.verify_key, self.agreement.context, self.agg_id,
                    self.agreement.nonce(spec, index), public, share)
            except ValueError as error:
                raise ValidatedSumError(party, spec.name, str(error)) from None
            shares[spec.name] = prio.encode_verifier_share(verifier)
        return states, shares

    def output_share(self, state: VerifyState, index: int, name: str,
                     message: bytes | None) -> np.ndarray:
        """A report's output share, once the decision's message matches its state."""
        try:
            return Prio3.verify_next(state, message)
        except ValueError as error:
            raise ValidatedSumError(self.agreement.parties[index], name, str(error)) from None

    def aggregate(self, outputs: Mapping[int, Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
        totals = {}
        for spec in self.agreement.specs:
            total = FIELD64.zeros(self.agreement.prio3(spec, 0).circuit.output_len)
            for index in sorted(outputs):
                total = FIELD64.add(total, outputs[index][spec.name])
            totals[spec.name] = total
        return totals


def _parts(data: bytes, prio: Prio3) -> list[bytes] | None:
    if not prio.uses_joint_rand:
        if data:
            raise ValueError("joint randomness parts where the circuit takes none")
        return None
    if len(data) != SEED_SIZE * prio.shares:
        raise ValueError(f"joint randomness parts of {len(data)} bytes, not "
                         f"{SEED_SIZE * prio.shares}")
    return [data[i:i + SEED_SIZE] for i in range(0, len(data), SEED_SIZE)]


def verifier_message(agreement: ValidatedSum, index: int, name: str, leader: bytes,
                     helper: bytes) -> bytes | None:
    """The leader's decision on one report from both verifier shares: the message both
    aggregators finish with, or the refusal naming the party and the sum."""
    prio = agreement.prio3(agreement.spec(name), index)
    try:
        return prio.verifier_shares_to_message(
            agreement.context, [prio.decode_verifier_share(leader),
                                prio.decode_verifier_share(helper)])
    except ValueError as error:
        raise ValidatedSumError(agreement.parties[index], name, str(error)) from None


def decoded_totals(agreement: ValidatedSum, leader: Mapping[str, np.ndarray],
                   helper: Mapping[str, np.ndarray], n_parties: int) -> dict[str, np.ndarray]:
    """The sums, by name, from both aggregators' totals of `n_parties` parties."""
    return {spec.name: spec.decoded(FIELD64.add(leader[spec.name], helper[spec.name]),
                                    n_parties) for spec in agreement.specs}


def new_verify_key() -> bytes:
    """The key both aggregators share and no party knows: it draws the proofs' queries."""
    return secrets.token_bytes(SEED_SIZE)


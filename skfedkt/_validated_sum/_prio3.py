"""Prio3 (draft-irtf-cfrg-vdaf, section 7): a client splits its input into shares, one per
aggregator, with shares of a proof that the input is valid; the aggregators check the
proof on their shares, exchanging only short verifier shares, and add only what passed.

The randomness a proof needs comes from TurboSHAKE128 (pycryptodome), each use under its
own domain separation tag. The joint randomness of a circuit that needs it is derived
from each share through a blind, so a client cannot choose it after seeing it; the
aggregators check that the client's advertised parts match the shares they hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from Crypto.Hash import TurboSHAKE128

from ._circuits import Circuit
from ._flp import FLP

DRAFT_VERSION = 18  # the byte the draft's domain separation tags begin with
SEED_SIZE = 32
NONCE_SIZE = 16
USAGE_MEAS_SHARE, USAGE_PROOF_SHARE, USAGE_JOINT_RANDOMNESS = 1, 2, 3
USAGE_PROVE_RANDOMNESS, USAGE_QUERY_RANDOMNESS = 4, 5
USAGE_JOINT_RAND_SEED, USAGE_JOINT_RAND_PART = 6, 7


class Xof:
    """The draft's XofTurboShake128: TurboSHAKE128(len(dst) | dst | len(seed) | seed |
    binder) with domain byte 1, read as a stream."""

    def __init__(self, seed: bytes, dst: bytes, binder: bytes):
        self._hash = TurboSHAKE128.new(domain=1)
        for part in (len(dst).to_bytes(2, "little"), dst, len(seed).to_bytes(1, "little"),
                     seed, binder):
            self._hash.update(part)

    def next(self, length: int) -> bytes:
        return self._hash.read(length)

    def next_vec(self, field, length: int) -> np.ndarray:
        kept = [field.zeros(0)]
        missing = length
        while missing:
            values = field.from_stream(self.next(missing * field.encoded_size))
            kept.append(values)
            missing -= len(values)
        return np.concatenate(kept)

    @classmethod
    def derive_seed(cls, seed: bytes, dst: bytes, binder: bytes) -> bytes:
        return cls(seed, dst, binder).next(SEED_SIZE)

    @classmethod
    def expand(cls, field, seed: bytes, dst: bytes, binder: bytes, length: int) -> np.ndarray:
        return cls(seed, dst, binder).next_vec(field, length)


@dataclass(frozen=True)
class InputShare:
    """What one aggregator receives from a client: the leader (0) gets its share of the
    input and proofs in full, a helper a seed it expands; both a joint randomness blind
    where the circuit needs one."""

    meas: np.ndarray | None = None
    proofs: np.ndarray | None = None
    seed: bytes | None = None
    blind: bytes | None = None


@dataclass(frozen=True)
class VerifyState:
    out_share: np.ndarray
    corrected_joint_rand_seed: bytes | None


@dataclass(frozen=True)
class VerifierShare:
    verifiers: np.ndarray
    joint_rand_part: bytes | None


class Prio3:
    """A Prio3 instance: one circuit, ``shares`` aggregators, ``proofs`` proofs."""

    def __init__(self, circuit: Circuit, *, algorithm_id: int, shares: int = 2,
                 proofs: int = 1):
        if not 2 <= shares < 256 or not 1 <= proofs < 256:
            raise ValueError("2 <= shares < 256 and 1 <= proofs < 256")
        self.flp = FLP(circuit)
        self.circuit, self.field = circuit, circuit.field
        self.algorithm_id, self.shares, self.proofs = algorithm_id, shares, proofs
        self.uses_joint_rand = circuit.joint_rand_len > 0
        self.rand_size = SEED_SIZE * shares * (2 if self.uses_joint_rand else 1)

    def dst(self, usage: int, ctx: bytes) -> bytes:
        return (bytes([DRAFT_VERSION, 0]) + self.algorithm_id.to_bytes(4, "big")
                + usage.to_bytes(2, "big") + ctx)

    # --- the client ---------------------------------------------------------------------
    def shard(self, ctx: bytes, meas: np.ndarray, nonce: bytes,
              rand: bytes) -> tuple[list[bytes] | None, list[InputShare]]:
        """Shares of an encoded input (``circuit.encode``) and of its proofs."""
        if len(nonce) != NONCE_SIZE or len(rand) != self.rand_size:
            raise ValueError(f"a nonce of {NONCE_SIZE} bytes and {self.rand_size} random "
                             "bytes")
        seeds = [rand[i:i + SEED_SIZE] for i in range(0, len(rand), SEED_SIZE)]
        step = 2 if self.uses_joint_rand else 1
        helper_seeds = seeds[:(self.shares - 1) * step:step]
        blinds = seeds[1:(self.shares - 1) * 2:2] if self.uses_joint_rand else []
        leader_blind, prove_seed = (seeds[-2] if self.uses_joint_rand else None), seeds[-1]
        leader_meas = meas
        helper_meas = []
        for agg_id, seed in enumerate(helper_seeds, start=1):
            helper_meas.append(self.helper_meas_share(ctx, agg_id, seed))
            leader_meas = self.field.sub(leader_meas, helper_meas[-1])
        parts, joint_rands = None, None
        if self.uses_joint_rand:
            parts = [self.joint_rand_part(ctx, agg_id, blind, share, nonce)
                     for agg_id, (blind, share) in enumerate(
                         zip([seeds[-2], *blinds], [leader_meas, *helper_meas]))]
            joint_rands = self.joint_rands(ctx, self.joint_rand_seed(ctx, parts))
        prove_rands = Xof.expand(self.field, prove_seed,
                                 self.dst(USAGE_PROVE_RANDOMNESS, ctx), bytes([self.proofs]),
                                 self.flp.prove_rand_len * self.proofs)
        proofs = np.concatenate([
            self.flp.prove(meas, self._slice(prove_rands, self.flp.prove_rand_len, index),
                           self._slice(joint_rands, self.circuit.joint_rand_len, index))
            for index in range(self.proofs)])
        for agg_id, seed in enumerate(helper_seeds, start=1):
            proofs = self.field.sub(proofs, self.helper_proofs_share(ctx, agg_id, seed))
        leader = InputShare(meas=leader_meas, proofs=proofs, blind=leader_blind)
        helpers = [InputShare(seed=seed, blind=blinds[index] if blinds else None)
                   for index, seed in enumerate(helper_seeds)]
        return parts, [leader, *helpers]

    # --- each aggregator ----------------------------------------------------------------
    def verify_init(self, verify_key: bytes, ctx: bytes, agg_id: int, nonce: bytes,
                    public_share: list[bytes] | None,
                    input_share: InputShare) -> tuple[VerifyState, VerifierShare]:
        meas, proofs = self.expand_input_share(ctx, agg_id, input_share)
        joint_rands, part, corrected = None, None, None
        if self.uses_joint_rand:
            if public_share is None or input_share.blind is None:
                raise ValueError("this circuit needs the joint randomness parts and blind")
            part = self.joint_rand_part(ctx, agg_id, input_share.blind, meas, nonce)
            parts = list(public_share)
            parts[agg_id] = part
            corrected = self.joint_rand_seed(ctx, parts)
            joint_rands = self.joint_rands(ctx, corrected)
        query_rands = Xof.expand(self.field, verify_key, self.dst(USAGE_QUERY_RANDOMNESS, ctx),
                                 bytes([self.proofs]) + nonce,
                                 self.flp.query_rand_len * self.proofs)
        verifiers = np.concatenate([
            self.flp.query(meas, self._slice(proofs, self.flp.proof_len, index),
                           self._slice(query_rands, self.flp.query_rand_len, index),
                           self._slice(joint_rands, self.circuit.joint_rand_len, index),
                           self.shares)
            for index in range(self.proofs)])
        return (VerifyState(self.circuit.truncate(meas), corrected),
                VerifierShare(verifiers, part))

    def verifier_shares_to_message(self, ctx: bytes,
                                   shares: list[VerifierShare]) -> bytes | None:
        """The aggregators' verifier shares added and decided; refused (ValueError) when a
        proof fails. The message is the joint randomness seed the parts make."""
        verifiers = shares[0].verifiers
        for share in shares[1:]:
            verifiers = self.field.add(verifiers, share.verifiers)
        for index in range(self.proofs):
            if not self.flp.decide(self._slice(verifiers, self.flp.verifier_len, index)):
                raise ValueError("proof verifier check failed")
        if not self.uses_joint_rand:
            return None
        parts = [share.joint_rand_part for share in shares]
        if any(part is None for part in parts):
            raise ValueError("a verifier share lacks its joint randomness part")
        return self.joint_rand_seed(ctx, [part for part in parts if part is not None])

    @staticmethod
    def verify_next(state: VerifyState, message: bytes | None) -> np.ndarray:
        """The output share, once the joint randomness the client advertised is the one
        the shares make."""
        if message != state.corrected_joint_rand_seed:
            raise ValueError("joint randomness check failed")
        return state.out_share

    # --- derived randomness ---------------------------------------------------------------
    def helper_meas_share(self, ctx: bytes, agg_id: int, seed: bytes) -> np.ndarray:
        return Xof.expand(self.field, seed, self.dst(USAGE_MEAS_SHARE, ctx), bytes([agg_id]),
                          self.circuit.meas_len)

    def helper_proofs_share(self, ctx: bytes, agg_id: int, seed: bytes) -> np.ndarray:
        return Xof.expand(self.field, seed, self.dst(USAGE_PROOF_SHARE, ctx),
                          bytes([self.proofs, agg_id]), self.flp.proof_len * self.proofs)

    def expand_input_share(self, ctx: bytes, agg_id: int,
                           share: InputShare) -> tuple[np.ndarray, np.ndarray]:
        if agg_id == 0:
            if share.meas is None or share.proofs is None:
                raise ValueError("the leader's share holds the input and proofs")
            return share.meas, share.proofs
        if share.seed is None:
            raise ValueError("a helper's share is a seed")
        return (self.helper_meas_share(ctx, agg_id, share.seed),
                self.helper_proofs_share(ctx, agg_id, share.seed))

    def joint_rand_part(self, ctx: bytes, agg_id: int, blind: bytes, meas: np.ndarray,
                        nonce: bytes) -> bytes:
        return Xof.derive_seed(blind, self.dst(USAGE_JOINT_RAND_PART, ctx),
                               bytes([agg_id]) + nonce + self.field.encode(meas))

    def joint_rand_seed(self, ctx: bytes, parts: list[bytes]) -> bytes:
        return Xof.derive_seed(bytes(SEED_SIZE), self.dst(USAGE_JOINT_RAND_SEED, ctx),
                               b"".join(parts))

    def joint_rands(self, ctx: bytes, seed: bytes) -> np.ndarray:
        return Xof.expand(self.field, seed, self.dst(USAGE_JOINT_RANDOMNESS, ctx),
                          bytes([self.proofs]), self.circuit.joint_rand_len * self.proofs)

    @staticmethod
    def _slice(values, length: int, index: int):
        return None if values is None else values[index * length:(index + 1) * length]

    # --- the draft's encodings --------------------------------------------------------
    def encode_input_share(self, share: InputShare) -> bytes:
        if share.seed is not None:
            body = share.seed
        elif share.meas is not None and share.proofs is not None:
            body = self.field.encode(share.meas) + self.field.encode(share.proofs)
        else:
            raise ValueError("an input share holds a seed, or the input and proofs")
        return body + (share.blind or b"")

    def decode_input_share(self, agg_id: int, data: bytes) -> InputShare:
        blind_size = SEED_SIZE if self.uses_joint_rand else 0
        if agg_id == 0:
            meas_size = self.field.encoded_size * self.circuit.meas_len
            proofs_size = self.field.encoded_size * self.flp.proof_len * self.proofs
            if len(data) != meas_size + proofs_size + blind_size:
                raise ValueError(f"an input share of {len(data)} bytes, not "
                                 f"{meas_size + proofs_size + blind_size}")
            return InputShare(meas=self.field.decode(data[:meas_size]),
                              proofs=self.field.decode(data[meas_size:meas_size + proofs_size]),
                              blind=data[meas_size + proofs_size:] or None)
        if len(data) != SEED_SIZE + blind_size:
            raise ValueError(f"a helper's share of {len(data)} bytes, not "
                             f"{SEED_SIZE + blind_size}")
        return InputShare(seed=data[:SEED_SIZE], blind=data[SEED_SIZE:] or None)

    def encode_verifier_share(self, share: VerifierShare) -> bytes:
        return self.field.encode(share.verifiers) + (share.joint_rand_part or b"")

    def decode_verifier_share(self, data: bytes) -> VerifierShare:
        size = self.field.encoded_size * self.flp.verifier_len * self.proofs
        part_size = SEED_SIZE if self.uses_joint_rand else 0
        if len(data) != size + part_size:
            raise ValueError(f"a verifier share of {len(data)} bytes, not {size + part_size}")
        return VerifierShare(self.field.decode(data[:size]), data[size:] or None)

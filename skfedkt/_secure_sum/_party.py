"""What runs at a party in a secure sum (Bonawitz et al., CCS 2017): its keys, the shares
of its secrets for the others, its masked input, and, at the end, the shares the
coordinator needs to unmask the sum, never both of one party's.

A party signs its keys with its long-term identity key, which the others know
beforehand (`Agreement.identities`), and signs the digests of the shares it deals, all
at once, with its round signing key; the coordinator checks that signature and passes
each holder its shares' digests. A party checks every message of the coordinator before
it answers, and answers each stage once: a coordinator that puts in the roster keys no
identity signed (parties it made up), sends the parties different rosters, asks for both
shares of one party, or asks twice is refused, as is a party that deals shares other
than the ones it signed. A refused message changes nothing in the party: the stage's
intact message, where one comes, is answered as if the refused one never came (a
message altered on the way is refused whole; its intact copy is then accepted).

Between stages a party may be saved (`SecureSumParty.to_bytes`) and loaded in another
process (`SecureSumParty.from_bytes`, given its identity key again), answering as it
would have without the pause."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _primitives as crypto
from . import _signed as signed
from . import _wire as wire
from ._agreement import Agreement, SecureSumError, indices_bytes
from ._encoding import WORD
from ._primitives import Ed25519PrivateKey
from ._shamir import SHARE_BYTES, split

_STAGES = ("advertise", "share", "mask", "confirm", "unmask", "done")
_STATE_HEADER = dict(format="skfedkt secure sum party state 4")
_SECRET = wire.Bytes(crypto.KEY_BYTES)
# the identity key is not in the state: `from_bytes` takes it again
_STATE = wire.Record(dict(
    index=wire.Index(), stage=wire.Choice(_STAGES), cipher=_SECRET, mask=_SECRET,
    signing=_SECRET, self_seed=_SECRET, roster=wire.ByParty(wire.ROSTER_ENTRY),
    shares=wire.ByParty(wire.DEALT), survivors=wire.Indices(tuple)))
# a dealer's shares for one holder, or their digests: {kind: bytes}
Dealt = dict[str, bytes]


class SecureSumParty:
    """One party's side of one secure sum.

    Parameters
    ----------
    agreement : Agreement
        The sum, as every party knows it.
    index : int
        This party's place in ``agreement.parties``.
    identity : cryptography's Ed25519PrivateKey
        This party's private identity key, whose public key is
        ``agreement.identities[index]``: it signs the party's keys of this sum.

    Raises
    ------
    TypeError
        An identity that is not an Ed25519 private key.
    ValueError
        An identity key that is not the one the agreement names for this party.
    """

    def __init__(self, agreement: Agreement, index: int, identity: Ed25519PrivateKey):
        self.agreement, self.index = agreement, index
        if not crypto.is_identity_key(identity):
            raise TypeError(f"The identity of party {self.name!r} is its private "
                            f"Ed25519 identity key, got {type(identity).__name__}.")
        if crypto.public_bytes(identity) != agreement.identities[index]:
            raise ValueError(f"The identity key given to party {self.name!r} is not the "
                             "one the agreement names for it: pass the private key whose "
                             "public key the consortium agreed for this party.")
        self._identity = identity
        self._cipher_key = crypto.new_agreement_key()
        self._mask_key = crypto.new_agreement_key()
        self._signing_key = crypto.new_signing_key()
        self._self_seed = crypto.random_seed()
        self._stage = "advertise"
        self._roster: dict[int, dict[str, bytes]] = {}
        self._roster_tag = b""
        self._shares: dict[int, Dealt] = {}  # by dealer, the shares it dealt this party
        self._survivors: tuple[int, ...] = ()
        self._share_keys: dict[int, bytes] = {}  # by party, from the roster's keys

    @property
    def name(self):
        return self.agreement.name(self.index)

    @property
    def stage(self) -> str:
        """The stage this party answers next: ``advertise``, ``share``, ``mask``,
        ``confirm``, ``unmask``, or ``done``."""
        return self._stage

    def to_bytes(self) -> bytes:
        """This party's state, for `from_bytes` to take up at the stage it reached.

        The state holds the party's secrets (its private keys of the sum, its self-mask
        seed, the shares the others sent it), though not its identity key: it stays on
        the party's machine, readable by the party alone (a file of mode 0600, say), and
        is never sent. Save it after each stage it answers, before sending that
        stage's message, so that a party loaded again refuses to answer a stage twice.

        Returns
        -------
        bytes
            UTF-8 JSON naming its format and the session.
        """
        return wire.dump(_STATE_HEADER, _STATE, dict(
            index=self.index, stage=self._stage,
            cipher=crypto.private_bytes(self._cipher_key),
            mask=crypto.private_bytes(self._mask_key),
            signing=crypto.private_bytes(self._signing_key), self_seed=self._self_seed,
            roster=self._roster, survivors=self._survivors, shares=self._shares),
            self.agreement, "party state")

    @classmethod
    def from_bytes(cls, agreement: Agreement, index: int, data: bytes,
                   identity: Ed25519PrivateKey) -> SecureSumParty:
        """Party `index` of the sum, as `to_bytes` saved it.

        Parameters
        ----------
        agreement : Agreement
            The sum, whose session the state must name.
        index : int
            The party, whose state it must be.
        data : bytes
            The state `to_bytes` gave.
        identity : cryptography's Ed25519PrivateKey
            The party's private identity key, as `SecureSumParty` takes it.

        Returns
        -------
        SecureSumParty

        Raises
        ------
        SecureSumError
            A state of another format, session or party, or not of a state's shape,
            naming the field.
        """
        party = cls(agreement, index, identity)
        state = wire.load(_STATE_HEADER, _STATE, data, agreement, "party state",
                          lambda field, reason: party._refuse(None, field, reason))
        if state["index"] != index:
            raise party._refuse(None, "index", f"the state of party "
                                f"{agreement.name(state['index'])!r}")
        party._cipher_key = crypto.agreement_key_from_bytes(state["cipher"])
        party._mask_key = crypto.agreement_key_from_bytes(state["mask"])
        party._signing_key = crypto.signing_key_from_bytes(state["signing"])
        party._self_seed, party._stage = state["self_seed"], state["stage"]
        party._roster, party._survivors = state["roster"], state["survivors"]
        if party._roster:
            party._set_roster(party._roster)
        party._shares = state["shares"]
        return party

    def _refuse(self, party: Any, field: str, reason: str) -> SecureSumError:
        return SecureSumError(self.name, party, field, reason)

    def _check_stage(self, stage: str) -> None:
        if self._stage != stage:
            raise self._refuse(None, stage, f"asked for out of order (this party is at "
                               f"{self._stage!r}): each stage is answered once")

    def advertise(self) -> dict[str, Any]:
        """Stage 1: the public keys and the commitment to the self-mask seed, signed by
        the identity key, for the coordinator to pass on to every party."""
        self._check_stage("advertise")
        self._stage = "share"
        return self.advertised()

    def advertised(self) -> dict[str, Any]:
        """Stage 1's message again, the same (Ed25519 signs alike each time), while no
        roster has come: a party step run again after a crash sends the keys it kept."""
        self._check_stage("share")
        return dict(party=self.index, **self._entry())

    def share_keys(self, roster: Mapping[int, Mapping[str, bytes]]) -> dict[str, Any]:
        """Stage 2: given every advertised party's entry (the roster), each signed by
        its identity, the shares of this party's mask key and self-mask seed sealed for
        each other party, their digests by holder, and this party's signature of the
        digests."""
        self._check_stage("share")
        self._set_roster(self._checked_roster(roster))
        points = {index: self.agreement.point(index) for index in self._roster}
        secrets = dict(mask=crypto.private_bytes(self._mask_key), seed=self._self_seed)
        shares = {kind: split(secrets[kind], list(points.values()), self.agreement.threshold)
                  for kind in signed.SHARED}
        sealed, digests = {}, {}
        for index, point in points.items():
            dealt = {kind: shares[kind][point] for kind in signed.SHARED}
            digests[index] = self._digests(self.index, index, dealt)
            if index == self.index:  # its own shares stay here
                self._shares[index] = dealt
            else:
                sealed[index] = crypto.seal(self._share_key(index), _packed(dealt),
                                            self._share_tag(self.index, index))
        signature = self._signing_key.sign(signed.dealt_message(
            self.agreement, self._roster_tag, self.index, digests))
        self._stage = "mask"
        return dict(party=self.index, sealed=sealed, digests=digests, signature=signature)

    def _set_roster(self, roster: dict[int, dict[str, bytes]]) -> None:
        self._roster = roster
        self._roster_tag = signed.roster_tag(self.agreement, roster)
        self._share_digest = signed.share_digests(self.agreement, self._roster_tag)

    def _digests(self, dealer: int, holder: int, dealt: Dealt) -> Dealt:
        return {kind: self._share_digest(dealer, holder, kind, share)
                for kind, share in dealt.items()}

    def masked_input(self, routed: Mapping[int, Mapping[str, Any]],
                     values: np.ndarray) -> dict[str, Any]:
        """Stage 3: given the shares sealed for this party by the parties that shared,
        with their digests that each dealer signed (the coordinator checked the
        signatures and passes both on), `values` (words) masked: its self-mask plus one
        pairwise mask with each of those parties, which cancel in the sum."""
        self._check_stage("mask")
        if not (isinstance(routed, Mapping) and all(
                isinstance(item, Mapping) for item in routed.values())):
            raise self._refuse(None, "sealed", "not a mapping of party to sealed shares "
                               "and their digests")
        # kept once the whole message passed its checks: a refused one changes nothing
        received: dict[int, Dealt] = {}
        for sender, item in routed.items():
            box = item.get("sealed")
            if sender == self.index:
                raise self._refuse(None, "sealed", "shares from this party itself: the "
                                   "shares routed to another party")
            if sender not in self._roster:
                raise self._refuse(None, "sealed", f"shares from {sender!r}, which is not "
                                   "another party of the roster")
            opened = crypto.open_sealed(self._share_key(sender), box if isinstance(
                box, bytes) else b"", self._share_tag(sender, self.index))
            if opened is None or len(opened) != wire.SEALED_PLAINTEXT_BYTES:
                raise self._refuse(self.agreement.name(sender), "sealed",
                                   "its shares do not open: the coordinator altered them, "
                                   "or sent this party and that one different rosters")
            dealt = _unpacked(opened)
            if self._digests(sender, self.index, dealt) != item.get("digests"):
                # sealed by the dealer alone, so dealt by it: refused before they count
                raise self._refuse(self.agreement.name(sender), "sealed",
                                   "its shares are not the ones whose digests it signed: "
                                   "it dealt shares it would not stand by, which could "
                                   "spoil the unmasking with no one to blame")
            received[sender] = dealt
        sharing = sorted({**self._shares, **received})
        self._need(len(sharing), "sealed", "parties shared their keys")
        values = np.asarray(values)
        if values.dtype != WORD or values.shape != (self.agreement.length,):
            raise self._refuse(None, "values", f"{values.dtype} of shape {values.shape}, "
                               f"expected {self.agreement.length} words")
        masked, masker = values.copy(), crypto.Masker(self.agreement.length)
        masker.add(masked, self._self_seed)
        for other in sharing:
            if other != self.index:
                # each pair's mask cancels: the party that sorts first adds it
                masker.add(masked, self._pair_seed(other), subtract=self.index > other)
        self._shares.update(received)
        self._stage = "confirm"
        return dict(party=self.index, masked=masked)

    def confirm(self, survivors) -> dict[str, Any]:
        """Stage 4: given the parties whose masked input reached the coordinator, this
        party's signature of that list, which every party checks before unmasking."""
        self._check_stage("confirm")
        survivors = self._checked_parties(survivors, "survivors")
        if self.index not in survivors:
            raise self._refuse(None, "survivors", "this party's masked input is missing")
        self._need(len(survivors), "survivors", "masked inputs reached the coordinator")
        self._survivors, self._stage = survivors, "unmask"
        return dict(party=self.index, signature=self._signing_key.sign(
            self._survivors_message(survivors)))

    def unmask(self, survivors, dropped, signatures: Mapping[int, bytes]) -> dict[str, Any]:
        """Stage 5: the shares that unmask the sum: of each survivor's self-mask seed
        and each dropped party's mask key, never both of one party, once the
        signatures show that at least the threshold of survivors confirmed the same
        survivors as this party."""
        self._check_stage("unmask")
        survivors = self._checked_parties(survivors, "survivors")
        dropped = self._checked_parties(dropped, "dropped")
        both = sorted(set(survivors) & set(dropped))
        if both:
            raise self._refuse(None, "dropped", "asks for both the self-mask share and the "
                               "mask-key share of party "
                               f"{self.agreement.name(both[0])!r}, which would unmask its "
                               "input")
        if survivors != self._survivors:
            raise self._refuse(None, "survivors", "not the survivors this party confirmed")
        if set(survivors) | set(dropped) != set(self._shares):
            raise self._refuse(None, "dropped", "the survivors and the dropped are not the "
                               "parties that shared their keys")
        self._need(self._confirmations(signatures, survivors), "signatures",
                   "survivors confirmed these survivors")
        self._stage = "done"
        return dict(party=self.index,
                    seed_shares={index: self._shares[index]["seed"] for index in survivors},
                    mask_shares={index: self._shares[index]["mask"] for index in dropped})

    def _confirmations(self, signatures, survivors) -> int:
        """How many survivors signed `survivors` (counting stops at the threshold)."""
        if not isinstance(signatures, Mapping):
            raise self._refuse(None, "signatures", "not a mapping of party to signature")
        message, confirmed = self._survivors_message(survivors), 0
        for index, signature in signatures.items():
            if confirmed == self.agreement.threshold:
                break
            confirmed += (index in survivors and isinstance(signature, bytes) and crypto.verify(
                self._roster[index]["signing"], signature, message))
        return confirmed

    def _need(self, count: int, field: str, what: str) -> None:
        if count < self.agreement.threshold:
            raise self._refuse(None, field, f"{count} {what}, fewer than the threshold "
                               f"{self.agreement.threshold}")

    def _checked_roster(self, roster) -> dict[int, dict[str, bytes]]:
        if not isinstance(roster, Mapping):
            raise self._refuse(None, "roster", "not a mapping of party to keys")
        checked = {}
        for index, entry in roster.items():
            if not (isinstance(index, int) and 0 <= index < len(self.agreement.parties)):
                raise self._refuse(None, "roster", f"{index!r} is not a party of the sum")
            if not (isinstance(entry, Mapping) and all(
                    isinstance(entry.get(name), bytes) and len(entry[name]) == size
                    for name, size in wire.ENTRY_BYTES.items())):
                raise self._refuse(self.agreement.name(index), "roster", ", ".join(
                    f"{name} of {size} bytes" for name, size in wire.ENTRY_BYTES.items())
                    + " expected")
            checked[index] = {name: entry[name] for name in signed.ENTRY}
        if checked.get(self.index) != self._entry():
            raise self._refuse(None, "roster", "this party's own keys are missing or altered")
        for index, entry in checked.items():
            if not signed.signed_by_identity(self.agreement, index, entry):
                raise self._refuse(self.agreement.name(index), "roster",
                                   "its keys are not signed by the identity the consortium "
                                   "agreed for it: a party the coordinator made up, or "
                                   "altered keys")
        keys = [entry[key] for entry in checked.values() for key in signed.KEYS]
        if len(set(keys)) != len(keys):
            raise self._refuse(None, "roster", "a key appears twice")
        self._need(len(checked), "roster", "parties advertised keys")
        return checked

    def _entry(self) -> dict[str, bytes]:
        """This party's entry of the roster: its public keys and its commitment to its
        self-mask seed, signed by its identity (Ed25519 signs alike each time)."""
        entry = dict(cipher=crypto.public_bytes(self._cipher_key),
                     mask=crypto.public_bytes(self._mask_key),
                     signing=crypto.public_bytes(self._signing_key),
                     commitment=signed.commitment(self.agreement, self.index, self._self_seed))
        entry["identity_signature"] = self._identity.sign(
            signed.keys_message(self.agreement, self.index, entry))
        return entry

    def _checked_parties(self, parties, field: str) -> tuple[int, ...]:
        if isinstance(parties, (str, bytes, Mapping)) or not all(
                isinstance(index, int) for index in parties):
            raise self._refuse(None, field, "not a list of parties")
        checked = tuple(sorted(parties))
        if len(set(checked)) != len(checked) or not set(checked) <= set(self._shares):
            raise self._refuse(None, field, "names a party twice, or one that did not "
                               "share its keys")
        return checked

    def _share_key(self, other: int) -> bytes:
        # sealing to a party and opening from it use one key: agreed once
        if other not in self._share_keys:
            self._share_keys[other] = crypto.agreed_secret(
                self._cipher_key, self._roster[other]["cipher"], b"shares",
                self.agreement.session)
        return self._share_keys[other]

    def _pair_seed(self, other: int) -> bytes:
        return crypto.agreed_secret(self._mask_key, self._roster[other]["mask"], b"mask",
                                    self.agreement.session)

    def _share_tag(self, sender: int, recipient: int) -> bytes:
        return self.agreement.tag(b"shares", indices_bytes([sender]),
                                  indices_bytes([recipient]), self._roster_tag)

    def _survivors_message(self, survivors) -> bytes:
        return self.agreement.tag(b"survivors", self._roster_tag, indices_bytes(survivors))


def _packed(dealt: Dealt) -> bytes:
    """The plaintext sealed for a holder: each share."""
    return b"".join(dealt[kind] for kind in signed.SHARED)


def _unpacked(plaintext: bytes) -> Dealt:
    """What `_packed` packed."""
    return {kind: plaintext[at * SHARE_BYTES:(at + 1) * SHARE_BYTES]
            for at, kind in enumerate(signed.SHARED)}

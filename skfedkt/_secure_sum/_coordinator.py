"""What runs at the coordinator of a secure sum: it passes keys and sealed shares between
the parties, and from their masked inputs and the shares they give back it learns the
sum of the survivors' inputs, and nothing of any one of them.

Every party's message is checked before it is used, and a stage that keeps fewer than
the threshold of parties refuses the sum, naming the parties lost. Each party's keys
must be signed by its identity, and the digests of the shares it deals by its round
signing key; each share given back must be one whose digest its dealer signed: a share
a party altered is left out (`SecureSumCoordinator.refused_shares` names the
party), and each secret is combined from the good ones and checked against what its
party committed to, so that the coordinator never gives a wrong sum. Between stages the
coordinator may be saved (`SecureSumCoordinator.to_bytes`) and loaded in another process
(`SecureSumCoordinator.from_bytes`)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from . import _primitives as crypto
from . import _signed as signed
from . import _wire as wire
from ._agreement import Agreement, SecureSumError
from ._encoding import WORD
from ._shamir import SHARE_BYTES, combine

_STATE_HEADER = dict(format="skfedkt secure sum coordinator state 4")
_STATE = wire.Record(dict(roster=wire.ByParty(wire.ROSTER_ENTRY),
                          sharing=wire.Indices(tuple),
                          digests=wire.ByParty(wire.ByParty(wire.DIGESTS)),
                          survivors=wire.Indices(tuple),
                          masked=wire.ByParty(wire.Words())))


class SecureSumCoordinator:
    """The coordinator's side of one secure sum: one method per stage, each taking the
    messages that arrived (parties that sent none have dropped) and returning what it
    sends each remaining party.

    Parameters
    ----------
    agreement : Agreement
        The sum, as every party knows it.

    Attributes
    ----------
    refused_shares : dict
        Once `total` ran, the parties that gave back shares other than the ones their
        dealers signed (altered), by name, and which: the sum is made without them (not
        saved).
    """

    def __init__(self, agreement: Agreement):
        self.agreement = agreement
        self.roster: dict[int, dict[str, bytes]] = {}
        self.sharing: tuple[int, ...] = ()
        # by dealer, then holder: the digests of the shares it dealt, which it signed
        self.digests: dict[int, dict[int, dict[str, bytes]]] = {}
        self.survivors: tuple[int, ...] = ()
        self._masked: dict[int, np.ndarray] = {}
        self.refused_shares: dict[Hashable, str] = {}

    def to_bytes(self) -> bytes:
        """The coordinator's state, for `from_bytes` to take up where it stopped: the
        roster, the sharing parties and their shares' digests, the survivors and their
        masked inputs. It holds
        nothing the coordinator does not learn anyway, yet it stays on the coordinator's
        machine: it is what the sum is computed from.

        Returns
        -------
        bytes
            UTF-8 JSON naming its format and the session.
        """
        return wire.dump(_STATE_HEADER, _STATE, dict(
            roster=self.roster, sharing=self.sharing, digests=self.digests,
            survivors=self.survivors,
            masked=self._masked), self.agreement, "coordinator state")

    @classmethod
    def from_bytes(cls, agreement: Agreement, data: bytes) -> SecureSumCoordinator:
        """The coordinator of the sum, as `to_bytes` saved it.

        Parameters
        ----------
        agreement : Agreement
            The sum, whose session the state must name.
        data : bytes
            The state `to_bytes` gave.

        Returns
        -------
        SecureSumCoordinator

        Raises
        ------
        SecureSumError
            A state of another format or session, or not of a state's shape, naming the
            field.
        """
        coordinator = cls(agreement)
        state = wire.load(_STATE_HEADER, _STATE, data, agreement, "coordinator state",
                          lambda field, reason: SecureSumError(None, None, field, reason))
        coordinator.roster, coordinator.sharing = state["roster"], state["sharing"]
        coordinator.digests = state["digests"]
        coordinator.survivors, coordinator._masked = state["survivors"], state["masked"]
        return coordinator

    def _refuse(self, party: Any, field: str, reason: str) -> SecureSumError:
        return SecureSumError(None, None if party is None else self.agreement.name(party),
                              field, reason)

    def _arrived(self, messages: Sequence[Mapping[str, Any]], expected: Sequence[int],
                 stage: str) -> dict[int, Mapping[str, Any]]:
        """The messages by party: one each, from parties still in the sum, and at least
        the threshold's number of them."""
        by_party: dict[int, Mapping[str, Any]] = {}
        for message in messages:
            party = message.get("party") if isinstance(message, Mapping) else None
            if not isinstance(party, int) or party not in expected:
                raise self._refuse(None, "party", f"a {stage} message from {party!r}, which "
                                   "is not a party still in the sum")
            if party in by_party:
                raise self._refuse(party, "party", f"sent its {stage} message twice")
            by_party[party] = message
        if len(by_party) < self.agreement.threshold:
            lost = [name for index, name in enumerate(self.agreement.parties)
                    if index not in by_party]
            raise SecureSumError(None, None, stage, f"{len(by_party)} parties remain, fewer "
                                 f"than the threshold {self.agreement.threshold}; lost: "
                                 f"{lost!r}")
        return dict(sorted(by_party.items()))

    def collect_keys(self, advertisements) -> dict[int, dict[str, bytes]]:
        """Stage 1: the roster, every advertising party's entry (its public keys and
        its commitment, signed by its identity), sent to each."""
        arrived = self._arrived(advertisements, range(len(self.agreement.parties)), "keys")
        self.roster = {party: self.checked_advertisement(message)
                       for party, message in arrived.items()}
        return self.roster

    def checked_advertisement(self, message: Any) -> dict[str, bytes]:
        """One party's keys message, checked as `collect_keys` checks each: its fields
        of their sizes, signed by the identity the agreement names for the party.

        Parameters
        ----------
        message : dict
            A ``keys`` message (`SecureSumParty.advertise`).

        Returns
        -------
        dict
            The party's entry of the roster.

        Raises
        ------
        SecureSumError
            A message that fails a check, naming the party and the field: a deployment
            may leave that party out and go on with the others.
        """
        party = message.get("party") if isinstance(message, Mapping) else None
        if type(party) is not int or not 0 <= party < len(self.agreement.parties):
            raise self._refuse(None, "party", f"a keys message from {party!r}, which is "
                               "not a party of the sum")
        for name, size in wire.ENTRY_BYTES.items():
            value = message.get(name)
            if not isinstance(value, bytes) or len(value) != size:
                raise self._refuse(party, name, f"not {size} bytes")
        entry = {name: message[name] for name in signed.ENTRY}
        if not signed.signed_by_identity(self.agreement, party, entry):
            raise self._refuse(party, "identity_signature", "not the signature of the "
                               "identity the consortium agreed for this party: keys "
                               "someone else made, or altered")
        return entry

    def route_shares(self, share_messages) -> dict[int, dict[int, dict[str, Any]]]:
        """Stage 2: what each sharing party receives, the shares the others sealed for
        it with their digests, which each dealer signed."""
        arrived = self._arrived(share_messages, list(self.roster), "shares")
        self.sharing = tuple(arrived)
        routed: dict[int, dict[int, dict[str, Any]]] = {party: {} for party in self.sharing}
        tag = signed.roster_tag(self.agreement, self.roster)
        for sender, message in arrived.items():
            self.digests[sender] = self._signed_digests(sender, message, tag)
            sealed = message.get("sealed")
            if not isinstance(sealed, Mapping) or set(sealed) != set(self.roster) - {sender}:
                raise self._refuse(sender, "sealed", "not one sealed share for each other "
                                   "party of the roster")
            for recipient, box in sealed.items():
                if not isinstance(box, bytes) or len(box) != wire.SEALED_BYTES:
                    raise self._refuse(sender, "sealed", f"the share for party "
                                       f"{self.agreement.name(recipient)!r} is malformed")
                if recipient in routed:
                    routed[recipient][sender] = dict(
                        sealed=box, digests=self.digests[sender][recipient])
        return routed

    def _signed_digests(self, sender: int, message: Mapping[str, Any],
                        tag: bytes) -> dict[int, dict[str, bytes]]:
        """The digests of the shares `sender` dealt, one pair per party of the roster
        (its own included), once its round signing key signed them."""
        digests, signature = message.get("digests"), message.get("signature")
        if not (isinstance(digests, Mapping) and set(digests) == set(self.roster) and all(
                isinstance(pair, Mapping) and set(pair) == set(signed.SHARED) and all(
                    isinstance(value, bytes) and len(value) == crypto.DIGEST_BYTES
                    for value in pair.values()) for pair in digests.values())):
            raise self._refuse(sender, "digests", "not the digests of one share of each "
                               "secret for each party of the roster")
        if not (isinstance(signature, bytes) and crypto.verify(
                self.roster[sender]["signing"], signature,
                signed.dealt_message(self.agreement, tag, sender, digests))):
            raise self._refuse(sender, "signature", "not its signature of its shares' "
                               "digests: shares it would not stand by")
        return {holder: dict(pair) for holder, pair in digests.items()}

    def collect_masked(self, masked_messages) -> tuple[int, ...]:
        """Stage 3: the survivors, the parties whose masked input arrived, sent to each."""
        arrived = self._arrived(masked_messages, self.sharing, "masked input")
        for party, message in arrived.items():
            masked = message.get("masked")
            if not (isinstance(masked, np.ndarray) and masked.dtype == WORD
                    and masked.shape == (self.agreement.length,)):
                raise self._refuse(party, "masked", f"not {self.agreement.length} words")
            self._masked[party] = masked
        self.survivors = tuple(arrived)
        return self.survivors

    def unmask_request(self, confirmations) -> dict[str, Any]:
        """Stage 4: what every confirming survivor receives: the survivors, the dropped
        and the confirmations' signatures."""
        arrived = self._arrived(confirmations, self.survivors, "confirmation")
        return dict(**self._survivors_and_dropped(),
                    signatures={party: message.get("signature")
                                for party, message in arrived.items()})

    def total(self, unmask_messages) -> np.ndarray:
        """Stage 5: the sum of the survivors' inputs, modulo 2**64, from the shares that
        unmask it.

        Each share given back must be the one whose digest the party that dealt it
        signed for the party that gives it back (which checked it on receipt): one that
        is not was altered by that party, and is left out (`refused_shares` names the
        party). Each secret is combined from the good shares, at least the threshold's
        number, and must be the one its party committed to with its keys.

        Raises
        ------
        SecureSumError
            A secret with fewer good shares than the threshold, naming the parties
            that altered theirs; or one whose shares, each signed, do not combine into
            what its party committed to, naming that party, which dealt them.
        """
        request = self._survivors_and_dropped()
        arrived = self._arrived(unmask_messages, self.survivors, "unmasking")
        share_digest = signed.share_digests(
            self.agreement, signed.roster_tag(self.agreement, self.roster))
        wanted = dict(seed=request["survivors"], mask=request["dropped"])
        # by secret (its kind, its party): the good shares by point, and who altered one
        good: dict[tuple[str, int], dict[int, bytes]] = {
            (kind, owner): {} for kind, owners in wanted.items() for owner in owners}
        altered: dict[tuple[str, int], list[int]] = {secret: [] for secret in good}
        name = self.agreement.name
        refused: dict[Hashable, list[str]] = {}  # by party, the secrets of its altered shares
        for holder, message in arrived.items():
            for kind, owners in wanted.items():
                field, shares = f"{kind}_shares", message.get(f"{kind}_shares")
                if not (isinstance(shares, Mapping) and set(shares) == set(owners) and all(
                        isinstance(share, bytes) and len(share) == SHARE_BYTES
                        for share in shares.values())):
                    raise self._refuse(holder, field, "not one share for each party asked")
                for owner, share in shares.items():
                    if share_digest(owner, holder, kind, share) == (
                            self.digests[owner][holder][kind]):
                        good[kind, owner][self.agreement.point(holder)] = share
                    else:
                        altered[kind, owner].append(holder)
                        refused.setdefault(name(holder), []).append(
                            f"the {signed.SHARED[kind]} of party {name(owner)!r}")
        self.refused_shares = {
            holder: "gave back shares other than the ones their dealers signed, so "
            f"altered, and left out: of {', '.join(owned)}"
            for holder, owned in refused.items()}
        secrets = {secret: self._secret(*secret, shares, altered[secret])
                   for secret, shares in good.items()}
        total = np.zeros(self.agreement.length, dtype=WORD)
        masker = crypto.Masker(self.agreement.length)
        for party in self.survivors:
            np.add(total, self._masked[party], out=total)
            masker.add(total, secrets["seed", party], subtract=True)
        for dropped in request["dropped"]:
            key = secrets["mask", dropped]
            for survivor in self.survivors:
                # the survivor added the pair's mask if it sorts before the dropped party,
                # else subtracted it
                masker.add(total, crypto.agreed_secret(
                    key, self.roster[survivor]["mask"], b"mask", self.agreement.session),
                    subtract=survivor < dropped)
        return total

    def _survivors_and_dropped(self) -> dict[str, list[int]]:
        return dict(survivors=list(self.survivors),
                    dropped=[party for party in self.sharing if party not in self.survivors])

    def _secret(self, kind: str, owner: int, shares: dict[int, bytes],
                altered: list[int]) -> bytes:
        """The secret `kind` of `owner` from its good `shares`, once it is the one the
        owner committed to (its self-mask seed's digest, its mask key's public key)."""
        what, field = signed.SHARED[kind], f"{kind}_shares"
        if len(shares) < self.agreement.threshold:
            raise SecureSumError(None, None, field, f"the {what} of party "
                                 f"{self.agreement.name(owner)!r} has {len(shares)} good "
                                 "shares, fewer than the "
                                 f"threshold {self.agreement.threshold}: parties "
                                 f"{[self.agreement.name(index) for index in altered]!r} "
                                 "gave back altered ones")
        try:
            secret: bytes | None = combine(shares)
        except ValueError:  # beyond 32 bytes: not its secret
            secret = None
        if secret is None or not self._committed(kind, owner, secret):
            raise self._refuse(owner, field, f"its shares, which it signed, do not "
                               f"combine into the {what} it committed to with its keys: it "
                               "dealt inconsistent shares, and the sum cannot be unmasked")
        return secret

    def _committed(self, kind: str, owner: int, secret: bytes) -> bool:
        """Whether `secret` is the one of `kind` that `owner` committed to with its keys:
        its self-mask seed's digest, or its mask key's public key."""
        entry = self.roster[owner]
        if kind == "seed":
            return signed.commitment(self.agreement, owner, secret) == entry["commitment"]
        return crypto.public_bytes(crypto.agreement_key_from_bytes(secret)) == entry["mask"]

"""What runs at the coordinator of a secure sum: it passes keys and sealed shares between
the parties, and from their masked inputs and the shares they give back it learns the
sum of the survivors' inputs, and nothing of any one of them.

Every party's message is checked before it is used, and a stage that keeps fewer than
the threshold of parties refuses the sum, naming the parties lost. Between stages the
coordinator may be saved (`SecureSumCoordinator.to_bytes`) and loaded in another process
(`SecureSumCoordinator.from_bytes`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from . import _primitives as crypto
from . import _wire as wire
from ._agreement import Agreement, SecureSumError
from ._encoding import WORD
from ._shamir import SHARE_BYTES, combine

_STATE_HEADER = dict(format="skfedkt secure sum coordinator state 1")
_STATE = wire.Record(dict(roster=wire.ByParty(wire.PUBLIC_KEYS), sharing=wire.Indices(tuple),
                          survivors=wire.Indices(tuple), masked=wire.ByParty(wire.Words())))


class SecureSumCoordinator:
    """The coordinator's side of one secure sum: one method per stage, each taking the
    messages that arrived (parties that sent none have dropped) and returning what it
    sends each remaining party.

    Parameters
    ----------
    agreement : Agreement
        The sum, as every party knows it.
    """

    def __init__(self, agreement: Agreement):
        self.agreement = agreement
        self.roster: dict[int, dict[str, bytes]] = {}
        self.sharing: tuple[int, ...] = ()
        self.survivors: tuple[int, ...] = ()
        self._masked: dict[int, np.ndarray] = {}

    def to_bytes(self) -> bytes:
        """The coordinator's state, for `from_bytes` to take up where it stopped: the
        roster, the sharing parties, the survivors and their masked inputs. It holds
        nothing the coordinator does not learn anyway, yet it stays on the coordinator's
        machine: it is what the sum is computed from.

        Returns
        -------
        bytes
            UTF-8 JSON naming its format and the session.
        """
        return wire.dump(_STATE_HEADER, _STATE, dict(
            roster=self.roster, sharing=self.sharing, survivors=self.survivors,
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
        """Stage 1: the roster, every advertising party's public keys, sent to each."""
        arrived = self._arrived(advertisements, range(len(self.agreement.parties)), "keys")
        for party, message in arrived.items():
            for key in ("cipher", "mask", "signing"):
                value = message.get(key)
                if not isinstance(value, bytes) or len(value) != crypto.KEY_BYTES:
                    raise self._refuse(party, key, f"not a key of {crypto.KEY_BYTES} bytes")
        self.roster = {party: {key: message[key] for key in ("cipher", "mask", "signing")}
                       for party, message in arrived.items()}
        return self.roster

    def route_shares(self, share_messages) -> dict[int, dict[int, bytes]]:
        """Stage 2: what each sharing party receives, the shares the others sealed for
        it."""
        arrived = self._arrived(share_messages, list(self.roster), "shares")
        self.sharing = tuple(arrived)
        routed: dict[int, dict[int, bytes]] = {party: {} for party in self.sharing}
        for sender, message in arrived.items():
            sealed = message.get("sealed")
            if not isinstance(sealed, Mapping) or set(sealed) != set(self.roster) - {sender}:
                raise self._refuse(sender, "sealed", "not one sealed share for each other "
                                   "party of the roster")
            for recipient, box in sealed.items():
                if not isinstance(box, bytes) or len(box) > 4 * SHARE_BYTES:
                    raise self._refuse(sender, "sealed", f"the share for party "
                                       f"{self.agreement.name(recipient)!r} is malformed")
                if recipient in routed:
                    routed[recipient][sender] = box
        return routed

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
        unmask it."""
        request = self._survivors_and_dropped()
        arrived = self._arrived(unmask_messages, self.survivors, "unmasking")
        seeds: dict[int, dict[int, bytes]] = {party: {} for party in request["survivors"]}
        keys: dict[int, dict[int, bytes]] = {party: {} for party in request["dropped"]}
        for sender, message in arrived.items():
            for field, wanted, store in (("seed_shares", request["survivors"], seeds),
                                         ("mask_shares", request["dropped"], keys)):
                shares = message.get(field)
                if not (isinstance(shares, Mapping) and set(shares) == set(wanted) and all(
                        isinstance(share, bytes) and len(share) == SHARE_BYTES
                        for share in shares.values())):
                    raise self._refuse(sender, field, "not one share for each party asked")
                for owner, share in shares.items():
                    store[owner][self.agreement.point(sender)] = share
        length = self.agreement.length
        total = np.zeros(length, dtype=WORD)
        for party in self.survivors:
            total = total + self._masked[party] - crypto.expand_mask(
                self._combined(party, seeds[party], "seed"), length)
        for dropped, shares in keys.items():
            key = self._combined(dropped, shares, "mask key")
            for survivor in self.survivors:
                mask = crypto.expand_mask(crypto.agreed_secret(
                    key, self.roster[survivor]["mask"], b"mask", self.agreement.session),
                    length)
                # the survivor added +mask if it sorts before the dropped party, else -mask
                total = total - mask if survivor < dropped else total + mask
        return total

    def _survivors_and_dropped(self) -> dict[str, list[int]]:
        return dict(survivors=list(self.survivors),
                    dropped=[party for party in self.sharing if party not in self.survivors])

    def _combined(self, owner: int, shares: dict[int, bytes], what: str) -> bytes:
        try:
            return combine(shares)
        except ValueError:
            raise self._refuse(owner, what, "its shares do not combine: a party sent an "
                               "altered share") from None

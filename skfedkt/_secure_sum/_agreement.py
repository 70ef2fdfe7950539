"""What the parties of one secure sum agree on beforehand, and the refusal every stage
raises: the session, the parties, the threshold, the length of the summed vector, and
each party's identity key."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ._primitives import KEY_BYTES, digest


class SecureSumError(ValueError):
    """A refusal of the secure sum, naming the side that refused (a party, or the
    coordinator), the party whose message it refused, and the field."""

    def __init__(self, refused_by: Any, party: Any, field: str, reason: str):
        self.refused_by, self.party, self.field = refused_by, party, field
        by = "the coordinator" if refused_by is None else f"party {refused_by!r}"
        about = "" if party is None else f" from party {party!r}"
        super().__init__(f"Secure sum refused by {by}: the message{about}, {field}: "
                         f"{reason}")


@dataclass(frozen=True)
class Agreement:
    """One secure sum, as every party and the coordinator know it before it starts.

    Attributes
    ----------
    session : bytes
        Names this sum alone: every key derived and every signature is bound to it, so
        that no message of another sum is accepted.
    parties : tuple
        The party names, in the order of their points of Shamir's sharing.
    threshold : int
        The fewest parties that must stay to the end: fewer refuse the sum. A majority
        of the parties at least, so that no two disjoint groups of honest parties can
        each unmask; a coordinator that tells two groups different survivors with
        ``2 * threshold - n`` parties colluding in both can unmask a party, which
        `default_threshold` (above 2n/3) makes more than a third.
    length : int
        The number of 64-bit words each party adds.
    identities : tuple of bytes
        Each party's public identity key (32 raw bytes of Ed25519), aligned with
        `parties`: agreed out of band, like TLS certificates, it signs the party's keys
        of the sum, so that a party accepts no keys the coordinator made up for another
        (Bonawitz et al.'s public-key infrastructure).
    """

    session: bytes
    parties: tuple[Hashable, ...]
    threshold: int
    length: int
    identities: tuple[bytes, ...]

    def __post_init__(self):
        n = len(self.parties)
        if len(set(self.parties)) != n:
            raise ValueError(f"The parties of a secure sum are named once each: "
                             f"{list(self.parties)!r}.")
        if n < 3:
            raise ValueError(f"A secure sum needs at least 3 parties, got {n}: with two, "
                             "each learns the other's input from the sum.")
        if not n // 2 < self.threshold <= n:
            raise ValueError(f"The threshold of a secure sum of {n} parties is a majority "
                             f"of them, from {n // 2 + 1} to {n}; got {self.threshold}.")
        if self.length < 1:
            raise ValueError(f"A secure sum adds at least one word, got {self.length}.")
        if not isinstance(self.session, bytes) or len(self.session) < 16:
            raise ValueError("A secure sum's session is at least 16 bytes.")
        if not (isinstance(self.identities, tuple) and len(self.identities) == n and all(
                isinstance(key, bytes) and len(key) == KEY_BYTES for key in self.identities)):
            raise ValueError(f"A secure sum's identities are a tuple of {n} public keys of "
                             f"{KEY_BYTES} bytes, one per party, in the order of the "
                             "parties.")
        if len(set(self.identities)) != n:
            twice = [self.parties[i] for i, key in enumerate(self.identities)
                     if self.identities.count(key) > 1]
            raise ValueError(f"Parties {twice!r} have one identity key: each party has its "
                             "own.")

    def point(self, index: int) -> int:
        """The point of Shamir's sharing of the party at `index`."""
        return index + 1

    def name(self, index: int) -> Hashable:
        return self.parties[index]

    def tag(self, purpose: bytes, *parts: bytes) -> bytes:
        return digest(self.session, purpose, *parts)


def default_threshold(n_parties: int) -> int:
    """The default threshold of a sum of `n_parties`: the fewest above two thirds of
    them, so that a coordinator that tells groups of parties different survivors needs
    more than a third colluding to unmask anyone (Bonawitz et al., 2017), while up to
    about a third may drop."""
    return 2 * n_parties // 3 + 1


def indices_bytes(indices) -> bytes:
    return b"".join(int(index).to_bytes(4, "big") for index in sorted(indices))


def default_colluding(n_parties: int, threshold: int) -> int:
    """The default number of parties that may collude with the coordinator, against
    whom the parties' noise in shares is sized: the most against whom the secure sum
    itself keeps a party's input hidden from a coordinator that deviates, ``2t - n - 1``
    (with more, telling two groups different survivors unmasks a party), and none
    where that is negative."""
    return max(0, 2 * threshold - n_parties - 1)

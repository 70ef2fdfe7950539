"""What the parties of a secure sum sign or commit to, as the bytes every side computes
alike: a party's round keys and its commitment to its self-mask seed (signed by its
identity key), the roster's tag, and the digests of the shares it deals (all signed at
once by its round signing key), against which each holder checks the shares it receives
and the coordinator the shares given back, before it combines a secret."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from . import _primitives as crypto
from ._agreement import Agreement, indices_bytes

# a party's round keys, and its entry of the roster: the keys, the commitment to its
# self-mask seed, and its identity's signature of both
KEYS = ("cipher", "mask", "signing")
ENTRY = (*KEYS, "commitment", "identity_signature")
# the secrets a party deals shares of, by the name its shares go by
SHARED = {"mask": "mask key", "seed": "self-mask seed"}


def commitment(agreement: Agreement, index: int, seed: bytes) -> bytes:
    """Party `index`'s commitment to its self-mask seed: a digest of the session, the
    party and the seed (256 random bits, which the digest hides)."""
    return agreement.tag(b"self-mask seed", indices_bytes([index]), seed)


def keys_message(agreement: Agreement, index: int, entry: Mapping[str, bytes]) -> bytes:
    """What party `index`'s identity key signs: its round keys and its commitment."""
    return agreement.tag(b"keys", indices_bytes([index]),
                         *(entry[name] for name in (*KEYS, "commitment")))


def signed_by_identity(agreement: Agreement, index: int, entry: Mapping[str, bytes]) -> bool:
    """Whether `entry` (of the roster's shape) is signed by the identity the agreement
    names for party `index`."""
    return crypto.verify(agreement.identities[index], entry["identity_signature"],
                         keys_message(agreement, index, entry))


def roster_tag(agreement: Agreement, roster: Mapping[int, Mapping[str, bytes]]) -> bytes:
    """What binds the shares and the confirmations to one roster: every entry's bytes,
    by party."""
    return agreement.tag(b"roster", *(
        index.to_bytes(4, "big") + b"".join(roster[index][name] for name in ENTRY)
        for index in sorted(roster)))


def share_digests(agreement: Agreement, tag: bytes) -> Callable[[int, int, str, bytes], bytes]:
    """The digest of a share under the roster of `tag`, as a function of its dealer,
    its holder, its secret's kind (of `SHARED`) and the share (521 random bits, which
    the digest hides)."""
    finish = crypto.digester(agreement.session, b"share", tag)
    return lambda dealer, holder, kind, share: finish(
        indices_bytes([dealer]), indices_bytes([holder]), SHARED[kind].encode(), share)


def dealt_message(agreement: Agreement, tag: bytes, dealer: int,
                  digests: Mapping[int, Mapping[str, bytes]]) -> bytes:
    """What `dealer`'s round signing key signs, once, of the shares it deals: their
    digests (`share_digests`), by holder and kind."""
    return agreement.tag(b"shares dealt", tag, indices_bytes([dealer]), *(
        index.to_bytes(4, "big") + b"".join(digests[index][kind] for kind in SHARED)
        for index in sorted(digests)))

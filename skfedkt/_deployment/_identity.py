"""A party's long-term identity for secure aggregation (`PartyIdentity`): an Ed25519 key
whose public key the consortium agrees on before the first round, as it would a TLS
certificate, and writes in its secure session. The party signs its keys of each round's
secure sum with it, so that every other party refuses keys the coordinator made up
(under validated sums, its report, which the helper checks). And the helper's key under
validated sums (`HelperKey`): an X25519 key the parties seal their shares to.

Its files are PEM, which OpenSSL and other tools read: the private key as PKCS #8,
unencrypted and readable by its user alone (mode 0600), the public key as
SubjectPublicKeyInfo. Both are read as hostile: bounded in size, one key of the one
kind, each misfit refused naming the file and the field.
"""

from __future__ import annotations

from os import PathLike
from typing import Any

from .._secure_sum import _primitives as crypto
from .._secure_sum._primitives import Ed25519PrivateKey, X25519PrivateKey
from ._archive import UploadLimits, read_file
from ._local_files import write_atomically
from ._secure_documents import Document

# an Ed25519 key's PEM takes some 120 bytes: room for line endings and a comment, no more
_MAX_PEM_BYTES = 4096
_PRIVATE, _PUBLIC = b"-----BEGIN PRIVATE KEY-----", b"-----BEGIN PUBLIC KEY-----"


class _KeyFile:
    """A private key kept in a PEM file at its owner, whose public key the consortium
    writes in its secure session."""

    # the private key type, and what to call it in refusals
    _kind: Any
    _what: str

    def __init__(self, key: Any):
        self.key: Any
        if not isinstance(key, self._kind):
            raise TypeError(f"A {type(self).__name__} is an {self._what} private key, got "
                            f"{type(key).__name__}.")
        self.key = key

    @classmethod
    def generate(cls) -> Any:
        """A fresh key, from the operating system's random source."""
        return cls(cls._kind.generate())

    @property
    def public_bytes(self) -> bytes:
        """The public key, 32 raw bytes: what the secure session names it by."""
        return crypto.public_bytes(self.key)

    def __repr__(self) -> str:  # the public key alone
        return f"{type(self).__name__}(public key {self.public_bytes.hex()})"

    def save(self, path: str | PathLike[str]) -> int:
        """Write the private key to `path` as PEM (PKCS #8), readable by this user alone
        (mode 0600); returns its size in bytes. Never send it."""
        return write_atomically(path, crypto.private_key_to_pem(self.key), private=True)

    def save_public(self, path: str | PathLike[str]) -> int:
        """Write the public key to `path` as PEM (SubjectPublicKeyInfo), to send to the
        consortium; returns its size in bytes."""
        return write_atomically(path, crypto.public_key_to_pem(self.public_bytes,
                                                               self._kind))

    @classmethod
    def load(cls, path: str | PathLike[str]) -> Any:
        """The key whose private key `save` wrote to `path`."""
        return cls.from_pem(_read(path), str(path))

    @classmethod
    def load_public(cls, path: str | PathLike[str]) -> bytes:
        """The public key (32 raw bytes) that `save_public` wrote to `path`."""
        return cls.public_from_pem(_read(path), str(path))

    @classmethod
    def from_pem(cls, data: bytes, name: str = "the private key") -> Any:
        """The key of the private key's PEM `data`, read as hostile."""
        key = crypto.private_key_from_pem(_checked_pem(data, _PRIVATE, name), cls._kind)
        if key is None:
            raise _refusal(name, "key", f"not an unencrypted {cls._what} private key")
        return cls(key)

    @classmethod
    def public_from_pem(cls, data: bytes, name: str = "the public key") -> bytes:
        """The public key (32 raw bytes) of the PEM `data`, read as hostile."""
        public = crypto.public_key_from_pem(_checked_pem(data, _PUBLIC, name), cls._kind)
        if public is None:
            raise _refusal(name, "key", f"not an {cls._what} public key")
        return public


class PartyIdentity(_KeyFile):
    """A party's long-term identity key for secure aggregation.

    Make it once (`generate`, or ``skfedkt identity --out h0.key``), keep the private
    key on the party's machine (`save`: a file its user alone reads), and send the
    public key (`save_public`) to whoever writes the consortium's secure session, which
    names every party's (``secure_session(..., identities=...)``). Each round, the party
    step signs the party's keys (or, under validated sums, its report) with it
    (``fit_party(..., identity=)``), and every other party (or the helper) checks that
    signature.

    It is not Flower's SuperNode authentication key: that one lets the SuperLink know
    a node; this one lets every party check the keys the coordinator passes on.

    Parameters
    ----------
    key : cryptography's Ed25519PrivateKey
        The private key.

    Examples
    --------
    >>> from skfedkt import PartyIdentity
    >>> identity = PartyIdentity.generate()
    >>> len(identity.public_bytes)
    32
    """

    _kind, _what = Ed25519PrivateKey, "Ed25519"


class HelperKey(_KeyFile):
    """The helper's key under validated sums: an X25519 key to which each party seals
    its share for the helper, and the coordinator its verify key (HPKE, RFC 9180), so
    that the coordinator, which passes them on, opens neither.

    Make it once at the helper (`generate`, or ``skfedkt helper-key --out helper.key``),
    keep the private key there (`save`), and send the public key (`save_public`) to
    whoever writes the consortium's secure session (``secure_session(...,
    helper=...)``).

    Parameters
    ----------
    key : cryptography's X25519PrivateKey
        The private key.

    Examples
    --------
    >>> from skfedkt import HelperKey
    >>> helper = HelperKey.generate()
    >>> len(helper.public_bytes)
    32
    """

    _kind, _what = X25519PrivateKey, "X25519"

    @property
    def private_bytes(self) -> bytes:
        """The 32 raw secret bytes, which HPKE opens sealed messages with."""
        return crypto.private_bytes(self.key)


def identity_key(identity: Any, who: str) -> Ed25519PrivateKey:
    """The private key of `identity` (a `PartyIdentity`, or cryptography's
    Ed25519PrivateKey), refused naming `who` otherwise."""
    if isinstance(identity, PartyIdentity):
        return identity.key
    if isinstance(identity, Ed25519PrivateKey):
        return identity
    raise TypeError(f"{who}: identity is the party's private identity key "
                    "(skfedkt.PartyIdentity.load(path), written by skfedkt identity), got "
                    f"{type(identity).__name__}.")


def _read(path: str | PathLike[str]) -> bytes:
    return read_file(path, f"The identity key {path}",
                     UploadLimits(max_file_bytes=_MAX_PEM_BYTES))


def _refusal(name: str, field: str, reason: str) -> ValueError:
    return Document(f"Identity key refused ({name})").refuse(field, reason)


def _checked_pem(data: Any, begins: bytes, name: str) -> bytes:
    """`data`, once it is PEM of the one kind that starts with `begins`."""
    if not isinstance(data, bytes):
        raise _refusal(name, "bytes", f"a {type(data).__name__}, not bytes")
    if len(data) > _MAX_PEM_BYTES:
        raise _refusal(name, "bytes", f"{len(data)} bytes, more than {_MAX_PEM_BYTES}")
    if not data.startswith(begins) or data.count(b"-----BEGIN") != 1:
        reason = f"not one PEM key, beginning {begins.decode()!r}"
        if begins == _PUBLIC and b"PRIVATE KEY" in data:
            reason += ": a private key, which stays with its party (give its .pub file)"
        raise _refusal(name, "format", reason)
    return data

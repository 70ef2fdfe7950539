"""The cryptographic primitives of the secure sum, every one from `cryptography`: X25519
key agreement, HKDF-SHA256, AES-256-CTR to expand a 256-bit seed into a mask, AES-GCM to
seal the shares a party sends another through the coordinator, Ed25519 signatures (of a
party's round keys and its shares' digests, and of its long-term identity), and the PEM
files of an identity key."""

from __future__ import annotations

import functools
import hashlib
import secrets
from collections.abc import Callable
from typing import Any

import numpy as np
from cryptography.exceptions import InvalidSignature, InvalidTag, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

KEY_BYTES = 32
SIGNATURE_BYTES = 64  # Ed25519's
DIGEST_BYTES = 32  # SHA-256's
SEAL_OVERHEAD = 12 + 16  # AES-GCM's nonce and tag around what `seal` seals


def new_agreement_key() -> X25519PrivateKey:
    return X25519PrivateKey.generate()


def new_signing_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def new_identity_key() -> Ed25519PrivateKey:
    """A party's long-term identity key: an Ed25519 key whose public key the consortium
    agrees on out of band, as it would a TLS certificate."""
    return Ed25519PrivateKey.generate()


def is_identity_key(key: object) -> bool:
    return isinstance(key, Ed25519PrivateKey)


# the public key type of each private key type a key file holds
_PUBLIC_OF: dict[Any, Any] = {Ed25519PrivateKey: Ed25519PublicKey,
                              X25519PrivateKey: X25519PublicKey}


def private_key_to_pem(key: Ed25519PrivateKey | X25519PrivateKey) -> bytes:
    """A private key as PEM (PKCS #8, unencrypted: the file's mode protects it), which
    OpenSSL and other tools read."""
    return key.private_bytes(encoding=serialization.Encoding.PEM,
                             format=serialization.PrivateFormat.PKCS8,
                             encryption_algorithm=serialization.NoEncryption())


def public_key_to_pem(public: bytes, kind: Any = Ed25519PrivateKey) -> bytes:
    """The raw public key of a `kind` private key as PEM (SubjectPublicKeyInfo)."""
    return _PUBLIC_OF[kind].from_public_bytes(public).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def private_key_from_pem(data: bytes, kind: Any = Ed25519PrivateKey) -> Any:
    """The private key of type `kind` of unencrypted PEM `data`; None for any other."""
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return None
    return key if isinstance(key, kind) else None


def public_key_from_pem(data: bytes, kind: Any = Ed25519PrivateKey) -> bytes | None:
    """The raw public key of PEM `data`, of a `kind` private key; None for any other."""
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return None
    return (key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            if isinstance(key, _PUBLIC_OF[kind]) else None)


def agreement_key_from_bytes(raw: bytes) -> X25519PrivateKey:
    return X25519PrivateKey.from_private_bytes(raw)


def signing_key_from_bytes(raw: bytes) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(raw)


def public_bytes(key: X25519PrivateKey | Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw,
                                         serialization.PublicFormat.Raw)


def private_bytes(key: X25519PrivateKey | Ed25519PrivateKey) -> bytes:
    """The raw 32 secret bytes of a private key, which the `..._from_bytes` loaders take
    back."""
    return key.private_bytes(encoding=serialization.Encoding.Raw,
                             format=serialization.PrivateFormat.Raw,
                             encryption_algorithm=serialization.NoEncryption())


def agreed_secret(private: X25519PrivateKey | bytes, public: bytes, purpose: bytes,
                  session: bytes) -> bytes:
    """The 256-bit secret two parties derive from one's private and the other's public
    key, for one purpose in one session (HKDF-SHA256 over the X25519 secret)."""
    if isinstance(private, bytes):
        private = X25519PrivateKey.from_private_bytes(private)
    shared = private.exchange(X25519PublicKey.from_public_bytes(public))
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None,
                info=b"skfedkt secure sum/" + purpose + b"/" + session).derive(shared)


class Masker:
    """Adds or removes masks of `length` words in place. A mask is `length` pseudo-random
    64-bit words from a 256-bit seed: AES-256's keystream in counter mode from a zero
    counter (each seed expands one mask). Each is expanded into one buffer kept for
    every mask: a party or the coordinator expands dozens of masks of one length, and a
    fresh buffer for each costs more than AES itself."""

    def __init__(self, length: int):
        self._zeros = bytes(8 * length)
        # `update_into` wants room for a block beyond what it writes
        self._buffer = bytearray(8 * length + 15)
        self._mask = np.frombuffer(self._buffer, dtype="<u8", count=length)

    def add(self, words: np.ndarray, seed: bytes, subtract: bool = False) -> None:
        """`words` plus (or minus) the mask of `seed`, modulo 2**64, in place."""
        cipher = Cipher(algorithms.AES(seed), modes.CTR(bytes(16))).encryptor()
        cipher.update_into(self._zeros, self._buffer)
        (np.subtract if subtract else np.add)(words, self._mask, out=words)


def seal(key: bytes, plaintext: bytes, associated: bytes) -> bytes:
    """`plaintext` encrypted and authenticated (AES-GCM, a random 96-bit nonce first),
    bound to `associated`, which opening must repeat."""
    nonce = secrets.token_bytes(12)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, associated)


def open_sealed(key: bytes, sealed: bytes, associated: bytes) -> bytes | None:
    """What `seal` sealed, or None when the key, the bytes or `associated` differ."""
    try:
        return AESGCM(key).decrypt(sealed[:12], sealed[12:], associated)
    except (InvalidTag, ValueError):
        return None


def verify(public: bytes, signature: bytes, message: bytes) -> bool:
    """Whether `signature` is the Ed25519 signature of `message` by `public` (False for
    anything but bytes)."""
    return all(isinstance(part, bytes) for part in (public, signature, message)) and (
        _verified(public, signature, message))


# A verification's answer depends on its bytes alone: kept, since in `fit`'s one process
# every party checks the same roster and survivors (a party's own process sees each once)
@functools.lru_cache(maxsize=1 << 15)
def _verified(public: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def digest(*parts: bytes) -> bytes:
    """SHA-256 of the parts, each prefixed by its length (no two lists collide)."""
    return digester(*parts)()


def digester(*parts: bytes) -> Callable[..., bytes]:
    """``digest(*parts, *more)`` as a function of `more`, `parts` hashed once: for the
    thousands of digests of a sum that begin alike."""
    first = hashlib.sha256()
    for part in parts:
        first.update(len(part).to_bytes(8, "big") + part)

    def finish(*more: bytes) -> bytes:
        hashed = first.copy()
        for part in more:
            hashed.update(len(part).to_bytes(8, "big") + part)
        return hashed.digest()

    return finish


def random_seed() -> bytes:
    """A fresh 256-bit secret from the operating system's random source."""
    return secrets.token_bytes(KEY_BYTES)

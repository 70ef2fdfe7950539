"""Sealing to the helper: HPKE (RFC 9180) in its base mode, with DHKEM(X25519,
HKDF-SHA256), HKDF-SHA256 and ChaCha20Poly1305 (the configuration DAP's aggregators
publish), from pycryptodome. A party's share for the helper and the coordinator's
verify key travel through the coordinator sealed so: the helper alone opens them."""

from __future__ import annotations

from Crypto.Protocol import HPKE
from Crypto.Protocol.DH import import_x25519_private_key, import_x25519_public_key

# the encapsulated key that begins every sealed message: an X25519 public key
ENC_SIZE = 32
_AEAD = HPKE.AEAD.CHACHA20_POLY1305


def seal_to(public: bytes, info: bytes, plaintext: bytes, associated: bytes) -> bytes:
    """`plaintext` sealed to the X25519 public key `public` (32 raw bytes), bound to
    `info` and `associated`, which opening must repeat."""
    sender = HPKE.new(receiver_key=import_x25519_public_key(public), aead_id=_AEAD,
                      info=info)
    return sender.enc + sender.seal(plaintext, associated)


def open_sealed_to(private: bytes, info: bytes, sealed: bytes,
                   associated: bytes) -> bytes | None:
    """What `seal_to` sealed to the public key of the X25519 private key `private` (32
    raw bytes); None where the key, the bytes, `info` or `associated` differ."""
    if len(sealed) < ENC_SIZE:
        return None
    try:
        receiver = HPKE.new(receiver_key=import_x25519_private_key(private), aead_id=_AEAD,
                            enc=sealed[:ENC_SIZE], info=info)
        return receiver.unseal(sealed[ENC_SIZE:], associated)
    except ValueError:  # a malformed key, or a tag that does not match
        return None

"""Shamir's secret sharing of 32-byte secrets: any `threshold` of the shares give the
secret back, fewer say nothing about it.

Secret sharing is arithmetic, not a cipher: a random polynomial of degree
``threshold - 1`` over the prime field of ``2**521 - 1`` (a Mersenne prime, larger than
any 32-byte secret) whose constant term is the secret, evaluated at ``x = 1 .. n``; its
coefficients come from the operating system's random source (`secrets`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence

PRIME = 2**521 - 1
SECRET_BYTES = 32
SHARE_BYTES = 66  # an element of the field, big-endian


def split(secret: bytes, xs: Sequence[int], threshold: int) -> dict[int, bytes]:
    """The shares of `secret` at the points `xs` (distinct, from 1), any `threshold` of
    which give it back."""
    if len(secret) != SECRET_BYTES:
        raise ValueError(f"A shared secret is {SECRET_BYTES} bytes, got {len(secret)}.")
    if not 1 <= threshold <= len(xs) or len(set(xs)) != len(xs) or min(xs) < 1:
        raise ValueError(f"Cannot share at {list(xs)} with threshold {threshold}.")
    coefficients = [int.from_bytes(secret, "big")] + [
        secrets.randbelow(PRIME) for _ in range(threshold - 1)]
    shares = {}
    for x in xs:
        value = 0
        for coefficient in reversed(coefficients):  # Horner's rule
            value = (value * x + coefficient) % PRIME
        shares[x] = value.to_bytes(SHARE_BYTES, "big")
    return shares


def combine(shares: Mapping[int, bytes]) -> bytes:
    """The secret that the shares (point: share) were split from: Lagrange's
    interpolation at 0. Give at least the threshold's number of shares: fewer give a
    wrong secret, which no share can tell."""
    points = [(x, int.from_bytes(share, "big")) for x, share in shares.items()]
    secret = 0
    for x_j, y_j in points:
        numerator = denominator = 1
        for x_m, _ in points:
            if x_m != x_j:
                numerator = numerator * -x_m % PRIME
                denominator = denominator * (x_j - x_m) % PRIME
        secret = (secret + y_j * numerator * pow(denominator, -1, PRIME)) % PRIME
    if secret >= 2 ** (8 * SECRET_BYTES):
        raise ValueError("The shares do not combine into a secret: too few, or altered.")
    return secret.to_bytes(SECRET_BYTES, "big")

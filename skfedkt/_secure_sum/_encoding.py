"""Numbers as words modulo 2**64, the group the secure sum adds in: integers exactly
(two's complement) within a bound, floats in fixed point with a stated error bound, each
refused where the sum of the parties' values could overflow 63 bits."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

import numpy as np

WORD = np.dtype("<u8")
_LARGEST = 2 ** 63 - 1  # of a sum that decodes


def encode_integers(values: np.ndarray, bound: int | None = None) -> np.ndarray:
    """Integers as words: a sum of them decodes exactly while it fits in 63 bits.

    Parameters
    ----------
    values : array-like of int
        The integers to sum.
    bound : int, default=None
        The largest magnitude a value may have, agreed so that the sum of every
        party's fits (`n` parties: ``n * bound < 2**63``). None: any 64-bit integer.

    Returns
    -------
    ndarray of uint64
        The words, flattened.

    Raises
    ------
    TypeError
        Values that are not integers.
    ValueError
        A value beyond `bound`, or beyond 64-bit integers.
    """
    values = np.asarray(values)
    if values.dtype.kind not in "iub":
        raise TypeError(f"Only integers are summed exactly, got {values.dtype}.")
    limit = _LARGEST if bound is None else bound
    if values.size:
        beyond = max(int(values.max()), -int(values.min()))
        if beyond > limit:
            raise ValueError(f"An integer of magnitude {beyond} is beyond the "
                             + ("64-bit integers'" if bound is None else "agreed")
                             + f" bound {limit}: the secure sum would wrap it around.")
    return values.astype(np.int64).ravel().view(WORD)


def decode_integers(words: np.ndarray) -> np.ndarray:
    return np.asarray(words, dtype=WORD).view(np.int64)


@dataclass(frozen=True)
class FixedPoint:
    """Floats within ``[-bound, bound]`` as integers ``round(x * scale)``, summed by up
    to `parties` parties.

    The scale is a power of two, so that ``x * scale`` and the decoding's division are
    exact. Each value is off by at most ``1 / (2 * scale)`` once encoded, so the exact
    sum of the encoded values of `n` parties by at most ``n / (2 * scale)``; decoded as
    a float, that sum is rounded once more, to nearest (`error_bound` states both). A
    scale and a bound at which `parties` values could sum beyond 63 bits are refused
    (``_deployment._secure.fixed_point_for`` sizes the scale).
    """

    scale: float = 2.0 ** 32
    bound: float = 1.0
    parties: int = 1

    def __post_init__(self):
        if not (math.isfinite(self.scale) and self.scale > 0
                and math.frexp(self.scale)[0] == 0.5):
            raise ValueError(f"A fixed-point scale is a power of two, got {self.scale!r}: "
                             "then encoding and decoding multiply and divide exactly.")
        if not (math.isfinite(self.bound) and self.bound > 0):
            raise ValueError(f"A fixed-point bound is a positive finite float, got "
                             f"{self.bound!r}.")
        if isinstance(self.parties, bool) or not isinstance(self.parties, Integral) or (
                self.parties < 1):
            raise ValueError(f"A fixed-point encoding sums the values of at least one "
                             f"party, got parties={self.parties!r}.")
        # an encoded value is at most the bound's encoding, rounded up
        if not math.isfinite(self.bound * self.scale) or (
                self.parties * math.ceil(self.bound * self.scale) > _LARGEST):
            raise ValueError(f"{self.parties} values within {self.bound:.4g} at the scale "
                             f"2**{math.log2(self.scale):g} can sum beyond 63 bits: take a "
                             "smaller scale or bound (fixed_point_for sizes the scale).")

    def encode(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=float).ravel()
        if not np.isfinite(values).all():
            raise ValueError("Values to sum securely must be finite.")
        beyond = np.abs(values).max(initial=0.0)
        if beyond > self.bound:
            raise ValueError(f"A value of magnitude {beyond:.4g} is beyond the agreed "
                             f"bound {self.bound:.4g} of the fixed-point encoding.")
        return np.rint(values * self.scale).astype(np.int64).view(WORD)

    def decode(self, words: np.ndarray) -> np.ndarray:
        """The floats of the words of a sum, each the nearest float to the exact sum
        of the encoded values."""
        integers = decode_integers(words)
        # an int64 converted to a float may round either way (C leaves it to the
        # platform); each 32-bit half converts exactly, and their sum rounds once, to
        # nearest; dividing by a power of two is exact
        high = (integers >> 32).astype(float) * 2.0 ** 32
        low = (integers & 0xFFFFFFFF).astype(float)
        return (high + low) / self.scale

    def error_bound(self, n_values: int) -> float:
        """The most a decoded sum of `n_values` values (one per party) is off from their
        exact sum: each value's rounding to the scale, ``1 / (2 * scale)``, and the
        decoded float's rounding to nearest, at most ``2**-53`` of its magnitude, itself
        at most ``n_values * (bound + 1 / (2 * scale))``."""
        if not 0 <= n_values <= self.parties:
            raise ValueError(f"This encoding sums the values of up to {self.parties} "
                             f"parties, not {n_values}.")
        encoding = n_values / (2 * self.scale)
        return encoding + (n_values * self.bound + encoding) * 2.0 ** -53

"""Numbers as words modulo 2**64, the group the secure sum adds in: integers exactly
(two's complement), floats in fixed point with a stated error bound."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WORD = np.dtype("<u8")


def encode_integers(values: np.ndarray) -> np.ndarray:
    """Integers as words: a sum of them decodes exactly while it fits in 63 bits."""
    values = np.asarray(values)
    if values.dtype.kind not in "iub":
        raise TypeError(f"Only integers are summed exactly, got {values.dtype}.")
    return values.astype(np.int64).ravel().view(WORD)


def decode_integers(words: np.ndarray) -> np.ndarray:
    return np.asarray(words, dtype=WORD).view(np.int64)


@dataclass(frozen=True)
class FixedPoint:
    """Floats within ``[-bound, bound]`` as integers ``round(x * scale)``.

    Each value is off by at most ``1 / (2 * scale)``, so a sum of `n` values by at most
    ``n / (2 * scale)`` (`error_bound`); the sum of `n` values fits while
    ``n * bound * scale < 2**63`` (the scale of ``_deployment._secure.fixed_point_for``)."""

    scale: float = 2.0 ** 32
    bound: float = 1.0

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
        return decode_integers(words) / self.scale

    def error_bound(self, n_values: int) -> float:
        """The most a decoded sum of `n_values` values is off by."""
        return n_values / (2 * self.scale)

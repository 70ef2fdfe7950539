"""Privacy noise added by the parties, in shares whose sum carries the mechanism's noise,
so that the coordinator of a secure sum never sees a noise-free count.

A discrete Laplace variable, ``P(k)`` proportional to ``exp(-gamma * |k|)``, is the
difference of two geometric variables, and a geometric variable is the sum of `n`
Pólya (negative binomial, shape ``1 / n``) variables: so each of `n` parties adds the
difference of two Pólya draws, and any `n` of the shares sum to the discrete Laplace
noise exactly. Shares are sized for the threshold of the sum, the fewest parties that
can remain: more survivors add more noise (the sum then carries the discrete Laplace
noise plus independent noise, no less private), fewer are refused by the sum itself.
"""

from __future__ import annotations

import numpy as np


def discrete_laplace_share(gamma: float, n_shares: int, size, random_state) -> np.ndarray:
    """One party's share (int64 array of shape `size`) of discrete Laplace noise of
    parameter `gamma`, drawn from `random_state` (a RandomState or a Generator):
    `n_shares` shares sum to it."""
    if not gamma > 0 or n_shares < 1:
        raise ValueError(f"gamma must be positive and n_shares at least 1, got {gamma!r} "
                         f"and {n_shares!r}.")
    success = -np.expm1(-gamma)  # 1 - exp(-gamma): a geometric variable's parameter
    shape = 1.0 / n_shares
    return (random_state.negative_binomial(shape, success, size=size)
            - random_state.negative_binomial(shape, success, size=size)).astype(np.int64)


def discrete_laplace_pmf(gamma: float, k: np.ndarray) -> np.ndarray:
    """``P(k)`` of the discrete Laplace distribution of parameter `gamma`."""
    return np.tanh(gamma / 2) * np.exp(-gamma * np.abs(k))

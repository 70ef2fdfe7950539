"""Privacy accounting of bit-flip (randomized-response) noise on shared one-hot labels
(FedCT): the flip probability of a budget, and the composition of the rounds.
"""

from numbers import Integral, Real

import numpy as np
from scipy.special import expit

from .._engine._compat import Interval, validate_params


def bit_flip_probability(epsilon, sensitivity):
    """Flip probability ``p = 1 / (1 + exp(epsilon / sensitivity))`` of every shared bit.

    Flipping every bit of a binary matrix independently with probability `p` is
    randomized response with ``log((1 - p) / p) = epsilon / sensitivity`` per bit, so a
    neighbour that changes at most `sensitivity` bits is `epsilon`-DP.

    Parameters
    ----------
    epsilon : float
        Privacy budget of one release.
    sensitivity : float
        Largest number of bits one neighbour changes.

    Returns
    -------
    p : float

    Examples
    --------
    >>> from skfedkt.privacy import bit_flip_probability
    >>> round(bit_flip_probability(1.0, 2), 4)
    0.3775
    """
    return float(expit(-epsilon / sensitivity))  # no overflow for a huge epsilon


@validate_params(
    {
        "n_rounds": [Interval(Integral, 0, None, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "sensitivity": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
def bit_flip_epsilon(n_rounds, *, epsilon, sensitivity, delta):
    """``(epsilon, delta)`` of `n_rounds` bit-flip releases, by dp-accounting's RDP accountant.

    Each release is ``sensitivity`` randomized responses of ``epsilon / sensitivity``
    each (on the bits a neighbour may change); the accountant composes all
    ``n_rounds * sensitivity`` of them. Many small per-bit budgets compose far better
    than ``n_rounds * epsilon`` (pure composition), at the cost of a `delta`.

    Parameters
    ----------
    n_rounds : int
        Number of releases.
    epsilon : float
        Pure budget of one release.
    sensitivity : int
        Bits one neighbour changes per release.
    delta : float
        Failure probability.

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> from skfedkt.privacy import bit_flip_epsilon
    >>> round(bit_flip_epsilon(20, epsilon=1.0, sensitivity=740, delta=1e-5), 2)
    0.64
    """
    if n_rounds == 0:
        return 0.0
    import dp_accounting
    from dp_accounting.privacy_accountant import NeighboringRelation
    from dp_accounting.rdp import RdpAccountant

    bit = dp_accounting.RandomizedResponseDpEvent(
        noise_parameter=2 * bit_flip_probability(epsilon, sensitivity), num_buckets=2
    )
    accountant = RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    accountant.compose(dp_accounting.SelfComposedDpEvent(bit, int(np.ceil(sensitivity)) * n_rounds))
    return float(accountant.get_epsilon(delta))

"""Noise in shares: any threshold's number of parties' shares sum to the mechanism's
discrete Laplace noise, and more survivors to a known wider distribution."""

import numpy as np
import pytest
from scipy import stats

from skfedkt._privacy._noise_shares import discrete_laplace_pmf, discrete_laplace_share

N_DRAWS = 10_000


def _chi_square_pvalue(draws, pmf_of):
    """Goodness of fit of integer draws to a pmf: the values expected at least 5 times
    are bins of their own, every other value one bin."""
    support = np.arange(draws.min(), draws.max() + 1)
    expected = pmf_of(support) * len(draws)
    observed = np.bincount(draws - draws.min())
    keep = expected >= 5
    return stats.chisquare(
        np.append(observed[keep], len(draws) - observed[keep].sum()),
        np.append(expected[keep], len(draws) - expected[keep].sum())).pvalue


def _polya_difference_pmf(gamma, shape, support):
    """P(k) of the difference of two negative binomial variables of `shape` and success
    ``1 - exp(-gamma)``."""
    success = -np.expm1(-gamma)
    side = stats.nbinom.pmf(np.arange(400), shape, success)
    difference = np.convolve(side, side[::-1])  # index i: k = i - 399
    return difference[np.asarray(support) + 399]


@pytest.mark.parametrize("gamma", [0.05, 0.5])
def test_the_thresholds_shares_sum_to_discrete_laplace_noise(gamma):
    rng = np.random.RandomState(0)
    threshold, n_parties = 3, 5
    shares = np.array([discrete_laplace_share(gamma, threshold, N_DRAWS, rng)
                       for _ in range(n_parties)])
    dropped = shares[:threshold].sum(axis=0)  # two of five parties lost
    assert _chi_square_pvalue(dropped, lambda k: discrete_laplace_pmf(gamma, k)) > 1e-3
    everyone = shares.sum(axis=0)  # no party lost: shape 5/3 on each side
    assert _chi_square_pvalue(
        everyone, lambda k: _polya_difference_pmf(gamma, n_parties / threshold, k)) > 1e-3
    assert everyone.var() > dropped.var()


def test_the_pmf_is_a_distribution():
    k = np.arange(-2000, 2001)
    assert discrete_laplace_pmf(0.05, k).sum() == pytest.approx(1, abs=1e-12)

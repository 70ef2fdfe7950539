"""Privacy accounting of Gaussian noise on vote histograms (GNMax, Papernot et al. 2018):
the exact data-independent composition and the data-dependent Renyi-DP bound.
"""

from numbers import Integral, Real

import numpy as np
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.special import logsumexp
from scipy.stats import norm

from .._engine._compat import Interval, validate_params
from ._accounting import DEFAULT_ORDERS, ONE_VOTE_L2, epsilon_from_log_moments, checked_orders


@validate_params(
    {
        "n_releases": [Interval(Integral, 0, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "sensitivity": [Interval(Real, 0, None, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
def gaussian_epsilon(n_releases, *, sigma, delta, sensitivity):
    """Epsilon of `n_releases` Gaussian histograms, composed exactly.

    Each release adds Gaussian noise of standard deviation `sigma` to every count of a
    histogram of L2 sensitivity `sensitivity`; the noisy argmax, or the normalised
    noisy histogram, is post-processing of it. One release is ``mu``-Gaussian DP with
    ``mu = sensitivity / sigma``, and ``n`` of them compose to ``sqrt(n) mu``-Gaussian
    DP exactly (Dong, Roth and Su, 2022). The epsilon is the exact one of that
    guarantee at `delta` (Balle and Wang, 2018): the root of
    ``Phi(mu / 2 - epsilon / mu) - exp(epsilon) Phi(-mu / 2 - epsilon / mu) = delta``.

    Parameters
    ----------
    n_releases : int
        Number of noisy histograms released.
    sigma : float
        Standard deviation of the noise on every count.
    delta : float
        Failure probability.
    sensitivity : float
        L2 sensitivity of one histogram: ``sqrt(2)`` when one voter changes its vote,
        ``sqrt(2) * s`` when one party changes its ``s`` votes.

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> from skfedkt.privacy import gaussian_epsilon
    >>> round(gaussian_epsilon(81, sigma=25, delta=1e-5, sensitivity=2 ** 0.5), 2)
    2.03
    """
    if n_releases == 0:
        return 0.0
    return gdp_epsilon(np.sqrt(n_releases) * sensitivity / sigma, delta=delta)


def gdp_epsilon(mu, *, delta):
    """The exact epsilon at `delta` of a ``mu``-Gaussian-DP guarantee (Balle and Wang,
    2018): Gaussian releases of different noise compose to
    ``mu = sqrt(sum(mu_i ** 2))``.

    Examples
    --------
    >>> from skfedkt._privacy._gaussian import gdp_epsilon
    >>> round(gdp_epsilon(1.0, delta=1e-5), 3)
    4.377
    """
    if mu == 0:
        return 0.0

    def excess(epsilon):  # delta(epsilon) - delta, decreasing in epsilon
        return (norm.cdf(mu / 2 - epsilon / mu)
                - np.exp(epsilon + norm.logcdf(-mu / 2 - epsilon / mu)) - delta)

    if excess(0.0) <= 0:
        return 0.0
    upper = 1.0
    while excess(upper) > 0:
        upper *= 2
    return float(brentq(excess, 0.0, upper, xtol=1e-10))


@validate_params(
    {
        "n_releases": [Interval(Integral, 1, None, closed="left")],
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "sensitivity": [Interval(Real, 0, None, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
def gaussian_sigma(n_releases, *, epsilon, delta, sensitivity):
    """The noise that makes `n_releases` Gaussian histograms ``(epsilon, delta)``-DP.

    The inverse of `gaussian_epsilon`: the smallest standard deviation whose exact
    composition (Gaussian DP) meets `epsilon` at `delta`.

    Parameters
    ----------
    n_releases : int
        Number of noisy histograms to be released.
    epsilon : float
        The budget of all of them together.
    delta : float
        Failure probability.
    sensitivity : float
        L2 sensitivity of one histogram.

    Returns
    -------
    sigma : float

    Examples
    --------
    >>> from skfedkt.privacy import gaussian_epsilon, gaussian_sigma
    >>> sigma = gaussian_sigma(100, epsilon=4.0, delta=1e-5, sensitivity=2 ** 0.5)
    >>> round(sigma, 2)
    15.29
    >>> round(gaussian_epsilon(100, sigma=sigma, delta=1e-5, sensitivity=2 ** 0.5), 6)
    4.0
    """
    upper = 1.0
    while gdp_epsilon(upper, delta=delta) < epsilon:
        upper *= 2
    mu = brentq(lambda mu: gdp_epsilon(mu, delta=delta) - epsilon, 0.0, upper, xtol=1e-12)
    return float(np.sqrt(n_releases) * sensitivity / mu)


def unanimous_flip_probability(n_voters, n_classes, sigma):
    """Probability that Gaussian noise of standard deviation `sigma` on every count
    turns the argmax of a unanimous histogram (`n_voters` votes for one of `n_classes`
    classes) to another class.

    Examples
    --------
    >>> from skfedkt.privacy import unanimous_flip_probability
    >>> round(unanimous_flip_probability(10, 2, 10.0), 4)  # Phi(-10 / (10 sqrt(2)))
    0.2398
    """
    # the top count stays ahead of n_classes - 1 independent noisy zeros
    stays, _ = quad(lambda z: norm.pdf(z) * norm.cdf(n_voters / sigma + z) ** (n_classes - 1),
                    -np.inf, np.inf)
    return float(np.clip(1.0 - stays, 0.0, 1.0))


def _gnmax_log_q(vote_counts, sigma):
    """Papernot et al. (2018)'s bound on log P[GNMax's answer != the true argmax], per
    query (Proposition 7): a union bound over the other classes, each of which wins only
    if the difference of two N(0, sigma^2) draws exceeds its gap to the top count; at
    most log(1 - 1/n_classes)."""
    n_queries, n_classes = vote_counts.shape
    top = vote_counts.argmax(axis=1)
    gaps = vote_counts[np.arange(n_queries), top][:, None] - vote_counts
    log_tails = norm.logsf(gaps, scale=np.sqrt(2) * sigma)
    log_tails[np.arange(n_queries), top] = -np.inf  # the top class itself
    return np.minimum(logsumexp(log_tails, axis=1), np.log1p(-1 / n_classes))


def _log1mexp(x):
    """log(1 - exp(x)) for x <= 0, accurate at both ends."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x < -np.log(2), np.log1p(-np.exp(x)), np.log(-np.expm1(x)))


def _gnmax_rdp(log_q, sigma, orders):
    """Renyi DP at `orders` (each > 1) of one GNMax answer per entry of `log_q`, for
    voters that each move the histogram by sqrt(2) in L2 norm: the data-dependent bound
    of Papernot et al. (2018, Theorem 6, with the higher orders mu of Proposition 10)
    where its conditions hold and it is smaller, else the data-independent
    ``order / sigma^2``. A query whose answer cannot change (q = 0) costs nothing.

    Returns an array of shape (n_queries, n_orders).
    """
    log_q = np.asarray(log_q, dtype=float)[:, None]
    orders = np.asarray(orders, dtype=float)[None, :]
    variance = sigma**2
    data_independent = np.broadcast_to(orders / variance, (log_q.shape[0], orders.shape[1]))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mu2 = sigma * np.sqrt(-log_q)
        mu1 = mu2 + 1
        eps1, eps2 = mu1 / variance, mu2 / variance
        # where q is small enough for the bound to be increasing in q, and A positive
        applies = ((mu2 > 1) & (-log_q > eps2) & (orders < mu1) & (
            log_q <= (mu2 - 1) * eps2 - mu2 * (np.log1p(1 / (mu1 - 1))
                                              + np.log1p(1 / (mu2 - 1)))))
        log_1q = _log1mexp(log_q)
        log_a = (orders - 1) * (log_1q - _log1mexp((log_q + eps2) * (1 - 1 / mu2)))
        log_b = (orders - 1) * (eps1 - log_q / (mu1 - 1))
        data_dependent = np.logaddexp(log_1q + log_a, log_q + log_b) / (orders - 1)
    rdp = np.where(applies, np.minimum(data_independent, data_dependent), data_independent)
    return np.where(np.isneginf(log_q), 0.0, rdp)


def gaussian_log_moments(*, sigma, sensitivity, orders=DEFAULT_ORDERS):
    """Log moments ``l * RDP(l + 1)`` of one Gaussian release: Renyi DP of order ``a``
    is ``a * sensitivity^2 / (2 sigma^2)`` (Mironov, 2017).

    Examples
    --------
    >>> from skfedkt._privacy._gaussian import gaussian_log_moments
    >>> gaussian_log_moments(sigma=1.0, sensitivity=2 ** 0.5, orders=[1, 2])
    array([2., 6.])
    """
    orders = np.asarray(orders, dtype=float)
    return orders * (orders + 1) * sensitivity**2 / (2 * sigma**2)


def gnmax_log_moments(vote_counts, *, sigma, sensitivity=ONE_VOTE_L2, orders=DEFAULT_ORDERS):
    """Log moments ``alpha(l) = l * RDP(l + 1)`` of GNMax answers, summed over queries.

    A histogram of L2 sensitivity `sensitivity` with noise `sigma` answers as one whose
    voters move it by ``sqrt(2)``, with counts and noise both scaled by
    ``sqrt(2) / sensitivity``; that is how one party's ``s`` votes are accounted.

    Parameters
    ----------
    vote_counts, sigma, sensitivity, orders
        As in `gnmax_epsilon`.

    Returns
    -------
    log_moments : ndarray of shape (n_orders,)
    """
    orders = checked_orders(orders)
    vote_counts = np.atleast_2d(np.asarray(vote_counts, dtype=float))
    if vote_counts.size == 0:
        return np.zeros(len(orders))
    scale = ONE_VOTE_L2 / sensitivity
    sigma = sigma * scale
    rdp = _gnmax_rdp(_gnmax_log_q(vote_counts * scale, sigma), sigma, orders + 1)
    return (orders * rdp).sum(axis=0)


@validate_params(
    {
        "vote_counts": ["array-like"],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "sensitivity": [Interval(Real, 0, None, closed="neither")],
        "orders": ["array-like"],
    },
    prefer_skip_nested_validation=True,
)
def gnmax_epsilon(vote_counts, *, sigma, delta, sensitivity=ONE_VOTE_L2,
                  orders=DEFAULT_ORDERS):
    """Data-dependent epsilon of GNMax answers (noisy argmax with Gaussian noise).

    The Renyi-DP analysis of Papernot et al. (2018): for each query, ``q`` bounds the
    probability that noise of standard deviation `sigma` on every count changes the
    winner (Proposition 7); where ``q`` is small, Theorem 6 bounds the query's Renyi DP
    far below the data-independent ``order / sigma^2``. Queries compose by adding their
    Renyi DP, which converts to ``(epsilon, delta)``-DP at the best order. Because it is
    computed from the private vote counts, publishing this epsilon itself leaks
    information; `gaussian_epsilon` is the guarantee that may be published.

    Parameters
    ----------
    vote_counts : array-like of shape (n_queries, n_classes)
        Noise-free vote histogram of every query.
    sigma : float
        Standard deviation of the Gaussian noise on every count.
    delta : float
        Failure probability.
    sensitivity : float, default=sqrt(2)
        Largest L2 change of one histogram when one protected unit changes: ``sqrt(2)``
        when one voter changes its vote, ``sqrt(2) * s`` when one party changes its
        ``s`` votes.
    orders : sequence of float, default=DEFAULT_ORDERS
        Moment orders ``l`` to minimise over (Renyi orders ``l + 1``).

    Returns
    -------
    epsilon : float

    References
    ----------
    .. [1] N. Papernot, S. Song, I. Mironov, A. Raghunathan, K. Talwar and
       U. Erlingsson, "Scalable Private Learning with PATE", ICLR 2018, Proposition 7
       and Theorem 6.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt.privacy import gaussian_epsilon, gnmax_epsilon
    >>> # 100 queries on which 90 of 100 teachers agree, noise of standard deviation 10
    >>> round(gnmax_epsilon(np.tile([90, 10], (100, 1)), sigma=10, delta=1e-5), 3)
    0.777
    >>> round(gaussian_epsilon(100, sigma=10, delta=1e-5, sensitivity=2 ** 0.5), 3)
    6.573
    """
    moments = gnmax_log_moments(vote_counts, sigma=sigma, sensitivity=sensitivity,
                                orders=orders)
    return epsilon_from_log_moments(moments, delta=delta, orders=orders)

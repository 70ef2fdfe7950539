"""Privacy accounting for noisy-argmax label release (PATE, FedKT-L1/L2).

A noisy-argmax query adds Laplace noise of scale ``1/gamma`` to every count of a vote
histogram and releases the winning class. If one individual (an example, or a whole
party) moves the histogram by at most ``sensitivity`` in L1 norm, each query is
``(sensitivity * gamma)``-differentially private. Two bounds on the composition of many
queries are offered:

- the data-dependent moments accountant of Papernot et al. (2017), used by FedKT
  (`pate_epsilon`): queries on which the voters agree strongly cost little, so the
  bound is tight, but it is computed from the private vote counts themselves;
- data-independent bounds that depend only on the number of queries
  (`pate_epsilon_data_independent`, `laplace_epsilon`).

Gaussian noise (GNMax, Papernot et al. 2018) has its exact data-independent composition
(`gaussian_epsilon`) and a data-dependent Renyi-DP bound (`gnmax_epsilon`).
"""

import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from numbers import Integral, Real

import numpy as np
from scipy.integrate import quad
from scipy.optimize import brentq
from scipy.special import expit, logsumexp
from scipy.stats import norm
from sklearn.utils._param_validation import Interval, validate_params

# every order to 32, then sparser up to 1024: strongly agreeing votes reach their bound
# at large orders
DEFAULT_ORDERS = (*range(1, 33), 40, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
# L2 norm by which one voter, moving its vote (or probability vector) from one class to
# another, moves a histogram
ONE_VOTE_L2 = float(np.sqrt(2))
# per-release budget above which laplace_epsilon reports the pure composition
_PURE_COMPOSITION_ABOVE = 50.0

_ACCOUNTANT_PARAMS = {
    "gamma": [Interval(Real, 0, None, closed="neither")],
    "delta": [Interval(Real, 0, 1, closed="neither")],
    "sensitivity": [Interval(Real, 0, None, closed="neither")],
    "orders": ["array-like"],
}


def _check_orders(orders):
    orders = np.asarray(list(orders), dtype=float)
    if orders.ndim != 1 or orders.size == 0 or (orders < 1).any():
        raise ValueError(f"orders must be a non-empty sequence of numbers >= 1; got {orders}.")
    return orders


def _probability_not_top(vote_counts, gamma):
    """Papernot et al.'s bound on P[noisy argmax != true argmax], per query (Lemma 4)."""
    n_classes = vote_counts.shape[1]
    gaps = vote_counts.max(axis=1, keepdims=True) - vote_counts
    with np.errstate(over="ignore"):  # a huge gamma * gap: the term is 0
        terms = (2 + gamma * gaps) / (4 * np.exp(gamma * gaps))
    # the sum runs over o != o*, and o* contributes (2 + 0) / 4 = 1/2
    return np.minimum(terms.sum(axis=1) - 0.5, 1 - 1 / n_classes)


def pate_log_moments(vote_counts, *, gamma, sensitivity=2.0, orders=DEFAULT_ORDERS,
                     data_independent=False):
    """Log moments ``alpha(l)`` of a sequence of noisy-argmax queries, summed over queries.

    For each query, with ``eps0 = sensitivity * gamma`` and ``q`` the bound of
    `_probability_not_top`::

        alpha(l) = min(eps0**2 * l * (l + 1) / 2,
                       eps0 * l,
                       log((1 - q) * ((1 - q) / (1 - exp(eps0) * q))**l + q * exp(eps0 * l)))

    where the last term is used only when ``q < 1 / (exp(eps0) + 1)``.

    Parameters
    ----------
    vote_counts : array-like of shape (n_queries, n_classes)
        Noise-free vote histogram of every query.
    gamma : float
        Inverse scale of the Laplace noise added to every count.
    sensitivity : float, default=2.0
        Largest L1 change of one histogram when one protected unit changes.
    orders : sequence of float, default=DEFAULT_ORDERS
        Moment orders ``l``: every integer to 32, then sparser up to 1024.
    data_independent : bool, default=False
        Use ``q = 1`` for every query: a bound that does not look at the counts.

    Returns
    -------
    log_moments : ndarray of shape (n_orders,)
    """
    vote_counts = np.atleast_2d(np.asarray(vote_counts, dtype=float))
    orders = _check_orders(orders)
    eps0 = sensitivity * gamma
    worst_case = np.minimum(eps0**2 * orders * (orders + 1) / 2, eps0 * orders)
    moments = np.tile(worst_case, (vote_counts.shape[0], 1))
    if not data_independent and vote_counts.size:
        q = _probability_not_top(vote_counts, gamma)[:, None]
        usable = q[:, 0] < expit(-eps0)  # 1 / (exp(eps0) + 1) without overflow
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            data_dependent = np.logaddexp(
                np.log1p(-q) + orders * (np.log1p(-q) - np.log1p(-np.exp(eps0) * q)),
                np.log(q) + eps0 * orders,
            )
        moments[usable] = np.minimum(moments[usable], data_dependent[usable])
    return moments.sum(axis=0)


def epsilon_from_log_moments(log_moments, *, delta, orders=DEFAULT_ORDERS):
    """``min over l of (alpha(l) + log(1/delta)) / l``, warning if the largest order wins.

    Parameters
    ----------
    log_moments : array-like of shape (n_orders,)
        Summed log moments, as returned by `pate_log_moments`.
    delta : float
        Failure probability.
    orders : sequence of float, default=DEFAULT_ORDERS
        The orders of `log_moments`.

    Returns
    -------
    epsilon : float
    """
    orders = _check_orders(orders)
    epsilons = (np.asarray(log_moments, dtype=float) + np.log(1 / delta)) / orders
    best = int(np.argmin(epsilons))
    if best == len(orders) - 1 and len(orders) > 1:
        warnings.warn(
            f"The smallest epsilon is reached at the largest moment order ({orders[-1]:g}); "
            "larger orders may give a smaller bound.",
            UserWarning,
            stacklevel=2,
        )
    return float(epsilons[best])


@contextmanager
def _largest_order_noted():
    """Collects the accountant's 'largest moment order' warnings: the privacy statement
    says it once instead of a warning at every fit."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=".*largest moment order")
        yield caught


@validate_params(
    {"vote_counts": ["array-like"], **_ACCOUNTANT_PARAMS}, prefer_skip_nested_validation=True
)
def pate_epsilon(vote_counts, *, gamma, delta, sensitivity=2.0, orders=DEFAULT_ORDERS):
    """Data-dependent epsilon of noisy-argmax queries (moments accountant).

    This is the analysis of Papernot et al. (2017) that FedKT uses (its Theorems 2 and 3):
    ``(epsilon, delta)``-DP for the unit protected by `sensitivity`. Because it is computed
    from the private vote counts, publishing this epsilon itself leaks information.

    Parameters
    ----------
    vote_counts : array-like of shape (n_queries, n_classes)
        Noise-free vote histogram of every query.
    gamma : float
        Inverse scale of the Laplace noise added to every count.
    delta : float
        Failure probability.
    sensitivity : float, default=2.0
        Largest L1 change of one histogram when one protected unit changes: 2 for PATE
        (one teacher moves its vote), ``2 * n_students`` for FedKT-L1 (one party moves
        all its students).
    orders : sequence of float, default=DEFAULT_ORDERS
        Moment orders to minimise over (PATE's code used ``range(1, 33)``).

    Returns
    -------
    epsilon : float

    References
    ----------
    .. [1] N. Papernot, M. Abadi, U. Erlingsson, I. Goodfellow and K. Talwar,
       "Semi-supervised Knowledge Transfer for Deep Learning from Private Training Data",
       ICLR 2017, Theorem 3 and Lemma 4.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt.privacy import pate_epsilon
    >>> # 100 queries on which 90 of 100 teachers agree
    >>> round(pate_epsilon(np.tile([90, 10], (100, 1)), gamma=0.1, delta=1e-5), 6)
    0.813266
    """
    moments = pate_log_moments(vote_counts, gamma=gamma, sensitivity=sensitivity, orders=orders)
    return epsilon_from_log_moments(moments, delta=delta, orders=orders)


@validate_params(
    {"n_queries": [Interval(Integral, 0, None, closed="left")], **_ACCOUNTANT_PARAMS},
    prefer_skip_nested_validation=True,
)
def pate_epsilon_data_independent(n_queries, *, gamma, delta, sensitivity=2.0,
                                  orders=DEFAULT_ORDERS):
    """Moments-accountant epsilon of `n_queries` noisy-argmax queries, whatever the votes.

    The same bound as `pate_epsilon` with ``q = 1`` for every query, so it may be
    published.

    Parameters
    ----------
    n_queries : int
        Number of queries.
    gamma, delta, sensitivity, orders
        As in `pate_epsilon`.

    Returns
    -------
    epsilon : float

    See Also
    --------
    data_independent_epsilon : The smaller of this bound and the Laplace mechanism's
        own composition, which is what the classifiers report.

    Examples
    --------
    >>> from skfedkt.privacy import pate_epsilon_data_independent
    >>> round(pate_epsilon_data_independent(100, gamma=0.05, delta=1e-5, orders=range(1, 9)), 6)
    5.302585
    """
    moments = pate_log_moments(
        np.zeros((n_queries, 2)), gamma=gamma, sensitivity=sensitivity, orders=orders,
        data_independent=True,
    )
    return epsilon_from_log_moments(moments, delta=delta, orders=orders)


@validate_params(
    {
        "n_releases": [Interval(Integral, 0, None, closed="left")],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "sensitivity": [Interval(Real, 0, None, closed="neither")],
    },
    prefer_skip_nested_validation=True,
)
def laplace_epsilon(n_releases, *, gamma, delta, sensitivity=2.0):
    """Epsilon of `n_releases` Laplace histograms, by dp-accounting's PLD accountant.

    Each release adds Laplace noise of scale ``1/gamma`` to a histogram of L1 sensitivity
    `sensitivity`; the noisy argmax is post-processing of it. The privacy loss
    distribution of the Laplace mechanism is composed exactly (up to a pessimistic
    discretisation), which is tighter than the moments bound. A change of L1 norm
    `sensitivity` spread over several counts costs no more than the same change on a
    single count, which is what is accounted.

    Parameters
    ----------
    n_releases : int
        Number of noisy histograms released.
    gamma : float
        Inverse scale of the Laplace noise.
    delta : float
        Failure probability.
    sensitivity : float, default=2.0
        L1 sensitivity of one histogram.

    Above a per-release budget ``gamma * sensitivity`` of 50 the pure composition
    ``n_releases * gamma * sensitivity`` is returned: with so little noise the two agree
    (within 0.2% at 200), and it costs nothing.

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> from skfedkt.privacy import laplace_epsilon
    >>> round(laplace_epsilon(100, gamma=0.05, delta=1e-5), 2)
    4.22
    """
    if n_releases == 0:
        return 0.0
    eps0 = gamma * sensitivity
    if eps0 > _PURE_COMPOSITION_ABOVE:
        # so little noise that the PLD bound is the pure composition (and dp-accounting
        # overflows for eps0 above ~700)
        return float(n_releases * eps0)
    return _laplace_pld_epsilon(int(n_releases), float(eps0), float(delta))


# every party of an L2 fit asks for the same composition, which takes ~20 ms to compose
@lru_cache(maxsize=256)
def _laplace_pld_epsilon(n_releases, eps0, delta):
    import dp_accounting
    from dp_accounting.pld import PLDAccountant

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.LaplaceDpEvent(noise_multiplier=1 / eps0), n_releases
    )
    # the privacy loss of one release spans [-eps0, eps0]: a grid of at most ~2000
    # points keeps the cost flat in gamma (a coarser pessimistic grid stays an upper
    # bound; the default 1e-4 applies up to eps0 = 0.1)
    accountant = PLDAccountant(value_discretization_interval=max(1e-4, eps0 / 1000))
    accountant.compose(event)
    return float(accountant.get_epsilon(delta))


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
    >>> from skfedkt._privacy._accounting import gdp_epsilon
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
    >>> from skfedkt._privacy._accounting import gaussian_log_moments
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
    orders = _check_orders(orders)
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


def guarantee_strength(epsilon):
    """How much an epsilon protects, in words, for the statements of the reports.

    An (epsilon, delta) guarantee bounds by ``exp(epsilon)`` how much likelier any
    outcome can become with or without the protected unit; the words follow that
    factor.

    Parameters
    ----------
    epsilon : float

    Returns
    -------
    words : str

    Examples
    --------
    >>> from skfedkt.privacy import guarantee_strength
    >>> guarantee_strength(0.5)
    'a strong guarantee: no outcome becomes more than 1.65 times likelier'
    >>> guarantee_strength(77)
    'a guarantee in name only: a factor of e^77 on how likely an outcome is bounds nothing'
    """
    factor = float(np.exp(min(epsilon, 10.0)))
    if epsilon <= 1:
        return f"a strong guarantee: no outcome becomes more than {factor:.3g} times likelier"
    if epsilon <= 10:
        return (f"a moderate guarantee: no outcome becomes more than {factor:.3g} times "
                "likelier")
    return (f"a guarantee in name only: a factor of e^{epsilon:.3g} on how likely an "
            "outcome is bounds nothing")


@dataclass(frozen=True)
class PrivacyReport:
    """What a fitted private estimator guarantees, and how it was computed.

    Attributes
    ----------
    level : {"L0", "L1", "L2"}
        FedKT's privacy level.
    unit : {"party", "example"} or None
        Whose participation the guarantee protects (None at L0).
    gamma, delta : float or None
        Laplace inverse scale and failure probability.
    sensitivity : float or None
        L1 sensitivity of one noisy histogram for that unit.
    n_queries : int
        Noisy-argmax queries per noisy histogram tier (per partition at L2).
    data_dependent_epsilon : float
        From the noise-free votes: the moments accountant of Papernot et al. (2017)
        with Laplace noise, the Renyi-DP bound of GNMax (`gnmax_epsilon`) with Gaussian
        noise; NaN where the whole noisy histogram is released (soft labels). Not for
        publication: it is computed from private votes.
    data_independent_epsilon : float
        The smaller of the moments bound with ``q = 1`` and dp-accounting's PLD bound.
    epsilon : float
        The guarantee: the smaller valid bound (per party first at L2, then the maximum
        over parties). ``inf`` at L0.
    party_epsilons : dict or None
        At L2, each party's epsilon (its partitions compose); the model's epsilon is the
        maximum over parties (parallel composition, FedKT's Theorem 4).
    orders : tuple of float
        Moment orders used.
    statement : str
        The guarantee in words, with its caveats.
    mechanism : {"laplace", "gaussian"}
        The noise on the counts; with ``"gaussian"``, `sensitivity` is an L2 norm and
        `epsilon` the exact composition of Gaussian mechanisms.
    """

    level: str
    unit: str | None
    gamma: float | None
    delta: float | None
    sensitivity: float | None
    n_queries: int
    data_dependent_epsilon: float
    data_independent_epsilon: float
    epsilon: float
    party_epsilons: dict | None = None
    orders: tuple = field(default=DEFAULT_ORDERS)
    statement: str = ""
    mechanism: str = "laplace"

    def __str__(self):
        return self.statement


def data_independent_epsilon(n_queries, *, gamma, delta, sensitivity, orders=DEFAULT_ORDERS):
    """The smaller of the two data-independent bounds for `n_queries` noisy-argmax queries:
    the moments accountant's whatever the votes (`pate_epsilon_data_independent`) and
    the Laplace mechanism's composition (`laplace_epsilon`); what the classifiers report
    as ``data_independent_epsilon``.

    Parameters
    ----------
    n_queries : int
        Number of queries.
    gamma, delta, sensitivity, orders
        As in `pate_epsilon`.

    Returns
    -------
    epsilon : float

    Examples
    --------
    >>> from skfedkt.privacy import data_independent_epsilon
    >>> round(data_independent_epsilon(100, gamma=0.05, delta=1e-5, sensitivity=2), 2)
    4.22
    """
    with warnings.catch_warnings():
        # q = 1 bounds are only a fallback here: where they peak does not matter
        warnings.simplefilter("ignore", UserWarning)
        moments = pate_epsilon_data_independent(
            n_queries, gamma=gamma, delta=delta, sensitivity=sensitivity, orders=orders
        )
    return min(moments, laplace_epsilon(n_queries, gamma=gamma, delta=delta,
                                        sensitivity=sensitivity))


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


@dataclass(frozen=True)
class BitFlipPrivacyReport:
    """The guarantee of federated co-training with bit-flip (XOR) noise on shared labels.

    Attributes
    ----------
    epsilon_per_round : float
        Pure epsilon of one round's release by one party.
    sensitivity : float
        Bits of a party's one-hot label matrix that one training example may change.
    flip_probability : float
        Probability with which every shared bit is flipped.
    n_rounds : int
        Rounds in which labels were shared.
    delta : float
        Failure probability of `rdp_epsilon`.
    pure_epsilon : float
        ``n_rounds * epsilon_per_round`` (pure composition, delta = 0).
    rdp_epsilon : float
        Composition of all per-bit randomized responses by dp-accounting's RDP accountant.
    epsilon : float
        The smaller of the two (with `delta` when it is `rdp_epsilon`).
    statement : str
        The guarantee in words.
    """

    epsilon_per_round: float
    sensitivity: float
    flip_probability: float
    n_rounds: int
    delta: float
    pure_epsilon: float
    rdp_epsilon: float
    epsilon: float
    statement: str = ""

    def __str__(self):
        return self.statement


@dataclass(frozen=True)
class TeacherVotesPrivacyReport:
    """The guarantee of federated co-training with `TeacherVotes`: every party's
    Gaussian-noised vote counts of its disjoint teachers on the queried public rows.

    Attributes
    ----------
    sigma : float
        Standard deviation of the noise on every count.
    n_queries : int
        Public rows queried in every round.
    n_rounds : int
        Rounds in which vote counts were shared.
    n_releases : int
        ``n_queries * n_rounds`` noisy histograms per party, each of L2 sensitivity
        ``sqrt(2)`` (one example is in one teacher, which moves one vote).
    flip_probability : float
        Probability that the noise turns a row on which all of a party's teachers agree
        to another class (with ``n_teachers`` teachers), a measure of what is left of
        the signal.
    delta : float
        Failure probability.
    epsilon : float
        The exact composition of the `n_releases` histograms (Gaussian DP) at `delta`.
    statement : str
        The guarantee in words.
    """

    sigma: float
    n_queries: int
    n_rounds: int
    n_releases: int
    flip_probability: float
    delta: float
    epsilon: float
    statement: str = ""

    def __str__(self):
        return self.statement

"""Privacy accounting of Laplace noisy-argmax label release (PATE, FedKT-L1/L2).

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

Gaussian noise has its accountant in ``_gaussian.py``, bit flips theirs in
``_bit_flips.py``; the reports a fit keeps are in ``_reports.py``.
"""

import warnings
from contextlib import contextmanager
from functools import lru_cache
from numbers import Integral, Real

import numpy as np
from scipy.special import expit

from .._engine._compat import Interval, validate_params

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


def checked_orders(orders):
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
    orders = checked_orders(orders)
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
    orders = checked_orders(orders)
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

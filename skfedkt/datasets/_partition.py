"""Party partitioners: which party holds which row."""

from numbers import Integral, Real

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import column_or_1d

from .._engine._compat import Interval, validate_params

_MAX_ATTEMPTS = 1000
# rows drawn over all attempts before the last draw is repaired instead: a thousand
# attempts on small data, as many as a few seconds allow on large data
_MAX_DRAWN_ROWS = 50_000_000


def _dirichlet(rng, beta, size):
    """A Dir(beta) draw over `size` parties that stays valid for a tiny beta.

    numpy's sampler returns NaN when every gamma variate underflows (beta around 1e-3
    and below); then the draw is made in log space, ``log G = log G' + log(U) / beta``
    with ``G' ~ Gamma(beta + 1)`` and ``U`` uniform, which has the same distribution.
    """
    proportions = rng.dirichlet(np.full(size, beta))
    if np.all(np.isfinite(proportions)):
        return proportions
    log_gamma = np.log(rng.gamma(beta + 1, size=size)) + np.log(rng.random_sample(size)) / beta
    proportions = np.exp(log_gamma - log_gamma.max())
    return proportions / proportions.sum()


@validate_params(
    {
        "y": ["array-like"],
        "n_parties": [Interval(Integral, 1, None, closed="left")],
        "beta": [Interval(Real, 0, None, closed="neither")],
        "min_party_size": [Interval(Integral, 0, None, closed="left")],
        "self_balancing": ["boolean"],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def dirichlet_partition(
    y, n_parties, *, beta=0.5, min_party_size=10, self_balancing=True, random_state=None
):
    """Label-skewed party assignment drawn from a Dirichlet distribution.

    For each class ``k``, proportions ``p_k ~ Dir_n(beta)`` over the ``n`` parties are
    drawn and a ``p_{k,j}`` share of the rows of class ``k`` goes to party ``j``. The
    whole draw is repeated until every party holds at least `min_party_size` rows. This
    is the heterogeneous partition of FedKT's experiments (and of NIID-Bench).

    Where no draw gives every party its minimum (thousands of small parties, as in
    cross-device federated learning), the draws stop after 1000 attempts, or fewer on
    large data (50 million rows drawn in all), and the last one is filled up: each party
    short of rows takes the rows it lacks, in the classes it holds most of, from parties
    that keep their minimum. The skew of the draw stays; the sizes of the smallest
    parties become `min_party_size`.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        The labels of the rows to distribute.
    n_parties : int
        Number of parties (Flower's ``num_partitions``).
    beta : float, default=0.5
        Concentration of the Dirichlet distribution (Flower's ``alpha``). Small values
        give each party few classes; large values approach an IID split.
    min_party_size : int, default=10
        Smallest number of rows a party may get; the draw is repeated until every party
        has it (Flower's ``min_partition_size``).
    self_balancing : bool, default=True
        When drawing class ``k``, parties that already hold more than
        ``n_samples / n_parties`` rows get none of it, which keeps party sizes
        comparable, as in the FedKT authors' code (Flower's ``self_balancing``, which
        defaults to False there).
    random_state : int, RandomState instance or None, default=None
        Controls the draws.

    Returns
    -------
    parties : ndarray of int of shape (n_samples,)
        The party (``0..n_parties-1``) of every row.

    Raises
    ------
    ValueError
        If ``n_parties * min_party_size`` exceeds the number of rows.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt.datasets import dirichlet_partition
    >>> y = np.repeat([0, 1, 2], 100)
    >>> parties = dirichlet_partition(y, n_parties=5, beta=0.5, random_state=0)
    >>> parties.shape, bool(np.bincount(parties).min() >= 10)
    ((300,), True)
    """
    y = column_or_1d(y)
    n_samples = y.shape[0]
    if n_parties * min_party_size > n_samples:
        raise ValueError(
            f"Cannot give {n_parties} parties at least min_party_size={min_party_size} "
            f"rows each from {n_samples} rows."
        )
    rng = check_random_state(random_state)
    class_rows = [np.flatnonzero(y == label) for label in np.unique(y)]
    n_attempts = int(np.clip(_MAX_DRAWN_ROWS // n_samples, 1, _MAX_ATTEMPTS))
    for _ in range(n_attempts):
        parties = np.empty(n_samples, dtype=np.int64)
        sizes = np.zeros(n_parties, dtype=np.int64)
        for rows in class_rows:
            rows = rng.permutation(rows)
            proportions = _dirichlet(rng, beta, n_parties)
            if self_balancing:
                balanced = proportions * (sizes < n_samples / n_parties)
                # all of the draw's mass on full parties: this class goes unbalanced
                proportions = balanced if balanced.sum() > 0 else proportions
            proportions = proportions / proportions.sum()
            cuts = (np.cumsum(proportions) * len(rows)).astype(int)[:-1]
            shares = np.diff(cuts, prepend=0, append=len(rows))
            parties[rows] = np.repeat(np.arange(n_parties), shares)
            sizes += shares
        if sizes.min() >= min_party_size:
            return parties
    return _filled_up(parties, y, n_parties, min_party_size, beta, rng)


def _filled_up(parties, y, n_parties, min_party_size, beta, rng):
    """`parties` where every party short of `min_party_size` rows has taken the rows it
    lacks from the largest parties, in the classes it holds most of (its own skew kept),
    never leaving a donor short."""
    _, codes = np.unique(y, return_inverse=True)
    n_classes = codes.max() + 1
    sizes = np.bincount(parties, minlength=n_parties)
    # each party's classes, most held first; a party that holds nothing takes any
    held = np.zeros((n_parties, n_classes), dtype=np.int64)
    np.add.at(held, (parties, codes), 1)
    rows_of_class = [rng.permutation(np.flatnonzero(codes == k)) for k in range(n_classes)]
    taken = np.zeros(n_classes, dtype=np.int64)  # rows of each class looked at so far
    for party in np.flatnonzero(sizes < min_party_size):
        for k in np.argsort(-held[party], kind="stable"):
            rows = rows_of_class[k]
            while sizes[party] < min_party_size and taken[k] < len(rows):
                row = rows[taken[k]]
                taken[k] += 1
                donor = parties[row]
                if donor != party and sizes[donor] > min_party_size:
                    parties[row] = party
                    sizes[donor] -= 1
                    sizes[party] += 1
            if sizes[party] >= min_party_size:
                break
    if sizes.min() < min_party_size:
        raise ValueError(
            f"No Dirichlet(beta={beta}) draw gave all {n_parties} parties at least "
            f"min_party_size={min_party_size} rows, nor could the last one be filled up; "
            "lower min_party_size or n_parties, or raise beta."
        )
    return parties


@validate_params(
    {
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "n_parties": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    },
    prefer_skip_nested_validation=True,
)
def iid_partition(n_samples, n_parties, *, random_state=None):
    """Homogeneous party assignment: shuffled rows in parties of equal size (+-1).

    Parameters
    ----------
    n_samples : int
        Number of rows to distribute.
    n_parties : int
        Number of parties; at most `n_samples`.
    random_state : int, RandomState instance or None, default=None
        Controls the shuffle.

    Returns
    -------
    parties : ndarray of int of shape (n_samples,)
        The party (``0..n_parties-1``) of every row.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt.datasets import iid_partition
    >>> np.bincount(iid_partition(10, 3, random_state=0))
    array([4, 3, 3])
    """
    if n_parties > n_samples:
        raise ValueError(f"Cannot split {n_samples} rows into {n_parties} non-empty parties.")
    rng = check_random_state(random_state)
    parties = np.empty(n_samples, dtype=np.int64)
    for party, rows in enumerate(np.array_split(rng.permutation(n_samples), n_parties)):
        parties[rows] = party
    return parties

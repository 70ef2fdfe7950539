"""Vote counting shared by the federated meta-estimators.

Votes are class codes: integers ``0..n_classes-1`` indexing ``classes_``; ``-1`` is an
abstention (a voter that does not vote on that example).
"""

import warnings

import numpy as np
from sklearn.utils import check_random_state


def count_votes(predictions, n_classes, weights=1):
    """Histogram of class votes per example.

    Parameters
    ----------
    predictions : array-like of int of shape (n_voters, n_samples)
        Class code voted by each voter for each example; ``-1`` abstains.
    n_classes : int
        Number of classes (columns of the histogram).
    weights : int or array-like of int of shape (n_voters,), default=1
        Number of votes each voter casts.

    Returns
    -------
    votes : ndarray of int64 of shape (n_samples, n_classes)
        ``votes[i, m]`` is the number of votes example ``i`` received for class ``m``.

    Examples
    --------
    >>> from skfedkt._engine._voting import count_votes
    >>> count_votes([[0, 1, -1], [0, 0, 1]], n_classes=2, weights=[2, 1])
    array([[3, 0],
           [1, 2],
           [0, 1]])
    """
    predictions = np.asarray(predictions)
    n_voters, n_samples = predictions.shape
    weights = np.broadcast_to(np.asarray(weights, dtype=np.int64), (n_voters,))
    votes = np.zeros((n_samples, n_classes), dtype=np.int64)
    samples = np.arange(n_samples)
    # one voter at a time keeps memory at O(n_samples); a voter votes at most once per
    # sample, so the fancy-indexed addition is exact
    for voter, weight in zip(predictions, weights):
        cast = voter >= 0
        votes[samples[cast], voter[cast]] += weight
    return votes


def plurality_vote(votes, tie_break):
    """Winning class code per example of a vote histogram.

    Ties are broken uniformly at random among the tied classes, so no class gains from
    a tie rule (a fixed rule such as "the first class" or "the class with most votes
    overall" hands every tie to the class that label skew already favours). An example
    whose histogram is all zero received no vote and gets ``-1``: it must be left out
    rather than labelled with an arbitrary class.

    Parameters
    ----------
    votes : array-like of shape (n_samples, n_classes)
        Vote counts or summed class probabilities, possibly noisy (real-valued).
    tie_break : int, RandomState instance or ndarray of shape (n_samples, n_classes)
        Uniform keys, one per example and class, of which the largest among the tied
        classes wins; or the random state that draws them (pass the fitting estimator's
        own stream, so that results are reproducible). Votes repeated over rounds pass
        the same keys every round, so a tie does not flip back and forth.

    Returns
    -------
    labels : ndarray of int64 of shape (n_samples,)
        Winning class codes, ``-1`` where no vote was cast.

    Examples
    --------
    >>> from skfedkt._engine._voting import plurality_vote
    >>> plurality_vote([[1, 3, 0], [0, 0, 0], [2, 2, 0]], tie_break=0)
    array([ 1, -1,  1])
    """
    votes = np.asarray(votes)
    keys = (tie_break if isinstance(tie_break, np.ndarray)
            else check_random_state(tie_break).random_sample(votes.shape))
    # a uniform key on every tied cell picks one of the tied classes uniformly
    is_top = votes == votes.max(axis=1, keepdims=True)
    labels = np.where(is_top, keys, -1.0).argmax(axis=1).astype(np.int64)
    labels[~votes.any(axis=1)] = -1
    return labels


def class_shares(votes):
    """Share of each class in a vote histogram (or in per-example label distributions).

    Parameters
    ----------
    votes : array-like of shape (n_samples, n_classes)
        Non-negative votes, counts or probabilities.

    Returns
    -------
    shares : ndarray of shape (n_classes,)
        Sums to one (all zero when there are no votes).

    Examples
    --------
    >>> from skfedkt._engine._voting import class_shares
    >>> class_shares([[1, 0], [0.5, 0.5], [0, 0]])
    array([0.75, 0.25])
    """
    totals = np.asarray(votes, dtype=float).sum(axis=0)
    return totals / totals.sum() if totals.sum() > 0 else totals


# No party weighs more than this many times the median party in the server's pooling.
# Honest Dirichlet(0.5) partitions of 50 parties reach 7 to 12 times the median; a party
# that claims 1000 times its rows would otherwise set the training class shares alone
# (benchmarks/bench_hostile_party.py).
MAX_PARTY_WEIGHT = 20.0


def bounded_party_counts(class_counts, max_weight=None):
    """Class counts with no party weighing more than `max_weight` (default
    `MAX_PARTY_WEIGHT`) times the median party, nor, among three parties or more, more
    than all the other parties together, its class proportions kept.

    The first cap protects a large consortium, the second a small one, where the median
    party is a large share of the rows: a single party's claim can never outweigh the
    rest. Two parties have no rest to protect; capping the larger at the smaller's size
    would only misweigh honest ones. Returns the counts (float) and the indices of the
    parties that were capped.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt._engine._voting import bounded_party_counts
    >>> counts, capped = bounded_party_counts(np.array([[5, 5], [6, 4], [9000, 1000]]),
    ...                                       max_weight=2)
    >>> counts[2].tolist(), capped.tolist()
    ([18.0, 2.0], [2])
    >>> counts, capped = bounded_party_counts(np.array([[5, 5], [60, 40], [800, 200]]))
    >>> counts[2].tolist(), capped.tolist()
    ([88.0, 22.0], [2])
    """
    max_weight = MAX_PARTY_WEIGHT if max_weight is None else max_weight
    counts = np.array(class_counts, dtype=float)  # a copy: the caller's stay as they are
    totals = counts.sum(axis=1)
    within_median_cap = np.minimum(totals, max_weight * np.median(totals))
    others = within_median_cap.sum() - within_median_cap
    cap = within_median_cap if len(totals) < 3 else np.minimum(within_median_cap, others)
    over = np.flatnonzero(totals > cap)
    counts[over] *= (cap[over] / totals[over])[:, None]
    return counts, over


def capped_rows(parties, rows, claimed):
    """Each party's rows as the sums weigh them: none more than `MAX_PARTY_WEIGHT` times
    the median party nor more than the others together (`bounded_party_counts`), since
    one party's claim about its rows must not outweigh the rest. Where the rows are the
    parties' own claims (`claimed`, read from their manifests), a capped party is named
    in a warning; in `fit` the rows are the data's."""
    bounded, capped = bounded_party_counts(np.asarray(rows, dtype=float)[:, None])
    if capped.size and claimed:
        claims = "; ".join(f"party {parties[index]!r}: {int(rows[index])} rows"
                           for index in capped)
        warnings.warn(
            f"Parties claim more rows than {MAX_PARTY_WEIGHT:g} times the median party or "
            f"than all the other parties together ({claims}): the fit went on, "
            "weighing each such party as the smaller of the two where the server pools "
            "votes and sets class shares. The bound keeps a party that overstates its rows "
            "from outweighing the rest; a party that really is that large only counts a "
            "little less than its rows.", UserWarning,
        )
    return bounded[:, 0]


# values of one block of per-party log-likelihoods in `prior_corrected_proba` (8 MiB)
_POOLING_BLOCK_VALUES = 2**20


def prior_corrected_proba(party_proba, class_counts, *, smoothing=0.003, n_iter=50,
                          chunk_size=4096):
    """Class probabilities pooled from label-skewed parties, corrected for their priors.

    Under label skew the parties share the class-conditional distributions
    ``p(x | k)`` and differ in their class shares ``pi_i``, so party ``i``'s
    probabilities satisfy ``log p_i(k | x) - log pi_i(k) = log p(x | k) + c_i(x)`` for
    every class ``k`` it holds, with an offset ``c_i(x)`` shared by its classes. The
    pooled log-likelihoods ``L(k)`` and the offsets are fitted by least squares over the
    classes each party holds, each term weighted by the party's number of rows of that
    class (parties holding a single class carry no information and are left out), and
    the global class shares are added back: ``softmax(L + log pi)``. The result is
    averaged with the parties' mean probabilities, which hedges against poorly
    calibrated models (measured on ``benchmarks/bench_label_skew.py``): with weight
    one half when every party holds several classes, and in proportion to the share of
    training rows held by such parties otherwise, so that evidence from a few rows
    (say, the one mixed party among single-class ones) cannot outvote the rest.

    Parameters
    ----------
    party_proba : ndarray of shape (n_parties, n_samples, n_classes)
        Each party's class probabilities for every example.
    class_counts : ndarray of shape (n_parties, n_classes)
        Each party's number of training rows per class.
    smoothing : float, default=0.003
        Additive smoothing of the probabilities before their logarithm: a model's
        probability of 0 for a class its party holds is not taken literally.
    n_iter : int, default=50
        Alternating least-squares sweeps.
    chunk_size : int, default=4096
        Examples pooled at a time, fewer where many parties would make a block of
        log-likelihoods larger than 8 MiB: memory stays bounded at any number of
        parties.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_classes)
        Each row sums to one.

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt._engine._voting import prior_corrected_proba
    >>> # party 0 holds 90% class 0 yet gives class 1 three times its share: evidence
    >>> # for class 1; party 1 holds 90% class 1 and says 0.9: its prior, no evidence
    >>> proba = np.array([[[0.7, 0.3]], [[0.1, 0.9]]])
    >>> prior_corrected_proba(proba, np.array([[90, 10], [10, 90]])).round(2)
    array([[0.37, 0.63]])
    """
    n_parties, n_samples, n_classes = party_proba.shape
    counts = np.asarray(class_counts, dtype=float)
    informative, weights, log_shares = _party_evidence_weights(counts)
    if not informative.any():  # no party's probabilities carry evidence to pool
        return party_proba.mean(axis=0)
    class_weight = weights.sum(axis=0)
    pooled = np.empty((n_samples, n_classes))
    # rows per block: the block's (rows, parties, classes) log-likelihoods stay bounded
    chunk_size = max(1, min(chunk_size, _POOLING_BLOCK_VALUES // (n_parties * n_classes)))
    for start in range(0, n_samples, chunk_size):
        ell = _log_evidence(party_proba[:, start : start + chunk_size], counts > 0,
                            log_shares, smoothing)
        # the sweeps' weighted sums of ell over parties and over classes do not change:
        # computed once, each sweep is two products of (rows, parties) by (parties,
        # classes) matrices
        ell_by_class = np.einsum("nik,ik->nk", ell, weights)
        ell_by_party = np.einsum("nik,ik->ni", ell, weights)
        offsets = np.zeros(ell.shape[:2])
        for _ in range(n_iter):
            log_lik = (ell_by_class + offsets @ weights) / np.maximum(class_weight, 1e-300)
            offsets = (log_lik @ weights.T - ell_by_party) / np.maximum(
                weights.sum(axis=1), 1e-300
            )
        pooled[start : start + chunk_size] = _softmax_with_prior(log_lik, class_weight,
                                                                 counts.sum(axis=0))
    weight = counts[informative].sum() / counts.sum() / 2
    return weight * pooled + (1 - weight) * party_proba.mean(axis=0)


def _party_evidence_weights(counts):
    """Of parties' class counts (n_parties, n_classes): which parties are informative
    (hold two classes or more), the weight of each party's evidence on each class (its
    rows of the class, zero for an uninformative party), and the logarithm of its class
    shares (zero for a class it does not hold)."""
    held = counts > 0
    informative = held.sum(axis=1) >= 2
    shares = counts / counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_shares = np.where(held, np.log(np.where(held, shares, 1.0)), 0.0)
    return informative, counts * informative[:, None], log_shares


def _log_evidence(block, held, log_shares, smoothing):
    """(n_rows, n_parties, n_classes): each party's log-likelihood of each class up to
    an offset of its own, from its probabilities `block` (n_parties, n_rows,
    n_classes); without smoothing, a class a party does not hold may have probability
    0, and its logarithm is masked out."""
    smoothed = (block + smoothing) / (1 + block.shape[-1] * smoothing)
    with np.errstate(divide="ignore"):
        ell = np.where(held[:, None], np.log(smoothed) - log_shares[:, None], 0.0)
    return ell.transpose(1, 0, 2)


def _softmax_with_prior(log_lik, class_weight, total_counts):
    """The pooled log-likelihoods with the global class shares added back, normalised;
    a class no informative party holds gets no probability."""
    with np.errstate(divide="ignore"):
        log_prior = np.log(total_counts / total_counts.sum())
    scores = np.where(class_weight > 0, log_lik + log_prior, -np.inf)
    scores -= scores.max(axis=1, keepdims=True)
    return np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)


def prior_corrected_terms(party_proba, class_counts, *, smoothing=0.003):
    """One party's terms of `prior_corrected_proba`, whose sums over the parties give
    the pooled probabilities (`prior_corrected_from_sums`): under secure aggregation a
    party sends these instead of its probabilities.

    Eliminating the offsets, each sweep of the least squares is an affine map of the
    pooled log-likelihoods whose coefficients are sums of per-party terms: ``evidence``
    (its weighted log-likelihoods, (n_rows, n_classes)), ``offset_evidence`` (their
    weighted total spread over its classes, (n_rows, n_classes)), ``coupling`` (its
    weights' outer product over their total, (n_classes, n_classes)), and
    ``class_weight`` (its weights); with ``proba`` (its probabilities), and
    ``informative_rows`` and ``class_counts`` (its rows and counts) for the blend with
    the mean and the prior.

    Parameters
    ----------
    party_proba : ndarray of shape (n_rows, n_classes)
    class_counts : ndarray of shape (n_classes,)
    smoothing : float, default=0.003

    Returns
    -------
    terms : dict of ndarray
    """
    counts = np.asarray(class_counts, dtype=float)[None]
    informative, weights, log_shares = _party_evidence_weights(counts)
    ell = _log_evidence(np.asarray(party_proba)[None], counts > 0, log_shares, smoothing)[:, 0]
    w, total = weights[0], max(weights[0].sum(), 1e-300)
    return dict(evidence=ell * w, offset_evidence=np.outer(ell @ w / total, w),
                coupling=np.outer(w, w) / total, class_weight=w,
                proba=np.asarray(party_proba, dtype=float),
                informative_rows=np.array(float(counts.sum() * informative[0])),
                class_counts=counts[0])


def prior_corrected_from_sums(sums, n_parties, *, n_iter=50):
    """`prior_corrected_proba` from the sums over `n_parties` parties of their
    `prior_corrected_terms`: the same sweeps, the offsets eliminated."""
    evidence, class_weight = sums["evidence"], sums["class_weight"]
    mean = sums["proba"] / n_parties
    if sums["informative_rows"] <= 0:
        return mean
    scale = np.maximum(class_weight, 1e-300)
    log_lik = evidence / scale
    for _ in range(n_iter - 1):
        log_lik = (evidence - sums["offset_evidence"] + log_lik @ sums["coupling"]) / scale
    pooled = _softmax_with_prior(log_lik, class_weight, sums["class_counts"])
    weight = sums["informative_rows"] / sums["class_counts"].sum() / 2
    return weight * pooled + (1 - weight) * mean


def share_matching_offsets(proba, target_shares, *, tolerance=0.0, n_iter=300, step=0.1):
    """Per-class log-offsets that bring the argmax label shares of `proba` within
    `tolerance` of `target_shares`.

    Pooled probabilities can rank examples well and still give a minority class too few
    argmax labels (forests trained on skewed parties shrink it toward their own priors).
    Adding an offset ``b_k`` to every ``log proba[:, k]`` moves the decision boundaries
    without reordering the examples of a class. The offsets are found by damped
    multiplicative updates of the shares that lie outside their band, and the offsets
    that come closest to the bands (in total distance) are returned: zeros when the
    shares are within them already or no update gets closer. A class no example gives
    any probability keeps offset zero.

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
        Non-negative scores per class (rows need not sum to one).
    target_shares : ndarray of shape (n_classes,)
        The class shares the labels should hold.
    tolerance : float or ndarray of shape (n_classes,), default=0.0
        How far a class's label share may stay from its target, e.g. the sampling
        error of `n_samples` rows drawn with the target shares.
    n_iter : int, default=300
        Number of updates.
    step : float, default=0.1
        Damping of each update of the log-offsets.

    Returns
    -------
    offsets : ndarray of shape (n_classes,)

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt._engine._voting import share_matching_offsets
    >>> # class 1 always has the smaller probability, but ranks the rows well
    >>> proba = np.array([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4], [0.55, 0.45]])
    >>> offsets = share_matching_offsets(proba, np.array([0.5, 0.5]))
    >>> (np.log(proba) + offsets).argmax(axis=1)
    array([0, 0, 1, 1])
    >>> share_matching_offsets(proba, np.array([0.5, 0.5]), tolerance=0.5)
    array([0., 0.])
    """
    n_samples, n_classes = proba.shape
    lower, upper = target_shares - tolerance, target_shares + tolerance
    with np.errstate(divide="ignore"):
        log_proba = np.log(proba)
    adjustable = proba.max(axis=0) > 0
    smoothing = 1.0 / n_samples
    offsets, best, best_gap = np.zeros(n_classes), np.zeros(n_classes), np.inf
    steps, last_update = np.full(n_classes, float(step)), np.zeros(n_classes)
    for _ in range(n_iter):
        labels = (log_proba + offsets).argmax(axis=1)
        shares = np.bincount(labels, minlength=n_classes) / n_samples
        wanted = np.clip(shares, lower, upper)
        gap = np.abs(shares - wanted).sum()
        if gap < best_gap:
            best, best_gap = offsets.copy(), gap
        if gap < smoothing:  # within the bands, to the row
            break
        update = np.where(adjustable, np.log((wanted + smoothing) / (shares + smoothing)), 0.0)
        # a class that overshot its band: halve its step, so that votes whose
        # log-probabilities all lie closer together than one step still converge
        steps[update * last_update < 0] /= 2
        offsets += steps * update
        last_update = update
    return best

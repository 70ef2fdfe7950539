"""Vote counting shared by the federated meta-estimators.

Votes are class codes: integers ``0..n_classes-1`` indexing ``classes_``; ``-1`` is an
abstention (a voter that does not vote on that example).
"""

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
    >>> from skfedkt._voting import count_votes
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


def plurality_vote(votes, random_state):
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
    random_state : int or RandomState instance
        Draws the tie breaks; pass the fitting estimator's own stream so that results
        are reproducible.

    Returns
    -------
    labels : ndarray of int64 of shape (n_samples,)
        Winning class codes, ``-1`` where no vote was cast.

    Examples
    --------
    >>> from skfedkt._voting import plurality_vote
    >>> plurality_vote([[1, 3, 0], [0, 0, 0], [2, 2, 0]], random_state=0)
    array([ 1, -1,  1])
    """
    votes = np.asarray(votes)
    rng = check_random_state(random_state)
    # a uniform key on every tied cell picks one of the tied classes uniformly
    keys = rng.random_sample(votes.shape)
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
    >>> from skfedkt._voting import class_shares
    >>> class_shares([[1, 0], [0.5, 0.5], [0, 0]])
    array([0.75, 0.25])
    """
    totals = np.asarray(votes, dtype=float).sum(axis=0)
    return totals / totals.sum() if totals.sum() > 0 else totals

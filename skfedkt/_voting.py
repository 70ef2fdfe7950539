"""Vote counting shared by the federated meta-estimators.

Votes are class codes: integers ``0..n_classes-1`` indexing ``classes_``; ``-1`` is an
abstention (a voter that does not vote on that example).
"""

import numpy as np


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


def plurality_vote(votes):
    """Winning class code per example of a vote histogram.

    Ties are broken in favour of the tied class that received the most votes over all
    examples of the histogram (a prior that whoever counts the votes can observe), then
    the smallest class code. An example whose histogram is all zero received no vote and
    gets ``-1``: it must be left out rather than labelled with an arbitrary class.

    Parameters
    ----------
    votes : array-like of shape (n_samples, n_classes)
        Vote counts, possibly noisy (real-valued).

    Returns
    -------
    labels : ndarray of int64 of shape (n_samples,)
        Winning class codes, ``-1`` where no vote was cast.

    Examples
    --------
    >>> from skfedkt._voting import plurality_vote
    >>> plurality_vote([[1, 1, 0], [0, 3, 0], [0, 0, 0], [0, 2, 2]])
    array([ 1,  1, -1,  1])
    """
    votes = np.asarray(votes)
    n_classes = votes.shape[1]
    # rank 0 is the class with the most votes overall
    rank = np.empty(n_classes, dtype=np.int64)
    rank[np.argsort(-votes.sum(axis=0), kind="stable")] = np.arange(n_classes)
    is_top = votes == votes.max(axis=1, keepdims=True)
    labels = np.where(is_top, rank, n_classes).argmin(axis=1).astype(np.int64)
    labels[~votes.any(axis=1)] = -1
    return labels

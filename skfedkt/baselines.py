"""The papers' baselines that are not one of the meta-estimators.

Centralized training is `solo_scores` with one party holding every row (or
``clone(estimator).fit(X, y)``); centralized PATE is
``FedKTClassifier(estimator).fit(X, y, X_unlabeled=X_public)`` (one party); the
undistilled ensemble is ``OneShotEnsembleClassifier(estimator, selection="all")``.
"""

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, column_or_1d

from ._engine._fitting import Task, TierJob, fit_clones
from ._engine._seeds import draw_seeds


def solo_scores(estimator, X, y, groups, X_test, y_test, *, n_jobs=None,
                random_state=None):
    """SOLO: the test accuracy of every party's model trained on its own rows alone.

    Parties train in parallel, each clone seeded from `random_state`; a party whose rows
    hold a single class predicts it everywhere. The papers report the mean over parties.

    Parameters
    ----------
    estimator : estimator object
        The model every party trains.
    X : array-like of shape (n_samples, n_features)
        Training rows of all parties.
    y : array-like of shape (n_samples,)
        Their labels.
    groups : array-like of shape (n_samples,)
        The party of each row.
    X_test : array-like of shape (n_test, n_features)
        Test rows.
    y_test : array-like of shape (n_test,)
        Test labels.
    n_jobs : int, default=None
        Number of parties trained in parallel.
    random_state : int, RandomState instance or None, default=None
        Seeds of the clones.

    Returns
    -------
    scores : ndarray of shape (n_parties,)
        Accuracy of each party's model, parties in sorted order.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from skfedkt.baselines import solo_scores
    >>> X, y = load_iris(return_X_y=True)
    >>> party = np.repeat([0, 1, 2], 50)  # each party holds one species
    >>> solo_scores(DecisionTreeClassifier(), X, y, party, X, y)
    array([0.333..., 0.333..., 0.333...])
    """
    X = check_array(X, accept_sparse=["csr", "csc"], ensure_all_finite="allow-nan",
                    dtype=None)
    classes, codes = np.unique(column_or_1d(y), return_inverse=True)
    parties, party_codes = np.unique(column_or_1d(groups), return_inverse=True)
    party_rows = [np.flatnonzero(party_codes == p) for p in range(len(parties))]
    fits = fit_clones(
        [Task(estimator, codes[rows], rows, name=f"party {party!r}")
         for party, rows in zip(parties, party_rows)],
        TierJob(X, len(classes), X_predict=X_test, keep_models=False),
        draw_seeds(check_random_state(random_state), len(parties)),
        n_jobs=n_jobs,
        tier="solo models",
    )
    return np.mean(classes[fits.predictions] == np.asarray(y_test), axis=1)

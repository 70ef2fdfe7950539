"""Shared test data."""

import warnings

from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

from skfedkt.datasets import dirichlet_partition
from skfedkt.privacy import PartyNoise, ServerNoise


def federated_digits(n_parties, random_state=0):
    """digits split 68/12/20 into train/public/test, train rows in Dirichlet(0.5) parties.

    Returns ``X_train, y_train, party, X_public, X_test, y_test``.
    """
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, random_state=random_state
    )
    X_train, X_public, y_train, _ = train_test_split(
        X_train, y_train, test_size=0.15, random_state=random_state
    )
    party = dirichlet_partition(y_train, n_parties, beta=0.5, random_state=random_state)
    return X_train, y_train, party, X_public, X_test, y_test


def noise_at(level, **params):
    """FedKT's `privacy` parameter for one of its privacy levels: None at "L0", else the
    mechanism of "L1" (`ServerNoise`) or "L2" (`PartyNoise`) with `params`."""
    return None if level == "L0" else {"L1": ServerNoise, "L2": PartyNoise}[level](**params)


class WarningTree(DecisionTreeClassifier):
    """A decision tree that warns, as scikit-learn's estimators do, every time it is fit:
    importable, so that loky workers can fit it."""

    def fit(self, X, y, sample_weight=None):
        warnings.warn(f"a clone warned: it saw {len(y)} rows", UserWarning)
        return super().fit(X, y, sample_weight=sample_weight)

"""What a fit lets out, as an attacker can query it (the subject of the membership audit).

Each algorithm lists its releases (its class's ``_releases``: ``of_fit`` of a fitted
estimator, ``of_upload`` of one party's upload) with these helpers.
"""

from dataclasses import dataclass, field

import numpy as np

from .._engine._fitting import ensemble_proba


@dataclass(frozen=True)
class Release:
    """One thing a fit lets out, as an attacker can query it.

    Attributes
    ----------
    name : str
        What it is: ``"upload"`` (what a party sends the server), ``"labels"`` (the
        labels a party shares, FedCT), ``"local model"`` (a party's own final model,
        FedCT), ``"final model"`` (what the server gives back or publishes).
    party : object
        The party whose rows made it; None for a release made from every party's rows.
    kind : {"proba", "labels"}
        ``"proba"``: the attacker can ask the release for class probabilities of any row
        (it holds a model); ``"labels"``: it gets one label per row (one-hot votes,
        possibly noisy, all zero for an abstention).
    predict : callable
        ``predict(X)`` gives an array of shape (n_samples, n_classes), columns in the
        order of the estimator's ``classes_``: probabilities, or one-hot votes.
    epsilon : float
        The differential-privacy guarantee that covers this release for one training
        example (``inf``: none).
    delta : float
        Its delta (0 when `epsilon` is ``inf``).
    """

    name: str
    party: object
    kind: str
    predict: object = field(repr=False)
    epsilon: float = np.inf
    delta: float = 0.0


def models_release(name, party, models, n_classes, epsilon=np.inf, delta=0.0):
    """The release of fitted clones (`ClassCodeModel`) handed over together: the
    attacker averages their class probabilities (one-hot votes where they have none)."""
    return Release(name, party, "proba",
                   lambda X: ensemble_proba(models, X, n_classes, "soft"), epsilon, delta)


def final_model_release(estimator, epsilon=np.inf, delta=0.0):
    """The release of a fitted estimator itself: its probabilities where it has
    ``predict_proba``, else its labels."""
    if hasattr(estimator, "predict_proba"):
        return Release("final model", None, "proba", estimator.predict_proba, epsilon, delta)

    def votes(X):
        codes = np.searchsorted(estimator.classes_, estimator.predict(X))
        return np.eye(len(estimator.classes_))[codes]

    return Release("final model", None, "labels", votes, epsilon, delta)

"""Fitting many clones of base estimators in parallel, each on labels it can digest."""

import sys
from contextlib import nullcontext
from typing import NamedTuple

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.dummy import DummyClassifier
from sklearn.pipeline import Pipeline
from sklearn.utils import _safe_indexing
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _num_samples
from threadpoolctl import threadpool_limits

_MAX_SEED = np.iinfo(np.int32).max


def code_dtype(n_classes):
    """The smallest signed integer type holding the class codes and the abstention -1."""
    return np.int8 if n_classes < 128 else np.int16 if n_classes < 32768 else np.int32


def draw_seeds(rng, n_seeds):
    """Independent integer seeds, one per clone, from a `RandomState`."""
    return rng.randint(_MAX_SEED, size=n_seeds)


def _final_step(estimator):
    return estimator[-1] if isinstance(estimator, Pipeline) else estimator


def _predicts_output_positions(estimator):
    """Whether `estimator` predicts the argmax position of a fixed output layer.

    skorch nets have one output unit per class (K in all) and ``predict`` returns the
    position of the largest output, not a label seen in ``fit``: they are trained on the
    global codes ``0..K-1`` even when their rows miss some classes.
    """
    skorch = sys.modules.get("skorch")
    return skorch is not None and isinstance(_final_step(estimator), skorch.NeuralNet)


class ClassCodeModel:
    """A fitted clone and the global class codes its outputs stand for.

    Clones are fit on int64 labels they can digest: the contiguous codes ``0..k-1`` of
    the ``k`` classes present in their rows (XGBoost refuses gaps such as ``[0, 2]``), or
    the global codes for skorch nets (see `_predicts_output_positions`). Rows of a single
    class give a constant `DummyClassifier` instead of an error. ``codes[j]`` is the
    global class code of the clone's label ``j``.
    """

    def __init__(self, estimator, codes):
        self.estimator = estimator
        self.codes = codes

    @classmethod
    def fit(cls, estimator, X, y, n_classes):
        present = np.unique(y)
        if present.size == 1:
            estimator = DummyClassifier(strategy="most_frequent")
            codes = present
        elif _predicts_output_positions(estimator):
            codes = np.arange(n_classes)
        else:
            codes = present
        estimator.fit(X, np.searchsorted(codes, y).astype(np.int64))
        return cls(estimator, codes)

    @property
    def is_constant(self):
        return self.codes.size == 1

    def predict(self, X):
        """Global class codes."""
        return self.codes[np.asarray(self.estimator.predict(X), dtype=np.intp)]

    def predict_proba(self, X, n_classes):
        """Probabilities with one column per global class, zero for unseen classes."""
        proba = self.estimator.predict_proba(X)
        aligned = np.zeros((proba.shape[0], n_classes))
        aligned[:, self.codes] = proba
        return aligned

    def decision_function(self, X, n_classes):
        """Scores in scikit-learn's layout for `n_classes` classes.

        Classes the clone never saw score ``-inf``; a constant clone scores 0 for its
        class. For two classes the result is 1-D (positive favours ``classes_[1]``).
        """
        if self.is_constant:
            scores = np.zeros((_num_samples(X), 1))
        else:
            scores = np.asarray(self.estimator.decision_function(X), dtype=float)
            if scores.ndim == 1:
                if n_classes == 2:
                    return scores
                scores = np.column_stack([-scores, scores])
        aligned = np.full((scores.shape[0], n_classes), -np.inf)
        aligned[:, self.codes] = scores
        if n_classes == 2:
            return aligned[:, 1] - aligned[:, 0]
        return aligned


class GlobalLabelClassifier(ClassifierMixin, BaseEstimator):
    """A fitted `ClassCodeModel` seen as a scikit-learn classifier of the global labels.

    Lets scikit-learn scorers evaluate a clone that was trained on class codes.

    Parameters
    ----------
    model : ClassCodeModel
        The fitted clone.
    classes : ndarray of shape (n_classes,)
        The global labels, ``classes_`` of the meta-estimator.
    """

    def __init__(self, model, classes):
        self.model = model
        self.classes = classes

    @property
    def classes_(self):
        return self.classes

    def __sklearn_is_fitted__(self):
        return True

    def predict(self, X):
        return self.classes[self.model.predict(X)]

    @available_if(lambda self: hasattr(self.model.estimator, "predict_proba"))
    def predict_proba(self, X):
        return self.model.predict_proba(X, len(self.classes))

    @available_if(
        lambda self: self.model.is_constant or hasattr(self.model.estimator, "decision_function")
    )
    def decision_function(self, X):
        return self.model.decision_function(X, len(self.classes))


def _matching_params(estimator, name):
    """Names of `name` and of every nested ``*__name`` parameter of `estimator`."""
    return sorted(
        key
        for key in estimator.get_params(deep=True)
        if key == name or key.endswith("__" + name)
    )


def seeded_clone(estimator, seed, single_threaded=False):
    """An unfitted clone whose randomness is fixed by `seed`.

    Every ``random_state`` parameter (nested ones too) gets its own integer drawn from
    `seed`, and torch's RNG is seeded for skorch nets, which have no random_state. With
    `single_threaded`, parameters that ask for parallel workers (``n_jobs`` other than
    None or 1) are set to 1.
    """
    estimator = clone(estimator)
    rng = np.random.RandomState(seed)
    params = {key: rng.randint(_MAX_SEED) for key in _matching_params(estimator, "random_state")}
    if single_threaded:
        # the clones already run in parallel: their own workers would oversubscribe
        all_params = estimator.get_params(deep=True)
        params.update(
            (key, 1)
            for key in _matching_params(estimator, "n_jobs")
            if all_params[key] not in (None, 1)
        )
    estimator.set_params(**params)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(int(seed))
    return estimator


def _fit_clone(estimator, X, y, rows, n_classes, seed, single_threaded, X_predict,
               keep_model, score_training):
    estimator = seeded_clone(estimator, seed, single_threaded)
    if rows is not None:
        X, y = _safe_indexing(X, rows), y[rows]
    model = ClassCodeModel.fit(estimator, X, y, n_classes)
    # compact codes: one per public example and clone adds up over thousands of clones
    predictions = None if X_predict is None else model.predict(X_predict).astype(
        code_dtype(n_classes)
    )
    training_accuracy = np.mean(model.predict(X) == y) if score_training else None
    return (model if keep_model else None), predictions, training_accuracy


class CloneFits(NamedTuple):
    """What `fit_clones` returns, one entry per task."""

    models: list
    """Fitted `ClassCodeModel` per task (``None`` when not kept)."""
    predictions: np.ndarray
    """Global class codes predicted on ``X_predict``, shape (n_tasks, n_predict), or None."""
    training_accuracy: np.ndarray
    """Accuracy of each clone on its own training rows, or None."""


def fit_clones(tasks, X, *, n_classes, seeds, n_jobs=None, verbose=0, X_predict=None,
               keep_models=True, score_training=False):
    """Fit one clone per task in a single flat parallel batch.

    Parameters
    ----------
    tasks : list of (estimator, y, rows)
        The estimator to clone, the class codes of all rows of `X`, and the row indices
        the clone learns from (``None`` for all rows). Tasks carry indices, never copies.
    X : array-like, sparse matrix or DataFrame
        The rows the tasks index.
    n_classes : int
        Number of global classes.
    seeds : array-like of int of shape (n_tasks,)
        One seed per clone: it sets every ``random_state`` parameter of the clone (nested
        ones too) and torch's RNG, so results do not depend on `n_jobs` or the backend.
    n_jobs, verbose : int or None
        Passed to `sklearn.utils.parallel.Parallel`.
    X_predict : array-like, default=None
        Data each fitted clone labels with global class codes.
    keep_models : bool, default=True
        Whether to return the fitted clones (teachers' are not kept).
    score_training : bool, default=False
        Whether to measure each clone's accuracy on its own training rows.

    Returns
    -------
    fits : CloneFits
    """
    single_threaded = min(effective_n_jobs(n_jobs), len(tasks)) > 1
    # threads of BLAS/OpenMP in this process (threading backend); loky workers are
    # limited by loky itself
    limits = threadpool_limits(limits=1) if single_threaded else nullcontext()
    with limits:
        results = Parallel(n_jobs=n_jobs, verbose=verbose)(
            delayed(_fit_clone)(
                estimator, X, y, rows, n_classes, seed, single_threaded, X_predict,
                keep_models, score_training,
            )
            for (estimator, y, rows), seed in zip(tasks, seeds)
        )
    models, predictions, accuracies = zip(*results)
    return CloneFits(
        models=list(models),
        predictions=None if X_predict is None else np.stack(predictions),
        training_accuracy=np.array(accuracies) if score_training else None,
    )


def ensemble_proba(models, X, n_classes, voting):
    """Class probabilities of an ensemble of `ClassCodeModel`, one column per class.

    ``voting="hard"`` gives each model's vote share; ``"soft"`` averages the models'
    probabilities, a model without ``predict_proba`` contributing its vote.
    """
    total = np.zeros((_num_samples(X), n_classes))
    for model in models:
        if voting == "soft" and hasattr(model.estimator, "predict_proba"):
            total += model.predict_proba(X, n_classes)
        else:
            total[np.arange(len(total)), model.predict(X)] += 1
    return total / len(models)

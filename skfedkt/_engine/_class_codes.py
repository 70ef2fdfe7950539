"""Models of class codes: a fitted clone and the global classes its outputs stand for,
the labels and weights a clone learns from, and a clone seen as a classifier of the
global labels."""

import numpy as np
from sklearn import config_context
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.dummy import DummyClassifier
from sklearn.pipeline import Pipeline
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import has_fit_parameter

from ._compat import num_samples
from ._nets import ends_in_skorch_net, explained_module_error, final_step, targets_for


def code_dtype(n_classes):
    """The smallest signed integer type holding the class codes and the abstention -1."""
    return np.int8 if n_classes < 128 else np.int16 if n_classes < 32768 else np.int32


def sample_weight_param(estimator):
    """The ``fit`` parameter that carries sample weights to `estimator`, or None.

    A Pipeline passes them to its final step (``"name__sample_weight"``).
    """
    if isinstance(estimator, Pipeline):
        name, last = estimator.steps[-1]
        inner = sample_weight_param(last)
        return None if inner is None else f"{name}__{inner}"
    return "sample_weight" if has_fit_parameter(estimator, "sample_weight") else None


def soft_label_rows(distributions):
    """Rows, labels and weights that teach a classifier per-example class distributions.

    Every example appears once per class of positive probability, labelled with that
    class and weighted by its probability: the weighted log loss of these rows is the
    cross-entropy to the distributions, and their total weight is the number of
    examples, as with hard labels. Examples without probability mass are left out.

    Parameters
    ----------
    distributions : ndarray of shape (n_samples, n_classes)
        Non-negative; each row sums to one or to zero.

    Returns
    -------
    rows, labels : ndarray of int of shape (n_pairs,)
    weights : ndarray of float of shape (n_pairs,)

    Examples
    --------
    >>> import numpy as np
    >>> from skfedkt._engine._class_codes import soft_label_rows
    >>> soft_label_rows(np.array([[0.25, 0.75], [0.0, 0.0], [1.0, 0.0]]))
    (array([0, 0, 2]), array([0, 1, 0]), array([0.25, 0.75, 1.  ]))
    """
    rows, labels = np.nonzero(distributions > 0)
    return rows, labels, distributions[rows, labels]


class ClassCodeModel:
    """A fitted clone and the global class codes its outputs stand for.

    Clones are fit on int64 labels they can digest: the contiguous codes ``0..k-1`` of
    the ``k`` classes present in their rows (XGBoost refuses gaps such as ``[0, 2]``), or
    the global codes for skorch nets (see `_nets.ends_in_skorch_net`). Rows of a single
    class give a constant `DummyClassifier` instead of an error. ``codes[j]`` is the
    global class code of the clone's label ``j``.

    Sample weights reach the estimator through `sample_weight_param`; an estimator
    that takes none is fit without them (callers check `sample_weight_param` first
    when the weights matter).
    """

    def __init__(self, estimator, codes):
        self.estimator = estimator
        self.codes = codes

    @classmethod
    def fit(cls, estimator, X, y, n_classes, sample_weight=None):
        present = np.unique(y)
        if present.size == 1:
            estimator, codes = DummyClassifier(strategy="most_frequent"), present
            sample_weight = None
        elif ends_in_skorch_net(estimator):
            codes = np.arange(n_classes)
        else:
            codes = present
        weight_param = None if sample_weight is None else sample_weight_param(estimator)
        fit_params = {} if weight_param is None else {weight_param: sample_weight}
        # with routing on, a Pipeline takes no "step__param"; the clone needs no routing
        with config_context(enable_metadata_routing=False):
            targets = np.searchsorted(codes, y)
            if ends_in_skorch_net(estimator):
                try:
                    estimator.fit(X, targets_for(estimator, targets), **fit_params)
                except RuntimeError as exc:
                    explained = explained_module_error(final_step(estimator), exc)
                    if explained is exc:
                        raise
                    raise explained from exc
            else:
                estimator.fit(X, targets.astype(np.int64), **fit_params)
        return cls(estimator, codes)

    @property
    def is_constant(self):
        return self.codes.size == 1

    def predict(self, X):
        """Global class codes."""
        return self.codes[np.asarray(self.estimator.predict(X), dtype=np.intp)]

    def votes(self, X, n_classes, soft):
        """One vote per row, shape (n_samples, n_classes), each row summing to one.

        With `soft`, the class probabilities (where the estimator has
        ``predict_proba``); otherwise, or without it, the one-hot prediction.
        """
        if soft and hasattr(self.estimator, "predict_proba"):
            return self.predict_proba(X, n_classes)
        one_hot = np.zeros((num_samples(X), n_classes))
        one_hot[np.arange(len(one_hot)), self.predict(X)] = 1
        return one_hot

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
            scores = np.zeros((num_samples(X), 1))
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

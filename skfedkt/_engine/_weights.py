"""Models whose parameters can be averaged (FedAvg): read their weights, start a clone
from given weights, and train it epoch by epoch.

scikit-learn's `MLPClassifier` and `SGDClassifier` learn incrementally (``partial_fit``,
one epoch a call). Weights can only be set on a clone whose layers exist, so a clone
first takes one ``partial_fit`` on a few rows with every class, which builds its full
output layer, and then gets the weights (copies: scikit-learn updates the arrays it
holds in place).
"""

import warnings

import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.neural_network import MLPClassifier

from ._fitting import seeded_clone, take_rows

# the weights of each kind of model, in a fixed order
_WEIGHT_NAMES = {MLPClassifier: ("coefs_", "intercepts_"), SGDClassifier: ("coef_", "intercept_")}


def check_averageable(estimator, name):
    """Refuse, naming `name` and what to use instead, an estimator whose parameters
    cannot be averaged."""
    if type(estimator) not in _WEIGHT_NAMES:
        raise TypeError(
            f"{name} averages the parameters of models that learn incrementally: "
            f"MLPClassifier or SGDClassifier; got {type(estimator).__name__}. For models "
            "without averageable parameters (trees, forests, boosting), use "
            "FedKTClassifier or OneShotEnsembleClassifier, which transfer knowledge "
            "through votes instead."
        )
    if isinstance(estimator, MLPClassifier) and estimator.solver == "lbfgs":
        raise ValueError(
            f"{name} trains its MLPClassifier epoch by epoch (partial_fit), which the "
            "'lbfgs' solver does not offer: use solver='adam' or 'sgd'."
        )
    if getattr(estimator, "early_stopping", False):
        raise ValueError(
            f"{name} trains its {type(estimator).__name__} epoch by epoch (partial_fit), "
            "which refuses early_stopping=True: set early_stopping=False and use "
            "n_rounds."
        )


def model_weights(model):
    """A fitted model's weights: a flat list of copies of its arrays."""
    arrays = []
    for name in _WEIGHT_NAMES[type(model)]:
        value = getattr(model, name)
        arrays += [np.array(a, dtype=float) for a in value] if isinstance(value, list) else [
            np.array(value, dtype=float)]
    return arrays


def _set_weights(model, weights):
    """Set `weights` (as `model_weights` gives them) on a model whose layers exist, in
    the dtype its layers have (float32 data makes float32 layers)."""
    weights = iter(weights)
    for name in _WEIGHT_NAMES[type(model)]:
        value = getattr(model, name)
        if isinstance(value, list):
            setattr(model, name, [np.array(next(weights), dtype=layer.dtype)
                                  for layer in value])
        else:
            setattr(model, name, np.array(next(weights), dtype=value.dtype))


def started_model(estimator, X, y, n_classes, seed, weights=None):
    """A clone of `estimator` seeded with `seed`, whose layers exist for all `n_classes`
    class codes, carrying `weights` if given (a fresh optimizer: FedAvg's local training
    starts from the global weights alone).

    Without weights, the clone's first epoch on (`X`, `y`) also initialises it: clones
    of the same seed start from the same weights.
    """
    model = seeded_clone(estimator, seed)
    classes = np.arange(n_classes)
    if weights is None:
        model.partial_fit(X, y, classes=classes)
        return model
    # one row of each class present builds the layers; the weights then replace what
    # that step learned
    first = np.unique(y, return_index=True)[1]
    with warnings.catch_warnings():
        # a batch larger than these few rows: clipped, and the step is replaced anyway
        warnings.filterwarnings("ignore", message=".*batch_size", category=UserWarning)
        model.partial_fit(take_rows(X, first), y[first], classes=classes)
    _set_weights(model, weights)
    if hasattr(model, "_optimizer"):  # MLPClassifier's Adam or SGD state
        del model._optimizer
    return model


def weight_shapes(estimator, n_features, n_classes, seed=0):
    """The shapes of the weights of `estimator` on `n_features` features and
    `n_classes` classes, as `model_weights` lists them."""
    X = np.zeros((n_classes, n_features))
    model = started_model(estimator, X, np.arange(n_classes), n_classes, seed)
    return [w.shape for w in model_weights(model)]


def model_of(estimator, weights, n_classes):
    """A model of `estimator`'s kind carrying `weights`, for `n_classes` class codes."""
    # the features it takes: the rows of an MLP's first layer, the columns of a linear
    # model's coefficients
    n_features = weights[0].shape[0 if isinstance(estimator, MLPClassifier) else 1]
    return started_model(estimator, np.zeros((n_classes, n_features)), np.arange(n_classes),
                         n_classes, 0, weights)


def averaged_weights(weights, counts):
    """The mean of every party's weights, each weighted by its rows (FedAvg)."""
    counts = np.asarray(counts, dtype=float)
    return [np.tensordot(counts / counts.sum(), np.stack(arrays), axes=1)
            for arrays in zip(*weights)]

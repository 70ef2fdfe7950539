"""Models whose parameters can be averaged (FedAvg): read their weights, start a clone
from given weights, and train it epoch by epoch.

scikit-learn's `MLPClassifier` and `SGDClassifier` learn incrementally (``partial_fit``,
one epoch a call). Weights can only be set on a clone whose layers exist, so a clone
first takes one ``partial_fit`` on a few rows with every class, which builds its full
output layer, and then gets the weights (copies: scikit-learn updates the arrays it
holds in place).

FedProx's local objective adds ``mu / 2 * ||w - w_global||^2`` to a party's loss; an
MLP's gradient is extended by exactly that term (`ProximalMLPClassifier`).
"""

import warnings

import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.neural_network import MLPClassifier

from ._fitting import seeded_clone, take_rows

# the weights of each kind of model, in a fixed order
_WEIGHT_NAMES = {MLPClassifier: ("coefs_", "intercepts_"), SGDClassifier: ("coef_", "intercept_")}


class ProximalMLPClassifier(MLPClassifier):
    """An MLPClassifier whose training loss adds FedProx's proximal term
    ``proximal_mu / 2 * ||w - w_global||^2`` over every weight and bias, so that local
    training stays near the global weights `anchor` (Li et al., 2020).

    Made only by `started_model`, around a clone carrying the global weights; its
    ``partial_fit`` epochs minimise the extended loss with the clone's own solver.
    """

    def _backprop(self, *args):
        # scikit-learn's gradient of the mean loss (and its L2 penalty), extended by the
        # proximal term's gradient mu * (w - w_global)
        loss, coef_grads, intercept_grads = super()._backprop(*args)
        mu = self.proximal_mu
        layers = [*self.coefs_, *self.intercepts_]
        for grad, weight, anchor in zip([*coef_grads, *intercept_grads], layers,
                                        self.anchor):
            grad += mu * (weight - anchor)
        loss += mu / 2 * sum(np.sum((weight - anchor) ** 2)
                             for weight, anchor in zip(layers, self.anchor))
        return loss, coef_grads, intercept_grads


def _weight_names(model):
    return _WEIGHT_NAMES[MLPClassifier if isinstance(model, MLPClassifier) else type(model)]


def check_averageable(estimator, name, proximal_mu=0.0):
    """Refuse, naming `name` and what to use instead, an estimator whose parameters
    cannot be averaged, or whose loss FedProx's term cannot extend."""
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
    if proximal_mu > 0 and not isinstance(estimator, MLPClassifier):
        raise ValueError(
            f"{name}'s proximal_mu (FedProx) adds a term to the gradient of an "
            f"MLPClassifier; {type(estimator).__name__} computes its own in compiled code. "
            "Use an MLPClassifier, or proximal_mu=0 (FedAvg)."
        )


def model_weights(model):
    """A fitted model's weights: a flat list of copies of its arrays."""
    arrays = []
    for name in _weight_names(model):
        value = getattr(model, name)
        arrays += [np.array(a, dtype=float) for a in value] if isinstance(value, list) else [
            np.array(value, dtype=float)]
    return arrays


def _set_weights(model, weights):
    """Set `weights` (as `model_weights` gives them) on a model whose layers exist, in
    the dtype its layers have (float32 data makes float32 layers)."""
    weights = iter(weights)
    for name in _weight_names(model):
        value = getattr(model, name)
        if isinstance(value, list):
            setattr(model, name, [np.array(next(weights), dtype=layer.dtype)
                                  for layer in value])
        else:
            setattr(model, name, np.array(next(weights), dtype=value.dtype))


def started_model(estimator, X, y, n_classes, seed, weights=None, proximal_mu=0.0):
    """A clone of `estimator` seeded with `seed`, whose layers exist for all `n_classes`
    class codes, carrying `weights` if given (a fresh optimizer: FedAvg's local training
    starts from the global weights alone).

    Without weights, the clone's first epoch on (`X`, `y`) also initialises it: clones
    of the same seed start from the same weights. With weights and a positive
    `proximal_mu` (an MLP), its further epochs minimise FedProx's objective, anchored
    at `weights`.
    """
    model = seeded_clone(estimator, seed)
    if proximal_mu > 0 and weights is not None:
        model = ProximalMLPClassifier(**model.get_params())
        model.proximal_mu = proximal_mu
        model.anchor = [np.array(w, dtype=float) for w in weights]
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


def initial_weights(estimator, X, y, n_classes, seed):
    """The weights a clone seeded with `seed` starts from, before any training: the
    same at every party for the same seed and shapes. An MLP initialises its layers
    only inside its first ``partial_fit``, so that epoch runs at a vanishing learning
    rate, which leaves them as drawn."""
    model = seeded_clone(estimator, seed).set_params(learning_rate_init=1e-300)
    model.partial_fit(X, y, classes=np.arange(n_classes))
    return model_weights(model)


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

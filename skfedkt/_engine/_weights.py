"""Models whose parameters can be averaged (FedAvg): read their weights, start a clone
from given weights, and train it epoch by epoch.

Three kinds qualify, each through its own small adapter:

- scikit-learn's `MLPClassifier` and `SGDClassifier` learn incrementally
  (``partial_fit``, one epoch a call). Weights can only be set on a clone whose layers
  exist, so a clone first takes one ``partial_fit`` on a few rows with every class,
  which builds its full output layer, and then gets the weights (copies: scikit-learn
  updates the arrays it holds in place);
- a skorch net (`_torch_weights`): its module's ``state_dict``, one epoch a
  ``partial_fit(..., epochs=1)``, on the net's own device.

Any of them may be the last step of a Pipeline whose earlier steps hold no state
(``FunctionTransformer``, e.g. skorch's cast to float32): averaging weights is only
meaningful where every party transforms its rows the same way.

FedProx's local objective adds ``mu / 2 * ||w - w_global||^2`` to a party's loss; the
gradient of an MLP (`ProximalMLPClassifier`) or of a skorch net (a callback) is extended
by exactly that term.
"""

from numbers import Integral

import numpy as np
from sklearn.linear_model import SGDClassifier
from sklearn.neural_network import MLPClassifier

from ._compat import MLPClassifierWithGradientTerm, forget_mlp_optimizer
from ._nets import (
    final_step,
    is_skorch_net,
    learner_and_steps,
    stateful_steps,
    targets_for,
    with_final_step,
)
from ._rows import take_rows
from ._seeds import seeded_clone

# the weights of scikit-learn's models, in a fixed order
_WEIGHT_NAMES = {MLPClassifier: ("coefs_", "intercepts_"), SGDClassifier: ("coef_", "intercept_")}


class ProximalMLPClassifier(MLPClassifierWithGradientTerm):
    """An MLPClassifier whose training loss adds FedProx's proximal term
    ``proximal_mu / 2 * ||w - w_global||^2`` over every weight and bias, so that local
    training stays near the global weights `anchor` (Li et al., 2020).

    Made only by `started_model`, around a clone carrying the global weights; its
    ``partial_fit`` epochs minimise the extended loss with the clone's own solver.
    """

    proximal_mu: float
    anchor: list

    def added_loss(self, coef_grads, intercept_grads):
        # the proximal term's gradient mu * (w - w_global), added to scikit-learn's of
        # the mean loss (and its L2 penalty); its loss returned
        mu = self.proximal_mu
        layers = [*self.coefs_, *self.intercepts_]
        for grad, weight, anchor in zip([*coef_grads, *intercept_grads], layers,
                                        self.anchor):
            grad += mu * (weight - anchor)
        return mu / 2 * sum(np.sum((weight - anchor) ** 2)
                            for weight, anchor in zip(layers, self.anchor))


def check_averageable(estimator, name, proximal_mu=0.0):
    """Refuse, naming `name` and what to use instead, an estimator whose parameters
    cannot be averaged, or whose loss FedProx's term cannot extend."""
    learner = final_step(estimator)
    if type(learner) not in _WEIGHT_NAMES and not is_skorch_net(learner):
        raise TypeError(
            f"{name} averages the parameters of models that learn incrementally: "
            f"MLPClassifier, SGDClassifier or a skorch NeuralNetClassifier; got "
            f"{type(learner).__name__}. For models without averageable parameters "
            "(trees, forests, boosting), use FedKTClassifier or OneShotEnsembleClassifier, "
            "which transfer knowledge through votes instead."
        )
    stateful = stateful_steps(estimator)
    if stateful:
        raise TypeError(
            f"{name} averages the weights of a Pipeline's last step, which every "
            "party must feed the same features; its steps "
            f"{', '.join(map(repr, stateful))} learn from each party's own rows. Scale "
            "the data before the fit (the same transform at every party), or keep only "
            "stateless steps (FunctionTransformer)."
        )
    if isinstance(learner, MLPClassifier) and learner.solver == "lbfgs":
        raise ValueError(
            f"{name} trains its MLPClassifier epoch by epoch (partial_fit), which the "
            "'lbfgs' solver does not offer: use solver='adam' or 'sgd'."
        )
    if getattr(learner, "early_stopping", False):
        raise ValueError(
            f"{name} trains its {type(learner).__name__} epoch by epoch (partial_fit), "
            "which refuses early_stopping=True: set early_stopping=False and use "
            "n_rounds."
        )
    if proximal_mu > 0 and isinstance(learner, SGDClassifier):
        raise ValueError(
            f"{name}'s proximal_mu (FedProx) adds a term to the gradient of an "
            "MLPClassifier or a skorch net; SGDClassifier computes its own in compiled "
            "code. Use one of those, or proximal_mu=0 (FedAvg)."
        )


def model_weights(model):
    """A fitted model's weights: a flat list of float64 copies of its arrays."""
    learner = final_step(model)
    if is_skorch_net(learner):
        from ._torch_weights import net_weights

        return net_weights(learner)
    arrays = []
    for name in _weight_names(learner):
        value = getattr(learner, name)
        arrays += [np.array(a, dtype=float) for a in value] if isinstance(value, list) else [
            np.array(value, dtype=float)]
    return arrays


def _weight_names(learner):
    return _WEIGHT_NAMES[MLPClassifier if isinstance(learner, MLPClassifier)
                         else type(learner)]


def _set_weights(learner, weights):
    """Set `weights` (as `model_weights` gives them) on a model whose layers exist, in
    the dtype its layers have (float32 data makes float32 layers)."""
    weights = iter(weights)
    for name in _weight_names(learner):
        value = getattr(learner, name)
        if isinstance(value, list):
            setattr(learner, name, [np.array(next(weights), dtype=layer.dtype)
                                    for layer in value])
        else:
            setattr(learner, name, np.array(next(weights), dtype=value.dtype))


def _transformed(model, X):
    """`X` through a Pipeline's stateless steps (as is for a bare model)."""
    steps = learner_and_steps(model)[1]
    return X if steps is None else steps.transform(X)


def train_epoch(model, X, y):
    """One epoch of `model` (started by `started_model`) on (`X`, `y`)."""
    learner = final_step(model)
    Xt = _transformed(model, X)
    if is_skorch_net(learner):
        learner.partial_fit(Xt, targets_for(learner, y), epochs=1)
    else:
        learner.partial_fit(Xt, y)


def started_model(estimator, X, y, n_classes, seed, weights=None, proximal_mu=0.0):
    """A clone of `estimator` seeded with `seed`, whose layers exist for all `n_classes`
    class codes, carrying `weights` (the shared initial weights of `initial_weights`
    if None) and a fresh optimizer: FedAvg's local training starts from the global
    weights alone. With a positive `proximal_mu`, its epochs (`train_epoch`) minimise
    FedProx's objective, anchored at those weights.

    Rows of `X` (with labels `y`) only build the layers of a scikit-learn model.
    """
    if weights is None:
        weights = initial_weights(estimator, X, y, n_classes, seed)
    model = seeded_clone(estimator, seed)
    learner = final_step(model)
    if is_skorch_net(learner):
        from ._torch_weights import start_net

        start_net(learner, weights, proximal_mu)
        return model
    if proximal_mu > 0:
        learner = ProximalMLPClassifier(**learner.get_params())
        learner.proximal_mu = proximal_mu
        learner.anchor = [np.array(w, dtype=float) for w in weights]
        model = with_final_step(model, learner)
    _build_layers(learner, _transformed(model, X), y, n_classes)
    _set_weights(learner, weights)
    forget_mlp_optimizer(learner)
    return model


def _build_layers(learner, X, y, n_classes):
    """One ``partial_fit`` of a scikit-learn model on one row of each class present
    in `y`, which builds its layers for all `n_classes` codes."""
    first = np.unique(y, return_index=True)[1]
    # a batch larger than these few rows: clipped here as scikit-learn would clip it,
    # without its warning (catch_warnings, in joblib's threads, left its filter behind
    # for the rest of the process)
    batch_size = getattr(learner, "batch_size", None)
    clipped = isinstance(batch_size, Integral) and int(batch_size) > len(first)
    if clipped:
        learner.set_params(batch_size=len(first))
    try:
        learner.partial_fit(take_rows(X, first), y[first], classes=np.arange(n_classes))
    finally:
        if clipped:
            learner.set_params(batch_size=batch_size)


def initial_weights(estimator, X, y, n_classes, seed):
    """The weights a clone seeded with `seed` starts from, before any training: the
    same at every party for the same seed and shapes, whatever its rows.

    An MLP draws its layers only inside its first ``partial_fit``, so that step runs at
    a vanishing learning rate, which leaves them as drawn; a linear model starts at
    zero; a skorch net draws its module when initialised.
    """
    model = seeded_clone(estimator, seed)
    learner = final_step(model)
    if is_skorch_net(learner):
        from ._torch_weights import net_weights

        return net_weights(learner.initialize())
    if isinstance(learner, MLPClassifier):
        learner.set_params(learning_rate_init=1e-300)
    _build_layers(learner, _transformed(model, X), y, n_classes)
    weights = model_weights(learner)
    return weights if isinstance(learner, MLPClassifier) else [np.zeros_like(w)
                                                                for w in weights]


def weight_shapes(estimator, n_features, n_classes):
    """The shapes of the weights of `estimator` on `n_features` features and
    `n_classes` classes, as `model_weights` lists them."""
    X = np.zeros((n_classes, n_features))
    return [w.shape for w in initial_weights(estimator, X, np.arange(n_classes),
                                             n_classes, 0)]


def weight_shapes_of(estimator):
    """`weight_shapes` of `estimator` as a function of the features and classes, each
    computed once: the server checks every upload of a round against the same shapes."""
    computed = {}

    def shapes(n_features, n_classes):
        if (n_features, n_classes) not in computed:
            computed[n_features, n_classes] = weight_shapes(estimator, n_features, n_classes)
        return computed[n_features, n_classes]

    return shapes


def model_of(estimator, weights, n_classes):
    """A model of `estimator`'s kind carrying `weights`, for `n_classes` class codes."""
    learner = final_step(estimator)
    # the features a scikit-learn model's layers are built for: the rows of an MLP's
    # first layer, the columns of a linear model's coefficients (a net's module fixes
    # its own)
    n_features = (1 if is_skorch_net(learner) else
                  weights[0].shape[0 if isinstance(learner, MLPClassifier) else 1])
    return started_model(estimator, np.zeros((n_classes, n_features)), np.arange(n_classes),
                         n_classes, 0, weights)


def averaged_weights(weights, counts):
    """The mean of every party's weights, each weighted by its rows (FedAvg): summed
    party by party in the order given, each scaled by its share of the rows, as
    Flower's FedAvg strategy sums them, so that both give the same bits."""
    total = sum(counts)
    averaged = [np.array(array, dtype=float) * (counts[0] / total) for array in weights[0]]
    for party_weights, count in zip(weights[1:], counts[1:]):
        for average, array in zip(averaged, party_weights):
            average += array * (count / total)
    return averaged

"""What the engine asks of a base estimator that may hold a skorch net, answered once
here without importing torch: whether it is one, its last step and the steps before
(and whether they learn), the targets it learns from and what its errors mean."""

import sys

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer


def learner_and_steps(estimator):
    """`estimator`'s model that learns (a Pipeline's last step) and what its rows go
    through before it (the Pipeline's earlier steps; None: nothing)."""
    if isinstance(estimator, Pipeline):
        return estimator.steps[-1][1], (estimator[:-1] if len(estimator.steps) > 1 else None)
    return estimator, None


def final_step(estimator):
    """The model that learns: `estimator`, or a Pipeline's last step."""
    return learner_and_steps(estimator)[0]


def with_final_step(estimator, learner):
    """`estimator` with `learner` as its model that learns: a Pipeline of the same
    steps before it, or `learner` itself."""
    if isinstance(estimator, Pipeline):
        return Pipeline([*estimator.steps[:-1], (estimator.steps[-1][0], learner)])
    return learner


def stateful_steps(estimator):
    """The names of the steps before a Pipeline's last that learn from the rows they
    see: any but a FunctionTransformer, None or ``"passthrough"`` (none for a bare
    model)."""
    if not isinstance(estimator, Pipeline):
        return []
    return [name for name, step in estimator.steps[:-1]
            if not isinstance(step, FunctionTransformer) and step not in (None, "passthrough")]


def _skorch_class(name):
    # skorch is imported by whoever built the net: a net exists only where it is
    skorch = sys.modules.get("skorch")
    return None if skorch is None else getattr(skorch, name)


def is_skorch_net(model):
    """Whether `model` itself is a skorch net."""
    net = _skorch_class("NeuralNet")
    return net is not None and isinstance(model, net)


def ends_in_skorch_net(estimator):
    """Whether `estimator`, or its Pipeline's last step, is a skorch net: a model with
    one output unit per class (K in all) whose ``predict`` returns the position of the
    largest, not a label seen in ``fit``, so it trains on the global codes ``0..K-1``
    even where its rows miss classes."""
    return is_skorch_net(final_step(estimator))


def is_binary_net(model):
    """Whether `model` is skorch's binary net: one logit per row, float targets."""
    binary = _skorch_class("NeuralNetBinaryClassifier")
    return binary is not None and isinstance(model, binary)


def targets_for(estimator, codes):
    """The targets `estimator`'s net learns from class codes: int64, or float32 for a
    binary net (its logistic criterion compares its output with floats)."""
    binary = is_binary_net(final_step(estimator))
    return np.asarray(codes, dtype=np.float32 if binary else np.int64)


def explained_module_error(net, exc):
    """A torch error from `net`'s first forward pass, in words that name the fix where
    it is the usual one (float64 rows for a float32 module), else `exc` itself."""
    if isinstance(exc, RuntimeError) and "same dtype" in str(exc) and "Double" in str(exc):
        return TypeError(
            f"{type(net).__name__} got float64 rows, but its torch module computes in "
            f"float32 ({exc}). Put FunctionTransformer(to_float32) in front of the net, "
            "with a module-level to_float32(X) that returns X.astype(np.float32).")
    return exc

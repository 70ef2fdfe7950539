"""Every use skfedkt makes of torch's, skorch's, cloudpickle's and scikit-learn's private
insides, each a small named function here, checked against the installed versions.

The rest of the package uses their public API alone, so that upgrading one of them
changes this file and no other: each function says why no public API does its job and
the versions it was checked on, and ``tests/test_compat.py`` shows, one test each, that
it still does on the versions installed. The range supported is the package's
(``pyproject.toml``): `TESTED_FROM`. Where a private name is gone, a function fails
with `MissingPrivateAPI`, naming the library, its version and the name, or takes the
fallback its docstring gives, instead of an AttributeError deep inside a fit.

Importing this module needs neither torch nor skorch (``import skfedkt`` works without
them): a function that needs one imports it when called.
"""

import importlib
import re

from sklearn.base import _fit_context
from sklearn.ensemble._hist_gradient_boosting.predictor import TreePredictor
from sklearn.neural_network import MLPClassifier
from sklearn.svm._base import BaseLibSVM
from sklearn.tree._tree import Tree
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import (  # noqa: F401  (the validation, below)
    HasMethods,
    Interval,
    InvalidParameterError,
    Options,
    StrOptions,
    validate_params,
)
from sklearn.utils.validation import _num_samples

# the oldest versions the package supports (pyproject.toml); the private names below
# were checked on torch 2.13, skorch 1.4, cloudpickle 3.1 and scikit-learn 1.9
TESTED_FROM = {"torch": (2, 0), "skorch": (1, 0), "cloudpickle": (1, 5),
               "sklearn": (1, 6)}


class MissingPrivateAPI(RuntimeError):
    """A private name skfedkt relies on is not in the installed version of its library."""


def version_of(library):
    """`library`'s installed version as a tuple of its leading numbers, e.g. (2, 13, 0)
    for torch's ``2.13.0+cpu``."""
    text = importlib.import_module(library).__version__
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def _require(owner, name, library):
    """`owner`'s attribute `name`, or `MissingPrivateAPI` naming `library`'s version."""
    try:
        return getattr(owner, name)
    except AttributeError:
        raise MissingPrivateAPI(
            f"skfedkt relies on {library}'s private {name!r}, which {library} "
            f"{'.'.join(map(str, version_of(library)))} lacks (checked from "
            f"{'.'.join(map(str, TESTED_FROM[library]))}): please report this "
            "version to skfedkt") from None


# scikit-learn -----------------------------------------------------------------------

# how many rows an array, frame, sparse matrix or list holds, and rows taken from any
# of them: what scikit-learn's own estimators use; no public function takes every kind
# (checked on 1.6 to 1.9)
num_samples = _num_samples
safe_indexing = _safe_indexing

# scikit-learn's parameter validation: the constraints an estimator's
# ``_parameter_constraints`` and a function's `validate_params` declare, the error they
# raise, and the decorator of ``fit`` that validates once per call (nested estimators
# skip theirs); scikit-learn's own estimators and the contributors' guide use them, from
# a private module (checked on 1.6 to 1.9)
fit_context = _fit_context

# scikit-learn's fitted structures that compiled code walks, trusting their arrays: a
# payload holding one is checked before it predicts (``_deployment/_native.py``). Their
# classes live in private modules, and skops names them so in a file (checked on 1.6 to
# 1.9).
NATIVE_TREE = Tree
NATIVE_BOOSTING_PREDICTOR = TreePredictor
NATIVE_LIBSVM = BaseLibSVM
#: the type names skops writes for them and for the other fitted internals of the
#: estimators skfedkt trusts by default, with the skops loader each is written with
SKOPS_INTERNAL_TYPES = {
    "sklearn.tree._tree.Tree": "TreeNode",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor": "ObjectNode",
    "sklearn.neighbors._kd_tree.KDTree": "ObjectNode",
    "sklearn.neighbors._ball_tree.BallTree": "ObjectNode",
    "sklearn.metrics._dist_metrics.EuclideanDistance64": "ObjectNode",
    "sklearn.metrics._dist_metrics.ManhattanDistance64": "ObjectNode",
    "sklearn.metrics._dist_metrics.MinkowskiDistance64": "ObjectNode",
    "sklearn.neural_network._stochastic_optimizers.AdamOptimizer": "ObjectNode",
    "sklearn.neural_network._stochastic_optimizers.SGDOptimizer": "ObjectNode",
}
# the private attribute in which a fitted neighbours estimator keeps its tree
NEIGHBORS_TREE = "_tree"


def neighbors_tree(estimator):
    """A fitted neighbours estimator's KDTree or BallTree (None for others): kept in
    the private ``_tree``, built from ``_fit_X``, its training rows (checked on 1.6 to
    1.9; no public attribute holds either)."""
    return getattr(estimator, NEIGHBORS_TREE, None)


def neighbors_rows(estimator):
    """The training rows a fitted neighbours estimator built its tree from (an
    AttributeError where a payload's estimator lacks them, which the checks refuse)."""
    return estimator._fit_X


def libsvm_arrays(model):
    """A fitted support vector machine's arrays as libsvm reads them, indexed by its
    support counts: ``(n_support, dual_coef, intercept)``, its private ``_n_support``,
    ``_dual_coef_`` and ``_intercept_`` (the public ``n_support_``, ``dual_coef_`` and
    ``intercept_`` are views that flip signs for two classes; checked on 1.6 to 1.9).
    None where the model is not fitted."""
    if not hasattr(model, "_n_support"):
        return None
    # a payload's model may lack any of them: None, which the upload checks refuse
    return (model._n_support, getattr(model, "_dual_coef_", None),
            getattr(model, "_intercept_", None))


def constructor_parameters(estimator_class):
    """The names of an estimator class's constructor parameters, as ``get_params``
    reads them: scikit-learn's ``_get_param_names`` (checked on 1.6 to 1.9), which
    needs no instance."""
    return _require(estimator_class, "_get_param_names", "sklearn")()


class MLPClassifierWithGradientTerm(MLPClassifier):
    """An MLPClassifier whose training loss gains a term: after scikit-learn's gradient
    of each minibatch, `added_loss` adds its own to the gradients, in place, and
    returns its loss.

    scikit-learn computes the gradient in the private ``_backprop(X, y, [sample_weight,]
    activations, deltas, coef_grads, intercept_grads)``, which returns ``(loss,
    coef_grads, intercept_grads)``, the arrays its solver steps with (checked on 1.6 to
    1.9); no public hook reaches it.
    """

    def added_loss(self, coef_grads, intercept_grads):
        """The term's loss, its gradient added to `coef_grads` and `intercept_grads`."""
        raise NotImplementedError

    def _backprop(self, *args):
        loss, coef_grads, intercept_grads = _require(
            MLPClassifier, "_backprop", "sklearn")(self, *args)
        return loss + self.added_loss(coef_grads, intercept_grads), coef_grads, intercept_grads


def forget_mlp_optimizer(learner):
    """Make an MLPClassifier's next ``partial_fit`` start a fresh solver (Adam's moments
    and step count, SGD's velocities): its ``partial_fit`` keeps the solver it made
    first in the private ``_optimizer`` and makes one only where that is absent
    (checked on 1.6 to 1.9; ``warm_start`` does not reach ``partial_fit``)."""
    if hasattr(learner, "_optimizer"):
        del learner._optimizer


# torch ------------------------------------------------------------------------------

def pytree():
    """torch's pytree module (``tree_flatten``, ``tree_unflatten``, ``tree_map``): the
    public ``torch.utils.pytree`` where the installed torch has one, else the private
    ``torch.utils._pytree`` it has held since 2.0, which ``torch.func`` itself flattens
    with (torch 2.13 has no public one)."""
    try:
        return importlib.import_module("torch.utils.pytree")
    except ImportError:
        return importlib.import_module("torch.utils._pytree")


def mark_optimizer_stepped(optimizer):
    """Note on a torch optimizer that it stepped, as its own ``step`` notes it for the
    learning-rate schedulers, which warn where a scheduler steps first: the stacked
    path steps every copy's weights itself, never the net's optimizer.

    The schedulers of torch 2.13 read the private ``_opt_called``, which no public call
    sets without stepping; a torch whose schedulers read the optimizer's
    ``_step_count`` instead leaves that as it is: its scheduler warns once, and
    trains the same."""
    optimizer._opt_called = True


# skorch -----------------------------------------------------------------------------

def predict_nonlinearity(net):
    """The function skorch's ``predict_proba`` applies to an initialised `net`'s module
    output: its ``predict_nonlinearity``, with ``"auto"`` resolved as skorch resolves it
    for the net's criterion, which only the private ``_get_predict_nonlinearity`` does
    (checked on skorch 1.0 to 1.4)."""
    return _require(type(net), "_get_predict_nonlinearity", "skorch")(net)


def is_best_score(callback, score):
    """Whether `score` is the best yet by a skorch scoring callback's ``lower_is_better``
    (None where the callback keeps no best): its private ``_is_best_score``, which
    `PassthroughScoring` and `EpochScoring` decide with (checked on skorch 1.0 to 1.4)."""
    return _require(type(callback), "_is_best_score", "skorch")(callback, score)


def record_epoch_score(callback, history, score):
    """What a skorch `EpochScoring` records of an epoch's `score`: the score under its
    name, whether it is the best yet and the best itself, by its private
    ``_record_score``, which its ``on_epoch_end`` calls after scoring (checked on skorch
    1.0 to 1.4)."""
    _require(type(callback), "_record_score", "skorch")(callback, history, score)


def skip_log_header(callback):
    """Note on a skorch `PrintLog` that its first epoch is past, as its ``on_epoch_end``
    notes it after printing the table's header: the attribute ``first_iteration_`` is
    its own, set in its ``initialize`` (checked on skorch 1.0 to 1.4)."""
    if not hasattr(callback, "first_iteration_"):
        _require(callback, "first_iteration_", "skorch")
    callback.first_iteration_ = False


def set_inferred_classes(net, classes):
    """Set the classes a skorch classifier's ``fit`` infers from its targets
    (``classes_inferred_``, which its ``classes_`` returns where the net was given no
    ``classes``): the stacked path runs the net's ``check_data`` on all of its rows,
    and a clone learns the codes its rows hold (checked on skorch 1.0 to 1.4)."""
    # set whether or not the net's check_data set it already (it does only where its
    # targets passed through it): a skorch that reads it no more ignores it
    net.classes_inferred_ = classes


# cloudpickle ------------------------------------------------------------------------

def classes_received_by_value(cloudpickle):
    """The classes the `cloudpickle` module rebuilt in this process from their
    definitions (a class of the caller's ``__main__``): its private
    ``_DYNAMIC_CLASS_TRACKER_BY_CLASS`` lists them (checked on 1.5 to 3.1). Where a
    cloudpickle lacks it: none, so such a class keeps no name in a worker's
    ``__main__`` and skorch's pickling of a module of that class fails there, as it
    would without skfedkt."""
    inner = getattr(cloudpickle, "cloudpickle", cloudpickle)
    return list(getattr(inner, "_DYNAMIC_CLASS_TRACKER_BY_CLASS", {}))

"""What skfedkt relies on of torch's, skorch's, cloudpickle's and scikit-learn's private
insides (``skfedkt/_engine/_compat.py``), one test each on the installed versions, and
that nothing else in the package reaches them."""

import pathlib
import re
import warnings
from numbers import Integral

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.neural_network import MLPClassifier

from skfedkt._engine import _compat

PACKAGE = pathlib.Path(_compat.__file__).parents[1]


def test_versions_are_in_the_tested_range():
    for library in ("sklearn", "cloudpickle"):
        assert _compat.version_of(library) >= _compat.TESTED_FROM[library]


def test_a_missing_private_name_is_named_with_its_library_and_version():
    with pytest.raises(_compat.MissingPrivateAPI, match=r"sklearn's private '_gone'.*sklearn 1"):
        _compat._require(MLPClassifier, "_gone", "sklearn")


def test_num_samples_and_safe_indexing_take_every_kind_of_rows():
    dense = np.arange(12.0).reshape(6, 2)
    for rows in (dense, sp.csr_matrix(dense), dense.tolist()):
        assert _compat.num_samples(rows) == 6
        taken = _compat.safe_indexing(rows, [4, 1])
        assert _compat.num_samples(taken) == 2
        assert np.array_equal(np.asarray(taken.toarray() if sp.issparse(taken) else taken),
                              dense[[4, 1]])


def test_parameter_validation_refuses_with_the_error_it_exports():
    @_compat.validate_params({"n": [_compat.Interval(Integral, 1, None, closed="left")],
                              "kind": [_compat.StrOptions({"a"}),
                                       _compat.HasMethods(["fit"]),
                                       _compat.Options(float, {0.5})]},
                             prefer_skip_nested_validation=True)
    def sized(n, kind):
        return n

    assert sized(2, "a") == 2 and sized(1, 0.5) == 1
    with pytest.raises(_compat.InvalidParameterError, match="'n' parameter"):
        sized(0, "a")


def test_fit_context_validates_the_parameters_once_per_fit():
    from sklearn.base import BaseEstimator

    class Counted(BaseEstimator):
        _parameter_constraints = {"size": [_compat.Interval(Integral, 1, None, closed="left")]}

        def __init__(self, size=1):
            self.size = size

        @_compat.fit_context(prefer_skip_nested_validation=True)
        def fit(self, X=None):
            return self

    Counted().fit()
    with pytest.raises(_compat.InvalidParameterError, match="'size' parameter"):
        Counted(size=0).fit()


def test_constructor_parameters_are_what_get_params_reads():
    assert list(_compat.constructor_parameters(MLPClassifier)) == sorted(
        MLPClassifier().get_params())


def test_native_structures_are_what_fitted_models_hold_and_skops_names():
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    X, y = np.random.RandomState(0).normal(size=(40, 3)), np.arange(40) % 3
    assert isinstance(DecisionTreeClassifier().fit(X, y).tree_, _compat.NATIVE_TREE)
    predictors = HistGradientBoostingClassifier(max_iter=2).fit(X, y)._predictors
    assert isinstance(predictors[0][0], _compat.NATIVE_BOOSTING_PREDICTOR)
    names = {f"{type(value).__module__}.{type(value).__qualname__}"
             for value in (DecisionTreeClassifier().fit(X, y).tree_, predictors[0][0])}
    assert names <= set(_compat.SKOPS_INTERNAL_TYPES)
    svc = SVC().fit(X, y)
    assert isinstance(svc, _compat.NATIVE_LIBSVM)
    n_support, dual_coef, intercept = _compat.libsvm_arrays(svc)
    assert n_support.sum() == len(svc.support_) and dual_coef.shape == (2, len(svc.support_))
    assert intercept.shape == (3,) and _compat.libsvm_arrays(SVC()) is None
    neighbors = KNeighborsClassifier(algorithm="kd_tree").fit(X, y)
    tree = _compat.neighbors_tree(neighbors)
    assert f"{type(tree).__module__}.{type(tree).__qualname__}" in _compat.SKOPS_INTERNAL_TYPES
    assert np.array_equal(_compat.neighbors_rows(neighbors), X)


class _ConstantTerm(_compat.MLPClassifierWithGradientTerm):
    """A term of loss 1 whose gradient shifts every coefficient's by `shift`."""

    shift = 0.0

    def added_loss(self, coef_grads, intercept_grads):
        for grad in coef_grads:
            grad += self.shift
        return 1.0


def test_mlp_gradient_term_extends_backprop_loss_and_gradients():
    X, y = np.random.RandomState(0).normal(size=(20, 3)), np.arange(20) % 2
    options = dict(hidden_layer_sizes=(4,), max_iter=3, batch_size=20, random_state=0,
                   solver="sgd", momentum=0.0, learning_rate_init=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # three iterations do not converge
        plain = MLPClassifier(**options).fit(X, y)
        extended = _ConstantTerm(**options).fit(X, y)
        shifted = _ConstantTerm(**options)
        shifted.shift = 1.0
        shifted.fit(X, y)
    # the term's loss is in every epoch's loss; its zero gradient changes nothing
    assert np.allclose(np.array(extended.loss_curve_) - plain.loss_curve_, 1.0)
    assert all(np.array_equal(a, b) for a, b in zip(plain.coefs_, extended.coefs_))
    # the solver steps with the extended gradients
    assert not np.allclose(plain.coefs_[0], shifted.coefs_[0])


def test_forget_mlp_optimizer_makes_the_next_partial_fit_start_a_fresh_solver():
    X, y = np.random.RandomState(0).normal(size=(10, 3)), np.arange(10) % 2
    learner = MLPClassifier(hidden_layer_sizes=(3,), random_state=0)
    learner.partial_fit(X, y, classes=[0, 1])
    solver = learner._optimizer
    learner.partial_fit(X, y)
    assert learner._optimizer is solver  # what the function undoes
    _compat.forget_mlp_optimizer(learner)
    learner.partial_fit(X, y)
    assert learner._optimizer is not solver and learner._optimizer.t == 1


def test_stacked_module_kinds_cover_torch_private_bases():
    torch = pytest.importorskip("torch")
    from skfedkt._engine._stacking._forward import CONVOLUTIONS, DROPOUTS, POOLINGS

    def subclasses(base):
        found = set(base.__subclasses__())
        for kind in list(found):
            found |= subclasses(kind)
        return found

    modules = torch.nn.modules
    for bases, public in (
            ((modules.conv._ConvNd,), CONVOLUTIONS),
            ((modules.dropout._DropoutNd,), DROPOUTS),
            ((modules.pooling._MaxPoolNd, modules.pooling._AvgPoolNd,
              modules.pooling._AdaptiveAvgPoolNd, modules.pooling._AdaptiveMaxPoolNd),
             POOLINGS)):
        # torch's public layers (its private intermediate bases aside)
        torch_kinds = {kind for base in bases for kind in subclasses(base)
                       if kind.__module__.startswith("torch.") and kind.__name__[0] != "_"}
        assert torch_kinds and all(issubclass(kind, public) for kind in torch_kinds)


def test_pytree_flattens_and_rebuilds_what_the_stacked_forward_pass_calls_with():
    torch = pytest.importorskip("torch")
    pytree = _compat.pytree()

    class Leaf:
        pass

    leaf, tensor = Leaf(), torch.ones(2)
    leaves, spec = pytree.tree_flatten(((leaf, None, [3, {"a": tensor}]), {"dim": 1}))
    assert any(one is leaf for one in leaves) and any(one is tensor for one in leaves)
    (args, kwargs) = pytree.tree_unflatten(leaves, spec)
    assert args[0] is leaf and args[2][1]["a"] is tensor and kwargs == {"dim": 1}
    mapped = pytree.tree_map(lambda value: ("seen", value), torch.ones(3, 2).max(dim=1))
    assert type(mapped).__name__ == "max" and mapped.values[0] == "seen"


def test_mark_optimizer_stepped_is_what_a_scheduler_reads():
    torch = pytest.importorskip("torch")

    def scheduler_warnings(mark):
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
        if mark:
            _compat.mark_optimizer_stepped(optimizer)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scheduler.step()
        return [str(w.message) for w in caught if "optimizer.step()" in str(w.message)]

    assert scheduler_warnings(mark=False)
    assert not scheduler_warnings(mark=True)


def _skorch_net(**options):
    pytest.importorskip("skorch")
    import torch
    from skorch import NeuralNetClassifier

    torch.manual_seed(0)
    return NeuralNetClassifier(torch.nn.Linear, module__in_features=3, module__out_features=2,
                               criterion=torch.nn.CrossEntropyLoss, **options).initialize()


def test_predict_nonlinearity_is_what_predict_proba_applies():
    pytest.importorskip("skorch")
    import torch

    net = _skorch_net()
    X = np.random.RandomState(0).normal(size=(4, 3)).astype(np.float32)
    output = net.module_(torch.as_tensor(X)).detach()
    proba = _compat.predict_nonlinearity(net)(output).numpy()
    assert np.allclose(proba, net.predict_proba(X))


def test_scoring_callbacks_decide_and_record_the_best_score():
    pytest.importorskip("skorch")
    from skorch.callbacks import EpochScoring, PassthroughScoring

    net = _skorch_net()
    callbacks = dict(net.callbacks_)
    passthrough, accuracy = callbacks["valid_loss"], callbacks["valid_acc"]
    assert type(passthrough) is PassthroughScoring and type(accuracy) is EpochScoring
    assert _compat.is_best_score(passthrough, 1.0) is True
    passthrough.best_score_ = 0.5
    assert _compat.is_best_score(passthrough, 1.0) is False
    net.history.new_epoch()
    _compat.record_epoch_score(accuracy, net.history, 0.75)
    assert net.history[-1, "valid_acc"] == 0.75 and net.history[-1, "valid_acc_best"]
    assert accuracy.best_score_ == 0.75


def test_skip_log_header_leaves_the_header_out():
    pytest.importorskip("skorch")
    from skorch.callbacks import PrintLog

    def printed(skip):
        lines = []
        net = _skorch_net(callbacks=[("log", PrintLog(sink=lines.append))])
        net.history.new_epoch()
        net.history.record("epoch", 1)
        log = dict(net.callbacks_)["log"]
        if skip:
            _compat.skip_log_header(log)
        log.on_epoch_end(net)
        return lines

    assert len(printed(skip=False)) == 3  # the header, its rule, the epoch's row
    assert len(printed(skip=True)) == 1


def test_set_inferred_classes_is_what_classes_returns():
    pytest.importorskip("skorch")
    net = _skorch_net()
    net.check_data(np.zeros((4, 3), dtype=np.float32), np.array([0, 1, 1, 0]))
    assert list(net.classes_) == [0, 1]
    _compat.set_inferred_classes(net, np.array([0, 1, 2]))
    assert list(net.classes_) == [0, 1, 2]
    fresh = _skorch_net()  # before its check_data has run (the stacked path's nets)
    _compat.set_inferred_classes(fresh, np.array([0, 1]))
    assert list(fresh.classes_) == [0, 1]


def test_classes_received_by_value_lists_a_class_pickled_by_value():
    try:
        from joblib.externals import cloudpickle
    except ImportError:
        import cloudpickle

    def made_here():
        class Local:
            pass

        return Local

    local = made_here()
    cloudpickle.dumps(local)
    assert local in _compat.classes_received_by_value(cloudpickle)


# the private names of torch, skorch, cloudpickle and scikit-learn the package uses:
# in _compat.py alone
_PRIVATE_NAMES = ("_ConvNd", "_DropoutNd", "_MaxPoolNd", "_AvgPoolNd", "_AdaptiveAvgPoolNd",
                  "_AdaptiveMaxPoolNd", "_pytree", "_opt_called", "_get_predict_nonlinearity",
                  "_is_best_score", "_record_score", "first_iteration_", "classes_inferred_",
                  "_DYNAMIC_CLASS_TRACKER_BY_CLASS", "_backprop", "_get_param_names",
                  "_fit_X", "_n_support", "_dual_coef_", "_intercept_", "_fit_context",
                  "_safe_indexing", "_num_samples")
# attribute access to an object's private state: an MLP's solver, an optimizer's state
_PRIVATE_STATE = re.compile(r"\w\._optimizer\b|optimizer_?\.state\[")
# a private module or name of those libraries, reached by attribute or imported
_PRIVATE_USE = re.compile(r"\b(torch|skorch|sklearn|cloudpickle)(\.\w+)*\._(?!_)\w"
                          r"|from (torch|skorch|sklearn|cloudpickle)\S* import .*\b_[a-z]")


def _lines(root):
    for path in sorted(root.rglob("*.py")):
        if path.name != "_compat.py":
            for number, line in enumerate(path.read_text().splitlines(), 1):
                yield f"{path.relative_to(PACKAGE.parent)}:{number}", line


def test_no_private_touch_outside_compat():
    named = [f"{where}: {line.strip()}" for where, line in _lines(PACKAGE)
             if any(name in line for name in _PRIVATE_NAMES)
             or _PRIVATE_STATE.search(line)]
    assert named == []
    private_modules = [f"{where}: {line.strip()}" for where, line in _lines(PACKAGE)
                       if _PRIVATE_USE.search(line)]
    assert private_modules == []

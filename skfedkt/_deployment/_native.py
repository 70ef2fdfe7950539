"""Checks of the native structures a loaded payload holds, before any of them runs.

scikit-learn's trees, histogram-gradient-boosting predictors and neighbour trees, and
XGBoost's boosters, are walked by compiled code that trusts their arrays: a node that
points outside the tree, or back to itself, crashes or hangs the process that predicts.
Support vector machines are indexed by their support counts the same way. skops
rebuilds them from the file as they are, so the coordinator checks them here,
completely, before the first prediction: children in range and acyclic, features below
the model's feature count, finite thresholds and values, consistent shapes.
"""

import numpy as np
from sklearn.neighbors import BallTree, KDTree

from .._engine._compat import (
    NATIVE_BOOSTING_PREDICTOR,
    NATIVE_LIBSVM,
    NATIVE_TREE,
    NEIGHBORS_TREE,
    libsvm_arrays,
    neighbors_rows,
    neighbors_tree,
)
from ._archive import UploadError


def _refuse(who, where, reason):
    raise UploadError(f"{who}: {where}: {reason}; refused before it runs.", field=where)


def _check_children(left, right, is_leaf, n_nodes, who, where):
    """Internal nodes point to two later nodes (so every path ends), leaves to none."""
    nodes = np.arange(n_nodes)
    internal = ~is_leaf
    bad = internal & ~((left > nodes) & (left < n_nodes) & (right > nodes) & (right < n_nodes))
    if bad.any():
        node = int(np.flatnonzero(bad)[0])
        _refuse(who, where, f"node {node} points to children {int(left[node])}, "
                f"{int(right[node])} outside the nodes after it (of {n_nodes})")


def _check_features(features, n_features, who, where):
    bad = (features < 0) | (features >= n_features)
    if bad.any():
        _refuse(who, where, f"a split uses feature {int(features[bad][0])}, the model has "
                f"{n_features}")


def _check_finite(values, what, who, where):
    if values.size and not np.isfinite(values).all():
        _refuse(who, where, f"{what} holds NaN or infinite values")


def check_tree(tree, n_features, who, where):
    """A scikit-learn decision tree's node arrays (``tree_``)."""
    state = tree.__getstate__()
    nodes, values = state["nodes"], np.asarray(state["values"])
    n_nodes = int(state["node_count"])
    if n_nodes < 1 or len(nodes) != n_nodes or len(values) != n_nodes:
        _refuse(who, where, f"node_count {n_nodes} does not match its {len(nodes)} nodes and "
                f"{len(values)} values")
    if tree.n_features != n_features:
        _refuse(who, where, f"the tree has {tree.n_features} features, its model "
                f"{n_features}")
    if values.ndim != 3 or values.shape[1:] != (tree.n_outputs, int(np.max(tree.n_classes))):
        _refuse(who, where, f"values of shape {values.shape} do not match the tree's outputs")
    left, right = nodes["left_child"], nodes["right_child"]
    is_leaf = (left == -1) & (right == -1)
    _check_children(left, right, is_leaf, n_nodes, who, where)
    _check_features(nodes["feature"][~is_leaf], n_features, who, where)
    _check_finite(nodes["threshold"][~is_leaf], "a threshold", who, where)
    _check_finite(values, "a leaf value", who, where)


def check_predictor(predictor, n_features, who, where):
    """A histogram gradient boosting tree (``TreePredictor``)."""
    nodes = predictor.nodes
    n_nodes = len(nodes)
    if n_nodes < 1:
        _refuse(who, where, "the predictor has no nodes")
    is_leaf = nodes["is_leaf"].astype(bool)
    _check_children(nodes["left"].astype(np.int64), nodes["right"].astype(np.int64), is_leaf,
                    n_nodes, who, where)
    features = nodes["feature_idx"][~is_leaf].astype(np.int64)
    _check_features(features, n_features, who, where)
    _check_finite(nodes["num_threshold"][~is_leaf], "a threshold", who, where)
    _check_finite(nodes["value"], "a leaf value", who, where)
    categorical = ~is_leaf & nodes["is_categorical"].astype(bool)
    if categorical.any():
        bitsets = np.asarray(predictor.raw_left_cat_bitsets)
        if (nodes["bitset_idx"][categorical] >= len(bitsets)).any():
            _refuse(who, where, "a categorical split points outside its bitsets")


def check_neighbor_tree(estimator, who, where):
    """A neighbour tree must be the one its estimator's rows build: rebuilt and compared."""
    loaded = neighbors_tree(estimator)
    try:
        rebuilt = type(loaded)(neighbors_rows(estimator), leaf_size=estimator.leaf_size,
                               metric=estimator.effective_metric_,
                               **(estimator.effective_metric_params_ or {}))
    except (AttributeError, TypeError, ValueError) as exc:
        _refuse(who, where, f"its neighbour tree cannot be rebuilt from its rows ({exc})")
    for ours, theirs in zip(rebuilt.__getstate__(), loaded.__getstate__()):
        if isinstance(ours, np.ndarray):
            same = (isinstance(theirs, np.ndarray) and ours.shape == theirs.shape
                    and np.array_equal(ours, theirs, equal_nan=ours.dtype.kind == "f"))
        elif isinstance(ours, (int, float, np.number)):
            same = ours == theirs
        else:
            same = type(ours) is type(theirs)
        if not same:
            _refuse(who, where, "its neighbour tree is not the one its rows build")


def check_booster(booster, n_features, who, where):
    """An XGBoost booster, read back as JSON from XGBoost itself."""
    import json

    model = json.loads(booster.save_raw("json"))
    learner = model["learner"]
    n_booster_features = int(learner["learner_model_param"]["num_feature"])
    if n_features is not None and n_booster_features != n_features:
        _refuse(who, where, f"the booster has {n_booster_features} features, its model "
                f"{n_features}")
    for index, tree in enumerate(learner["gradient_booster"]["model"].get("trees", [])):
        left = np.asarray(tree["left_children"], dtype=np.int64)
        right = np.asarray(tree["right_children"], dtype=np.int64)
        n_nodes = len(left)
        is_leaf = left == -1
        if len(right) != n_nodes or (right[is_leaf] != -1).any():
            _refuse(who, f"{where}.trees[{index}]", "its child arrays do not match")
        _check_acyclic(left, right, is_leaf, who, f"{where}.trees[{index}]")
        _check_features(np.asarray(tree["split_indices"], dtype=np.int64)[~is_leaf],
                        n_booster_features, who, f"{where}.trees[{index}]")
        _check_finite(np.asarray(tree["split_conditions"], dtype=float), "a threshold", who,
                      f"{where}.trees[{index}]")
        _check_finite(np.asarray(tree["base_weights"], dtype=float), "a leaf value", who,
                      f"{where}.trees[{index}]")


def check_libsvm(model, arrays, who, where):
    """A support vector machine's arrays (`libsvm_arrays`), which libsvm indexes by its
    support counts."""
    n_support, dual_coef, intercept = (np.asarray(array) for array in arrays)
    vectors = model.support_vectors_
    n_vectors = vectors.shape[0]
    n_classes = len(n_support)
    if (n_support.ndim != 1 or (n_support < 0).any() or n_support.sum() != n_vectors
            or len(model.support_) != n_vectors):
        _refuse(who, where, f"support counts {n_support.tolist()} do not match its "
                f"{n_vectors} support vectors")
    dual = dual_coef
    n_pairs = n_classes * (n_classes - 1) // 2
    if (n_classes > 1 and dual.shape != (n_classes - 1, n_vectors)) or (
            n_classes > 1 and intercept.shape != (n_pairs,)):
        _refuse(who, where, "its dual coefficients or intercepts do not match its classes")
    for name, array in (("dual coefficients", dual_coef), ("intercepts", intercept)):
        _check_finite(np.asarray(array, dtype=float), name, who, where)
    if not hasattr(vectors, "toarray"):
        _check_finite(np.asarray(vectors, dtype=float), "a support vector", who, where)


def _check_acyclic(left, right, is_leaf, who, where):
    """Every node reachable from the root once, children in range (XGBoost may reuse
    the ids of pruned nodes, so children need not come after their parent)."""
    n_nodes = len(left)
    seen = np.zeros(n_nodes, dtype=bool)
    stack = [0] if n_nodes else []
    while stack:
        node = stack.pop()
        if not 0 <= node < n_nodes or seen[node]:
            _refuse(who, where, f"node {node} is out of range or reached twice")
        seen[node] = True
        if not is_leaf[node]:
            stack.extend((int(left[node]), int(right[node])))


def check_native_structures(value, who, where="payload"):
    """Check every native structure reachable from `value` (payload dicts, lists,
    estimators and their fitted attributes)."""
    boosters: tuple[type, ...]
    try:
        from xgboost import Booster
        boosters = (Booster,)
    except ImportError:  # without XGBoost, skops cannot have built a booster
        boosters = ()
    seen = set()
    stack = [(value, where, None)]
    while stack:
        value, path, n_features = stack.pop()
        if id(value) in seen or value is None or isinstance(value, (str, bytes, int, float)):
            continue
        seen.add(id(value))
        if isinstance(value, NATIVE_TREE):
            check_tree(value, n_features, who, path)
        elif isinstance(value, NATIVE_BOOSTING_PREDICTOR):
            check_predictor(value, n_features, who, path)
        elif isinstance(value, (KDTree, BallTree)):
            _refuse(who, path, "a neighbour tree outside a neighbours estimator")
        elif isinstance(value, boosters):
            check_booster(value, n_features, who, path)
        elif isinstance(value, dict):
            stack.extend((item, f"{path}[{key!r}]", n_features) for key, item in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((item, f"{path}[{i}]", n_features) for i, item in enumerate(value))
        elif isinstance(value, np.ndarray) and value.dtype == object:
            stack.extend((item, f"{path}[{i}]", n_features)
                         for i, item in enumerate(value.ravel()))
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            arrays = libsvm_arrays(value) if isinstance(value, NATIVE_LIBSVM) else None
            if arrays is not None:
                check_libsvm(value, arrays, who, path)
            if isinstance(neighbors_tree(value), (KDTree, BallTree)):
                check_neighbor_tree(value, who, path)
                attributes = {k: v for k, v in vars(value).items() if k != NEIGHBORS_TREE}
            else:
                attributes = vars(value)
            features = getattr(value, "n_features_in_", n_features)
            stack.extend((item, f"{path}.{name}", features)
                         for name, item in attributes.items())

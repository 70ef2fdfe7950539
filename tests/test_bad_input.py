"""What bad input meets: an error that names the argument, before any fit."""

import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _data import noise_at
from sklearn import config_context
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestRegressor
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.naive_bayes import GaussianNB
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils._param_validation import InvalidParameterError

from skfedkt import (
    FedAvgClassifier,
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
    PublicSet,
)
from skfedkt.datasets import dirichlet_partition
from skfedkt.privacy import BitFlips, bit_flip_probability, laplace_epsilon

ESTIMATORS = [FedKTClassifier, FedCTClassifier, OneShotEnsembleClassifier]


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(n_samples=120, n_features=4, random_state=0)
    return X[:80], y[:80], X[80:]


class NeverFit(DecisionTreeClassifier):
    """Fails the test if any model is trained."""

    def fit(self, X, y, **params):
        raise AssertionError("a model was fit before the input was checked")


@pytest.mark.parametrize("make", ESTIMATORS)
@pytest.mark.parametrize(
    "groups, error, message",
    [
        (np.r_[np.zeros(40), np.full(40, np.nan)], ValueError,
         r"groups is missing the party of 40 row\(s\) \(None or NaN\), e.g. row 40"),
        (np.array([None] + [1] * 79, dtype=object), ValueError,
         r"groups is missing the party of 1 row\(s\).*row 0"),
        (np.array([1] * 40 + ["b"] * 40, dtype=object), TypeError,
         r"groups mixes party labels of types \['int', 'str'\]"),
    ],
    ids=["nan", "none", "int-and-str"],
)
def test_bad_groups_name_groups_before_any_fit(data, make, groups, error, message):
    X, y, X_public = data
    with pytest.raises(error, match=message):
        make(NeverFit()).fit(X, y, groups=groups, X_unlabeled=X_public)


@pytest.mark.parametrize("make", ESTIMATORS)
def test_sparse_public_data_for_a_dense_only_base_names_x_unlabeled(data, make):
    X, y, X_public = data
    with pytest.raises(TypeError, match="Invalid X_unlabeled: Sparse data"):
        make(GaussianNB()).fit(X, y, groups=np.arange(80) % 2,
                               X_unlabeled=sp.csr_matrix(X_public))


@pytest.mark.parametrize("make", ESTIMATORS)
@pytest.mark.parametrize("public_kind", ["array", "frame-with-int-columns"])
def test_public_data_without_the_training_names_warns_once_and_matches_by_position(
        data, make, public_kind):
    pd = pytest.importorskip("pandas")
    X, y, X_public = data
    X = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    if public_kind != "array":
        X_public = pd.DataFrame(X_public)  # columns 0..3: not the training names
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = make(DecisionTreeClassifier(max_depth=3), random_state=0).fit(
            X, y, groups=np.arange(80) % 2, X_unlabeled=X_public
        )
        predicted = model.predict(X.to_numpy())
    # sklearn's warning from this estimator, at fit and predict; none from its clones
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2, messages
    assert all(type(model).__name__ in m for m in messages)
    np.testing.assert_array_equal(predicted, model.predict(X))


@pytest.mark.parametrize(
    "estimator", [["tree"] * 2, {0: "tree", 1: DecisionTreeClassifier()},
                  [DecisionTreeClassifier(), 3]],
    ids=["strings", "dict-of-strings", "one-bad-entry"],
)
def test_fedct_estimator_entries_must_be_estimators(data, estimator):
    X, y, X_public = data
    clf = FedCTClassifier(estimator)
    clf.__sklearn_tags__()  # tags no longer fail on them
    with pytest.raises(InvalidParameterError, match="'estimator' parameter.*must hold "
                                                    "estimators"):
        clf.fit(X, y, groups=np.arange(80) % 2, X_unlabeled=X_public)


def test_unknown_scorer_is_refused_before_any_fit(data):
    X, y, _ = data
    clf = OneShotEnsembleClassifier(NeverFit(), selection="cv", scoring="no_such_scorer")
    with pytest.raises(ValueError, match="Invalid scoring='no_such_scorer'"):
        clf.fit(X, y, groups=np.arange(80) % 2)


@pytest.mark.parametrize("level", ["L1", "L2"])
def test_any_gamma_gives_an_epsilon_quickly_and_quietly(data, level):
    X, y, X_public = data
    for gamma in (100.0, 1e6):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            clf = FedKTClassifier(privacy=noise_at(level, gamma=gamma), random_state=0).fit(
                X, y, groups=np.arange(80) % 2, X_unlabeled=X_public
            )
        assert clf.epsilon_ > 0
        assert time.perf_counter() - start < 30  # was a MemoryError after minutes


def test_laplace_epsilon_is_pure_composition_when_noise_is_negligible():
    assert laplace_epsilon(50, gamma=1e6, delta=1e-5) == pytest.approx(50 * 2e6)
    # just below the switch the PLD accountant still answers, close to pure composition
    assert laplace_epsilon(50, gamma=24.0, delta=1e-5) == pytest.approx(50 * 48, rel=0.01)


def test_bit_flips_with_a_huge_epsilon_raise_no_overflow():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bit_flip_probability(1e6, 2) == 0.0
        X, y = make_classification(n_samples=60, random_state=0)
        FedCTClassifier(privacy=BitFlips(1e6), n_rounds=1, random_state=0).fit(
            X[:40], y[:40], groups=np.arange(40) % 2, X_unlabeled=X[40:]
        )


@pytest.mark.parametrize("beta", [1e-7, 1e-3])
def test_tiny_beta_gives_each_class_to_one_party(beta):
    y = np.repeat(np.arange(5), 40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parties = dirichlet_partition(y, 10, beta=beta, min_party_size=0, random_state=0)
    # no NaN proportions piling every row into one party: each class lands whole
    assert all(np.unique(parties[y == label]).size == 1 for label in range(5))
    assert np.unique(parties).size > 1


@pytest.mark.parametrize("make", ESTIMATORS)
def test_search_with_routing_off_warns_that_groups_never_reach_fit(data, make):
    X, y, X_public = data
    party = np.arange(80) % 4
    search = GridSearchCV(make(DecisionTreeClassifier(max_depth=2)),
                          {"estimator__max_depth": [2]}, cv=GroupKFold(n_splits=2))
    with pytest.warns(UserWarning, match="with metadata routing off.*turn routing on"):
        search.fit(X, y, groups=party)
    # with routing on the groups (and the public set) arrive: nothing is assumed
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with config_context(enable_metadata_routing=True):
            search.fit(X, y, groups=party, X_unlabeled=PublicSet(X_public))


@pytest.mark.parametrize("make", [
    lambda: OneShotEnsembleClassifier(random_state=0),
    lambda: FedCTClassifier(n_rounds=2, random_state=0),
], ids=["oneshot", "fedct"])
def test_single_class_predictions_warn_for_every_estimator(make):
    from skfedkt import LabelCollapseWarning

    # every public example lies deep in class 1's region: every model says 1 there
    rng = np.random.RandomState(0)
    X = np.r_[rng.normal(-2, 1, size=(60, 2)), rng.normal(2, 1, size=(60, 2))]
    y = np.repeat([0, 1], 60)
    X_public = rng.normal(2, 0.1, size=(20, 2)) + [3, 0]
    with pytest.warns(LabelCollapseWarning, match="a single class, 1, although the "
                                                  "training rows hold 2 classes"):
        make().fit(X, y, groups=np.arange(120) % 3, X_unlabeled=X_public)


@pytest.mark.parametrize("selection, names_selection", [("all", False), ("cv", True)])
def test_an_ensemble_that_under_predicts_a_class_warns_with_the_shares(selection,
                                                                       names_selection):
    """The plain average under-predicts class 1; the 4 best held-out scores (cv) belong
    to parties that predict one class together."""
    from skfedkt import LabelCollapseWarning

    # most of 8 skewed parties hold few rows of class 1 (30% of the rows): their
    # average predicts it for 3% of the public rows
    X, y = make_classification(n_samples=600, n_features=4, weights=[0.7], flip_y=0.05,
                               class_sep=0.5, random_state=0)
    groups = dirichlet_partition(y[200:], 8, beta=0.3, min_party_size=5, random_state=1)
    with pytest.warns(LabelCollapseWarning) as caught:
        OneShotEnsembleClassifier(DecisionTreeClassifier(max_depth=3), selection=selection,
                                  n_selected=4, random_state=0).fit(
            X[200:], y[200:], groups=groups, X_unlabeled=X[:200])
    # (a party of fewer than 10 rows warns apart, with an AssumptionWarning)
    (message,) = [str(w.message) for w in caught
                  if issubclass(w.category, LabelCollapseWarning)]
    if selection == "all":
        assert "classes far from their shares in the training rows (class 1: 30% of " \
            "the training rows, 3% of the predictions)" in message
    assert "FedKTClassifier corrects" in message
    assert ("selection='cv' keeps" in message) == names_selection


def test_an_ensemble_that_over_predicts_a_minority_class_warns():
    from skfedkt import LabelCollapseWarning

    # two of three parties hold mostly class 1 (25% of all rows) and their models
    # outvote the third's on most public rows
    rng = np.random.RandomState(0)
    y = np.r_[np.zeros(300, dtype=int), np.ones(100, dtype=int)]
    X = rng.normal(y[:, None] * 0.5, 1.0, size=(400, 2))
    groups = np.r_[np.zeros(280), np.full(10, 1), np.full(10, 2), np.full(50, 1),
                   np.full(50, 2)]
    X_public = rng.normal(0.1, 1.0, size=(200, 2))
    with pytest.warns(LabelCollapseWarning, match=r"classes far from their shares in the "
                      r"training rows \(class 0: 75% of the training rows, \d+% of the "
                      r"predictions, class 1: 25% of the training rows, [5-9]\d% of"):
        OneShotEnsembleClassifier(DecisionTreeClassifier(max_depth=2), random_state=0).fit(
            X, y, groups=groups, X_unlabeled=X_public)


@pytest.mark.parametrize("make", [*ESTIMATORS, FedAvgClassifier])
def test_a_regressor_as_the_parties_model_is_refused_before_any_fit(data, make):
    X, y, X_public = data
    with pytest.raises(ValueError, match="RandomForestRegressor should be a classifier"):
        make(RandomForestRegressor()).fit(X, y, groups=np.arange(80) % 2,
                                          X_unlabeled=X_public)
    with pytest.raises(ValueError, match="should be a classifier"):
        make(RandomForestRegressor()).fit_party(X, y, party=0, classes=[0, 1],
                                                X_unlabeled=X_public)


@pytest.mark.parametrize("make", [*ESTIMATORS, FedAvgClassifier])
def test_a_single_class_is_refused_as_scikit_learn_refuses_it(data, make):
    X, _, X_public = data
    with pytest.raises(ValueError, match=r"y holds one class only \('a'\)"):
        make().fit(X, np.full(80, "a"), groups=np.arange(80) % 2, X_unlabeled=X_public)


def test_missing_values_are_refused_naming_the_base_estimator_that_refuses_them():
    X, y = make_classification(n_samples=60, random_state=0)
    X[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"FedKTClassifier's base estimator "
                       r"\(LogisticRegression\) does not accept missing values"):
        FedKTClassifier(LogisticRegression()).fit(X, y, groups=np.arange(60) % 2,
                                                  X_unlabeled=X[:10])
    with pytest.raises(ValueError, match=r"(?s)Invalid X_unlabeled: .*"
                       r"OneShotEnsembleClassifier's base estimator \(LogisticRegression\) "
                       r"does not accept"):
        OneShotEnsembleClassifier(LogisticRegression()).fit(
            X[4:], y[4:], groups=np.arange(56) % 2, X_unlabeled=X[:10])

"""FedKTClassifier behaviour: labels, parallelism, scikit-learn workflows and errors."""

import pickle
import zipfile

import numpy as np
import pandas as pd
import pytest
import skops.io
from _data import federated_digits
from joblib import parallel_config
from numpy.testing import assert_allclose, assert_array_equal
from sklearn import config_context
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import (
    GridSearchCV,
    GroupKFold,
    cross_validate,
    train_test_split,
)
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils._param_validation import InvalidParameterError
from xgboost import XGBClassifier

from skfedkt import (
    AssumptionWarning,
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
    PublicSet,
    SoftVotes,
)
from skfedkt._deployment._channel import without_sums
from skfedkt.datasets import dirichlet_partition

# these tests pin the API on small data whose federated labels collapse; the collapse
# warnings themselves are tested in test_fedkt_skew.py
pytestmark = pytest.mark.filterwarnings("ignore::skfedkt.LabelCollapseWarning")


@pytest.fixture(scope="module")
def federated_data():
    X, y = make_classification(
        n_samples=400, n_features=8, n_informative=5, n_classes=3, random_state=0
    )
    X_train, X_public, y_train, _ = train_test_split(X, y, test_size=100, random_state=0)
    party = dirichlet_partition(y_train, n_parties=4, beta=0.5, random_state=0)
    return X_train, y_train, party, X_public


def _times_1000(X):
    return X * 1000.0


class RecordingTree(DecisionTreeClassifier):
    """A decision tree that remembers the largest absolute value it was fit on."""

    def fit(self, X, y, **fit_params):
        self.fit_max_ = np.abs(np.asarray(X)).max()
        return super().fit(X, y, **fit_params)


@pytest.mark.parametrize(
    "labels",
    [
        np.array(["cat", "dog", "emu"]),
        np.array([3, 7, 11]),
        np.array([-1.0, 0.0, 25.0]),
    ],
    ids=["str", "sparse-int", "float"],
)
@pytest.mark.parametrize(
    "estimator", [DecisionTreeClassifier(), XGBClassifier(n_estimators=5)], ids=["tree", "xgb"]
)
def test_any_label_type_with_parties_missing_classes(federated_data, labels, estimator):
    X, y, party, X_public = federated_data
    # party 0 never sees the last class: its XGBoost teachers get codes 0..1 only
    y = np.where((party == 0) & (y == 2), 0, y)
    clf = FedKTClassifier(estimator, random_state=0).fit(
        X, labels[y], groups=party, X_unlabeled=X_public
    )
    assert_array_equal(clf.classes_, np.sort(labels))
    assert set(clf.predict(X)) <= set(labels)
    proba = clf.predict_proba(X)
    assert proba.shape == (len(X), 3)
    assert_allclose(proba.sum(axis=1), 1)
    assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X))


def test_boolean_labels(federated_data):
    X, y, _, X_public = federated_data
    # IID parties: with the skewed fixture, the two parties that never saw class 1
    # out-vote it everywhere
    clf = FedKTClassifier(LogisticRegression(), random_state=0)
    clf.fit(X, y == 1, groups=np.arange(len(y)) % 4, X_unlabeled=X_public)
    assert clf.classes_.dtype == bool
    assert clf.predict(X).dtype == bool
    assert set(clf.predict(X)) == {False, True}


def test_decision_function_matches_predict_and_flags_unseen_classes():
    X = np.random.RandomState(0).normal(size=(60, 3))
    y = np.repeat(["x", "y", "z"], 20)
    # party 1 holds only 'z' and votes for it on every example, so at least one of the
    # three classes never wins a vote and the final model never learns it (matching the
    # training's class shares would give every class labels)
    party = np.repeat([0, 0, 1], 20)
    clf = FedKTClassifier(LogisticRegression(), n_teachers=2, voting=SoftVotes(match_shares=False),
                          random_state=0)
    clf.fit(X, y, groups=party, X_unlabeled=X)
    scores = clf.decision_function(X)
    assert scores.shape == (60, 3)
    assert_array_equal(clf.classes_[scores.argmax(axis=1)], clf.predict(X))
    never_learned = ~np.isin(clf.classes_, clf.public_labels_)
    assert never_learned.any()
    assert np.isneginf(scores[:, never_learned]).all()


def test_predict_proba_hidden_when_final_estimator_lacks_it(federated_data):
    from sklearn.svm import LinearSVC

    X, y, party, X_public = federated_data
    clf = FedKTClassifier(final_estimator=LinearSVC())
    assert not hasattr(clf, "predict_proba")
    assert hasattr(clf, "decision_function")
    assert hasattr(FedKTClassifier(), "predict_proba")
    assert not hasattr(FedKTClassifier(), "decision_function")


@pytest.mark.parametrize(
    "estimator",
    [RandomForestClassifier(n_estimators=10, n_jobs=-1), XGBClassifier(n_estimators=10)],
    ids=["rf", "xgb"],
)
def test_results_identical_for_any_n_jobs_and_backend(federated_data, estimator):
    X, y, party, X_public = federated_data
    fitted = []
    for n_jobs, backend in [(1, "loky"), (2, "loky"), (-1, "loky"), (2, "threading")]:
        with parallel_config(backend=backend):
            clf = FedKTClassifier(estimator, n_jobs=n_jobs, random_state=0)
            fitted.append(clf.fit(X, y, groups=party, X_unlabeled=X_public))
    for clf in fitted[1:]:
        assert_array_equal(clf.vote_counts_, fitted[0].vote_counts_)
        assert_array_equal(clf.predict_proba(X), fitted[0].predict_proba(X))


def test_random_state_drives_partitions(federated_data):
    X, y, party, X_public = federated_data
    fit = lambda seed: FedKTClassifier(random_state=seed).fit(  # noqa: E731
        X, y, groups=party, X_unlabeled=X_public
    )
    assert_array_equal(fit(0).vote_counts_, fit(0).vote_counts_)
    assert not np.array_equal(fit(0).vote_counts_, fit(1).vote_counts_)


def test_clones_run_single_threaded_only_when_fitted_in_parallel(federated_data):
    X, y, party, X_public = federated_data
    forest = RandomForestClassifier(n_estimators=5, n_jobs=-1)
    serial = FedKTClassifier(forest, n_jobs=1, random_state=0).fit(
        X, y, groups=party, X_unlabeled=X_public
    )
    assert serial.final_estimator_.n_jobs == -1
    parallel = FedKTClassifier(forest, n_jobs=2, random_state=0).fit(
        X, y, groups=party, X_unlabeled=X_public
    )
    forests = [s for students in parallel.students_ for s in students
               if isinstance(s, RandomForestClassifier)]
    assert forests and all(s.n_jobs == 1 for s in forests)
    # the user's estimator is never modified
    assert forest.n_jobs == -1


def test_every_clone_gets_its_own_seed(federated_data):
    X, y, party, X_public = federated_data
    clf = FedKTClassifier(RandomForestClassifier(n_estimators=3), random_state=0).fit(
        X, y, groups=party, X_unlabeled=X_public
    )
    # students whose labels held one class are constant DummyClassifiers: skip them
    seeds = [s.random_state for students in clf.students_ for s in students
             if isinstance(s, RandomForestClassifier)]
    assert len(seeds) > 2 and len(set(seeds)) == len(seeds)
    assert all(isinstance(seed, (int, np.integer)) for seed in seeds)


def test_pickle_round_trip(federated_data):
    X, y, party, X_public = federated_data
    clf = FedKTClassifier(XGBClassifier(n_estimators=5), random_state=0).fit(
        X, y, groups=party, X_unlabeled=PublicSet(X_public)
    )
    restored = pickle.loads(pickle.dumps(clf))
    assert_array_equal(restored.predict_proba(X), clf.predict_proba(X))
    public = pickle.loads(pickle.dumps(PublicSet(X_public)))
    assert isinstance(public, PublicSet)
    assert_array_equal(public.data, X_public)


def test_no_public_data_uses_training_rows(federated_data):
    X, y, party, _ = federated_data
    with pytest.warns(AssumptionWarning, match="X_unlabeled=None, so the training rows"):
        clf = FedKTClassifier(random_state=0).fit(X, y, groups=party)
    assert clf.vote_counts_.shape == (len(X), 3)


def test_no_groups_is_one_party(federated_data):
    X, y, _, X_public = federated_data
    with pytest.warns(AssumptionWarning, match="groups=None, so every row is one party's"):
        clf = FedKTClassifier(random_state=0).fit(X, y, X_unlabeled=X_public)
    assert_array_equal(clf.parties_, [0])
    assert len(clf.students_) == 1


# --- scikit-learn workflows ------------------------------------------------------------


def test_cross_validate_routes_groups_to_splitter_and_estimator(federated_data):
    X, y, party, X_public = federated_data
    with config_context(enable_metadata_routing=True):
        result = cross_validate(
            FedKTClassifier(random_state=0), X, y, cv=GroupKFold(2), return_estimator=True,
            return_indices=True, params={"groups": party, "X_unlabeled": X_public},
        )
    for estimator, test_rows in zip(result["estimator"], result["indices"]["test"]):
        train_parties = np.setdiff1d(party, party[test_rows])
        assert_array_equal(estimator.parties_, train_parties)
        assert estimator.vote_counts_.shape[0] == len(X_public)


def test_grid_search_with_group_kfold_and_routing(federated_data):
    X, y, party, X_public = federated_data
    search = GridSearchCV(
        FedKTClassifier(random_state=0), {"n_students": [1, 2]}, cv=GroupKFold(2)
    )
    with config_context(enable_metadata_routing=True):
        search.fit(X, y, groups=party, X_unlabeled=X_public)
    assert_array_equal(search.best_estimator_.parties_, np.unique(party))
    # without routing, groups only reach the splitter, and fit says so
    with pytest.warns(AssumptionWarning, match="with metadata routing off.*turn routing on"):
        search.fit(X, y, groups=party)
    assert_array_equal(search.best_estimator_.parties_, [0])


def test_public_set_as_long_as_training_data_stays_whole_in_cv(federated_data):
    X, y, party, _ = federated_data
    X_public = X[::-1] + 0.1  # exactly len(X) rows
    params = {"groups": party}
    with config_context(enable_metadata_routing=True):
        sliced = cross_validate(
            FedKTClassifier(random_state=0), X, y, cv=GroupKFold(2), return_estimator=True,
            params={**params, "X_unlabeled": X_public},
        )
        whole = cross_validate(
            FedKTClassifier(random_state=0), X, y, cv=GroupKFold(2), return_estimator=True,
            params={**params, "X_unlabeled": PublicSet(X_public)},
        )
    # scikit-learn slices a plain array of len(X) rows; PublicSet keeps it whole
    assert all(e.vote_counts_.shape[0] < len(X) for e in sliced["estimator"])
    assert all(e.vote_counts_.shape[0] == len(X) for e in whole["estimator"])


def test_pipeline_step_parameters_without_routing(federated_data):
    # steps that transform X would leave the public set raw, and are refused (see
    # test_first_use.py); the step parameters themselves reach the classifier
    X, y, party, X_public = federated_data
    pipe = Pipeline([("scale", "passthrough"), ("fedkt", FedKTClassifier(random_state=0))])
    pipe.fit(X, y, fedkt__groups=party, fedkt__X_unlabeled=X_public)
    assert_array_equal(pipe[-1].parties_, np.unique(party))


@pytest.mark.parametrize("wrap", [lambda U: U, PublicSet, lambda U: (U,)],
                         ids=["array", "PublicSet", "tuple"])
def test_pipeline_transform_input_transforms_public_data(federated_data, wrap):
    X, y, party, X_public = federated_data
    scale_up = FunctionTransformer(_times_1000)
    pipe = Pipeline(
        [("scale", scale_up),
         ("fedkt", FedKTClassifier(RecordingTree(), voting=SoftVotes(min_public_rows=0),
                                   random_state=0))],
        transform_input=["X_unlabeled"],
    )
    with config_context(enable_metadata_routing=True):
        pipe.fit(X, y, groups=party, X_unlabeled=wrap(X_public))
    # students learn from the public data only (no jittered copies): they saw it
    # transformed
    student = next(s for students in pipe[-1].students_ for s in students
                   if isinstance(s, RecordingTree))
    assert student.fit_max_ == pytest.approx(1000 * np.abs(X_public).max())


@pytest.mark.parametrize(
    "make",
    [
        lambda base: FedKTClassifier(base, random_state=0),
        lambda base: FedCTClassifier(base, n_rounds=3, random_state=0),
        lambda base: OneShotEnsembleClassifier(base, selection="cv", n_selected=2,
                                               random_state=0),
    ],
    ids=["fedkt", "fedct", "oneshot"],
)
def test_dataframe_with_column_transformer_base(make):
    rng = np.random.RandomState(0)
    frame = pd.DataFrame(
        {
            "size": rng.normal(size=300),
            "colour": rng.choice(["red", "green", "blue"], size=300),
            "weight": rng.normal(size=300),
        }
    )
    y = np.where((frame["colour"] == "red") | (frame["size"] > 1), "yes", "no")
    base = make_pipeline(
        ColumnTransformer(
            [("colour", OneHotEncoder(), ["colour"]), ("numbers", "passthrough", ["size"])]
        ),
        LogisticRegression(),
    )
    clf = make(base)
    clf.fit(frame.iloc[:200], y[:200], groups=np.arange(200) % 3, X_unlabeled=frame.iloc[200:])
    assert_array_equal(clf.feature_names_in_, ["size", "colour", "weight"])
    assert clf.score(frame.iloc[200:], y[200:]) > 0.8


# --- errors -----------------------------------------------------------------------------


def test_party_smaller_than_n_subsets_is_named(federated_data):
    X, y, party, X_public = federated_data
    party = party.copy()
    party[:3] = 99  # exactly three rows in party 99
    message = r"Party 99 has 3 sample\(s\), fewer than n_teachers=5"
    with pytest.raises(ValueError, match=message):
        FedKTClassifier(n_teachers=5).fit(X, y, groups=party, X_unlabeled=X_public)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"groups": np.zeros(5)}, ValueError, "groups has 5 entries but X has 300 rows"),
        ({"groups": np.zeros((300, 2))}, ValueError,
         r"groups must be 1-D, one party label per row; got an array of shape \(300, 2\)"),
        ({"X_unlabeled": np.zeros((4, 3))}, ValueError,
         "Invalid X_unlabeled: X_unlabeled has 3 features, but FedKTClassifier is expecting"),
        ({"X_unlabeled": (np.zeros((4, 8)), np.zeros((4, 8)))}, ValueError,
         "exactly one element"),
        ({"X_unlabeled": np.full((4, 8), np.inf)}, ValueError,
         "Invalid X_unlabeled: Input X contains inf"),
    ],
)
def test_invalid_fit_inputs(federated_data, kwargs, error, message):
    X, y, party, X_public = federated_data
    kwargs = {"groups": party, "X_unlabeled": X_public, **kwargs}
    with pytest.raises(error, match=message):
        FedKTClassifier().fit(X, y, **kwargs)


@pytest.mark.parametrize(
    "params", [{"n_students": 0}, {"n_teachers": 1.5}, {"estimator": "tree"}]
)
def test_invalid_parameters(federated_data, params):
    X, y, party, X_public = federated_data
    with pytest.raises(InvalidParameterError):
        FedKTClassifier(**params).fit(X, y, groups=party)


# --- quality ----------------------------------------------------------------------------


def test_fedkt_beats_local_training_on_digits():
    X_train, y_train, party, X_public, X_test, y_test = federated_digits(n_parties=10)
    base = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))
    fedkt = FedKTClassifier(base, random_state=0).fit(
        X_train, y_train, groups=party, X_unlabeled=X_public
    )
    solo = np.mean(
        [
            clone(base).fit(X_train[party == p], y_train[party == p]).score(X_test, y_test)
            for p in range(10)
        ]
    )
    assert fedkt.score(X_test, y_test) >= solo + 0.10


@pytest.mark.parametrize("n_jobs", [None, 2])  # measured in worker processes with 2
def test_upload_bytes_are_the_payloads_a_deployment_sends(federated_data, n_jobs):
    X, y, party, X_public = federated_data
    clf = FedKTClassifier(n_jobs=n_jobs, random_state=0).fit(X, y, groups=party,
                                                              X_unlabeled=X_public)
    assert "_upload_bytes" in vars(clf)  # measured when first read, not in fit
    uploads = [clf.fit_party(X[party == p], y[party == p], party=p, classes=clf.classes_,
                             X_unlabeled=X_public) for p in clf.parties_]
    # its students as skops writes them, and the arrays of its sums
    expected = [len(skops.io.dumps(without_sums(upload).payload,
                                   compression=zipfile.ZIP_DEFLATED))
                + sum(values.nbytes for values in upload.payload["sums"].values())
                for upload in uploads]
    # skops writes object ids, which compress a few bytes differently in each process
    assert_allclose(clf.upload_bytes_, expected, rtol=0.01)
    assert clf.upload_bytes_.shape == clf.parties_.shape

"""What a scikit-learn user meets first: no failure after training, no silent assumption,
warnings issued once where the user's filters apply."""

import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
import sklearn
from _data import WarningTree
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import GridSearchCV, GroupKFold
from sklearn.base import clone
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.tree import DecisionTreeClassifier

from skfedkt import (
    AssumptionWarning,
    FedAvgClassifier,
    FedCTClassifier,
    FedKTClassifier,
    LabelCollapseWarning,
    OneShotEnsembleClassifier,
)

ESTIMATORS = [FedKTClassifier, FedCTClassifier, OneShotEnsembleClassifier]


@pytest.fixture(scope="module")
def data():
    X, y = load_breast_cancer(return_X_y=True)
    return X[100:], y[100:], np.arange(len(y) - 100) % 3, X[:100]


def _with_a_lambda():
    return make_pipeline(StandardScaler(), FunctionTransformer(lambda a: a),
                         DecisionTreeClassifier(max_depth=3))


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_a_lambda_trains_in_process_and_its_uploads_are_measured(estimator, data):
    X, y, party, X_public = data
    clf = estimator(_with_a_lambda(), random_state=0).fit(X, y, groups=party,
                                                           X_unlabeled=X_public)
    assert (clf.upload_bytes_ > 0).all()  # measured as skops writes them, when asked


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_a_party_with_a_lambda_is_refused_before_training(estimator, data):
    X, y, party, X_public = data
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"functiontransformer__func=.*<lambda> has no name "
                                         r"a server can import\. Define it at module level"):
        estimator(_with_a_lambda()).fit_party(X, y, party=0, classes=[0, 1],
                                               X_unlabeled=X_public)
    assert time.perf_counter() - start < 1


@pytest.mark.parametrize("estimator, public_set_labelled",
                         [(FedKTClassifier, True), (FedCTClassifier, True),
                          (OneShotEnsembleClassifier, False)])
def test_fit_says_once_what_it_assumed(estimator, public_set_labelled, data):
    X, y, party, X_public = data
    tree = DecisionTreeClassifier(max_depth=3)
    with pytest.warns(AssumptionWarning) as record:
        estimator(tree, random_state=0).fit(X, y)
    (warning,) = [w for w in record if w.category is AssumptionWarning]
    assert "groups=None, so every row is one party's" in str(warning.message)
    assert ("X_unlabeled=None" in str(warning.message)) == public_set_labelled
    with warnings.catch_warnings():
        warnings.simplefilter("error", AssumptionWarning)
        estimator(tree, random_state=0).fit(X, y, groups=party, X_unlabeled=X_public)


@pytest.mark.parametrize("routing", [False, True])
def test_a_search_warns_once_not_per_candidate(routing, data):
    X, y, party, _ = data
    search = GridSearchCV(FedKTClassifier(DecisionTreeClassifier(), random_state=0),
                          {"n_teachers": [1, 2, 3, 4, 5]}, cv=GroupKFold(2))
    with sklearn.config_context(enable_metadata_routing=routing), \
            pytest.warns(AssumptionWarning) as record:
        search.fit(X, y, groups=party)
    (warning,) = [w for w in record if w.category is AssumptionWarning]
    message = str(warning.message)
    assert "once for this cross-validation" in message
    assert ("turn routing on" in message) != routing
    assert ("groups=None" in message) != routing  # with routing on, the groups arrive


ALL_ESTIMATORS = [*ESTIMATORS, FedAvgClassifier]


def _scaled(estimator, **pipeline_params):
    return make_pipeline(StandardScaler(), estimator(random_state=0), **pipeline_params)


@pytest.mark.parametrize("estimator", ALL_ESTIMATORS)
@pytest.mark.parametrize("routing", [False, True])
def test_a_pipeline_that_leaves_the_public_set_raw_is_refused_naming_the_fix(
        estimator, routing, data):
    # what a scikit-learn user writes first: the scaler transforms X, not X_unlabeled
    X, y, party, X_public = data
    pipe = _scaled(estimator)
    step = pipe.steps[-1][0]
    params = ({"groups": party, "X_unlabeled": X_public} if routing else
              {f"{step}__groups": party, f"{step}__X_unlabeled": X_public})
    start = time.perf_counter()
    with sklearn.config_context(enable_metadata_routing=routing), \
            pytest.raises(ValueError, match=rf"{estimator.__name__} is the last step of a "
                          r"Pipeline whose steps \['standardscaler'\] transform X but not "
                          r"X_unlabeled.*enable_metadata_routing=True.*"
                          r"transform_input=\['X_unlabeled'\]"):
        pipe.fit(X, y, **params)
    assert time.perf_counter() - start < 1  # before any model trains
    assert not hasattr(pipe.steps[-1][1], "classes_")


def test_a_search_over_such_a_pipeline_fails_with_the_fix_once(data):
    X, y, party, X_public = data
    search = GridSearchCV(_scaled(FedKTClassifier), {"fedktclassifier__n_students": [1, 2]},
                          cv=3)
    with pytest.raises(ValueError) as caught, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's FitFailedWarning
        search.fit(X, y, groups=party, fedktclassifier__X_unlabeled=X_public)
    assert "All the 6 fits failed" in str(caught.value)
    assert str(caught.value).count("transform_input=['X_unlabeled']") == 1


def test_a_pipeline_that_transforms_the_public_set_learns(data):
    X, y, party, X_public = data
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = _scaled(FedKTClassifier, transform_input=["X_unlabeled"])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pipe.fit(X, y, groups=party, X_unlabeled=X_public)
        # nested: the outer pipeline transforms it, the inner one passes it on
        inner = make_pipeline(FedKTClassifier(random_state=0))
        nested = Pipeline([("scale", StandardScaler()), ("inner", inner)],
                          transform_input=["X_unlabeled"])
        nested.fit(X, y, groups=party, X_unlabeled=X_public)
        assert nested.score(X, y) > 0.9
        # an outer pipeline that does not is refused, as is one whose only step before
        # the classifier is a real transformer
        outer = Pipeline([("scale", StandardScaler()), ("inner", clone(inner))])
        with pytest.raises(ValueError, match="steps \\['scale'\\] transform X"):
            outer.fit(X, y, groups=party, X_unlabeled=X_public)
    # steps that transform nothing leave nothing to refuse
    with sklearn.config_context(enable_metadata_routing=False):
        Pipeline([("none", "passthrough"), ("fedkt", FedKTClassifier(random_state=0))]).fit(
            X, y, fedkt__groups=party, fedkt__X_unlabeled=X_public)


def test_a_raw_public_set_outside_a_pipeline_warns_once_per_search(data):
    # scaled rows beside a raw public set: the warning says so, once, and the collapse
    # warnings that follow point at it instead of advising a larger public set
    X, y, party, X_public = data
    X_scaled = StandardScaler().fit_transform(X)
    search = GridSearchCV(FedKTClassifier(DecisionTreeClassifier(max_depth=3),
                                          random_state=0),
                          {"n_students": [1, 2]}, cv=GroupKFold(3))
    with sklearn.config_context(enable_metadata_routing=True), \
            warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        search.fit(X_scaled, y, groups=party, X_unlabeled=X_public)
    messages = [str(w.message) for w in record]
    assert sum(m.startswith("X_unlabeled is far from X") for m in messages) == 1
    collapses = [str(w.message) for w in record if w.category is LabelCollapseWarning]
    assert collapses and all("Transform the public set as X is transformed" in m
                             and "larger public set, fewer" not in m for m in collapses)


def test_warnings_in_worker_processes_reach_the_caller_once_per_kind(data):
    X, y, party, X_public = data
    with pytest.warns(UserWarning, match="a clone warned: it saw") as record:
        FedKTClassifier(WarningTree(max_depth=3), n_jobs=2, random_state=0).fit(
            X, y, groups=party, X_unlabeled=X_public)
    # 30 teachers and 6 students in two worker processes: one warning, issued here; the
    # final model, fit in this process, warns for itself
    from_workers = [w for w in record if "a clone warned" in str(w.message)
                    and w.filename.endswith("_fitting.py")]
    assert len(from_workers) == 1


@pytest.fixture(scope="module")
def consortium(tmp_path_factory):
    from skfedkt._cli import main

    folder = tmp_path_factory.mktemp("consortium")
    assert main(["split", "breast_cancer", "--out-dir", str(folder)]) == 0
    return folder


def test_commands_show_what_they_do_on_stderr(consortium, tmp_path, capsys):
    from skfedkt._cli import main

    capsys.readouterr()
    assert main(["party", "fedkt", "--estimator", "dt", "--data",
                 str(consortium / "party-1.csv"), "--public", str(consortium / "public.csv"),
                 "--classes", "0", "1", "--name", "hospital-1",
                 "--out", str(tmp_path / "upload.skfedkt")]) == 0
    printed = capsys.readouterr()
    assert "party 'hospital-1': fedkt's party step" in printed.err
    assert "party tier:" in printed.err  # the stage it is at
    assert printed.out.startswith("party 'hospital-1': ")  # the result, on stdout


def test_the_audit_command_shows_an_example(capsys):
    from skfedkt._cli import main

    assert main(["audit", "--help"]) == 0
    assert ("  skfedkt audit fedkt --data party-2.csv --holdout test.csv --public public.csv "
            "--classes 0 1 --name hospital-2\n") in capsys.readouterr().out


def test_the_split_of_the_demo_is_within_the_servers_bound(consortium):
    # the README's four hospitals: honest sizes draw no warning from the server's guard
    from skfedkt._engine._voting import bounded_party_counts
    from skfedkt.datasets import load_local_file

    counts = [np.bincount(load_local_file(consortium / f"party-{p}.csv")[1], minlength=2)
              for p in range(4)]
    assert bounded_party_counts(counts)[1].size == 0


def test_what_the_documented_commands_write_is_ignored_by_git():
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout")
    paths = ["consortium/model.skops", "results.csv", "results.png", "doc/_build/index.html"]
    ignored = subprocess.run(["git", "check-ignore", *paths], cwd=root, capture_output=True,
                             text=True).stdout.split()
    assert ignored == paths


def test_the_flower_apps_without_flower_say_what_to_install():
    code = ("import sys; sys.modules['flwr'] = None\n"  # as if Flower were not installed
            "import skfedkt.flower")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0
    assert "ImportError: skfedkt.flower needs Flower 1.22 or newer: pip install" in (
        result.stderr), result.stderr[-500:]


def test_one_party_is_one_party_in_words(capsys):
    X, y = load_breast_cancer(return_X_y=True)
    FedKTClassifier(DecisionTreeClassifier(), verbose=1, random_state=0).fit_party(
        X[:100], y[:100], party="a", classes=[0, 1], X_unlabeled=X[400:])
    printed = capsys.readouterr().out
    assert "(1 party x 2 partitions" in printed and "1 parties" not in printed


def test_a_final_model_that_loses_a_class_is_told_of_its_own_parameters():
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    stump = DecisionTreeClassifier(max_depth=1)  # two leaves for three classes
    with pytest.warns(LabelCollapseWarning, match="The final model DecisionTreeClassifier "
                      "predicts") as caught:
        FedKTClassifier(DecisionTreeClassifier(), n_teachers=1, final_estimator=stump,
                        random_state=0).fit(X, y, groups=np.arange(len(y)) % 2,
                                            X_unlabeled=X + 0.001)
    assert not [w for w in caught if "HistGradientBoosting" in str(w.message)]

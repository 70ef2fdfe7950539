"""Golden outputs: what every estimator computes, recorded so that a rewrite of the code
or the API can show it changes none of it.

Each case names a configuration by what it does (stable across API changes) and builds
it with today's parameters; only `CASES` changes when the API does. The recorded outputs
(predictions, probabilities and epsilons on the test rows of two federated datasets) live
in ``tests/golden/``, one file per set of versions of numpy, scipy and scikit-learn (a
base estimator may fit differently under another); ``tests/test_golden.py`` compares
against the file of the versions at hand, which ``.ci/run`` gives for its newest and its
oldest versions.

    python tests/_golden.py          # record the outputs of the versions at hand (say why
                                     # in the commit where a file changes)
"""

import warnings
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier

from skfedkt import (
    DSFLClassifier,
    FedCTClassifier,
    FedKTClassifier,
    HardVotes,
    OneShotEnsembleClassifier,
    SoftVotes,
)
from skfedkt.datasets import load_federated
from skfedkt.privacy import BitFlips, PartyNoise, ServerNoise

GOLDEN_DIR = Path(__file__).with_name("golden")
DATASETS = {"breast_cancer": 4, "wine": 3}


def _forest():
    return RandomForestClassifier(n_estimators=8, max_depth=4)


def _fedkt(**params):
    return FedKTClassifier(_forest(), **params)


CASES = {
    # n_teachers="auto" (teachers sized by rows) became the default; the earlier default,
    # five teachers, keeps its recorded outputs
    "fedkt default": _fedkt(),
    "fedkt five teachers": _fedkt(n_teachers=5),
    "fedkt paper": _fedkt(voting="hard"),
    "fedkt L1": _fedkt(privacy=ServerNoise(gamma=0.5)),
    "fedkt L1 hard": _fedkt(privacy=ServerNoise(gamma=0.5), voting="hard"),
    "fedkt L1 gaussian": _fedkt(privacy=ServerNoise(gamma=0.5, noise="gaussian")),
    "fedkt L2 queries": _fedkt(privacy=PartyNoise(gamma=0.5, query_fraction=0.5)),
    "fedkt L2 hard": _fedkt(privacy=PartyNoise(gamma=0.5), voting="hard"),
    "fedkt paper, every student votes": _fedkt(voting=HardVotes(consistent=False)),
    "fedkt undistilled": _fedkt(distill=False, n_teachers=5),
    "fedkt soft labels": _fedkt(soft_labels="all", n_teachers=5),
    "fedkt soft student labels": _fedkt(soft_labels="students", n_teachers=5),
    "fedkt summed votes": _fedkt(voting=SoftVotes(pooling="sum"), n_teachers=5),
    "fedkt unmatched shares": _fedkt(voting=SoftVotes(match_shares=False), n_teachers=5),
    "fedkt one teacher": _fedkt(n_teachers=1),
    "fedkt one partition": _fedkt(n_students=1, n_teachers=5),
    "fedkt no public copies": _fedkt(voting=SoftVotes(min_public_rows=0), n_teachers=5),
    "fedkt students learn party rows": _fedkt(student_data="party+public", n_teachers=1,
                                              soft_labels="students",
                                              voting=SoftVotes(min_public_rows=0)),
    "fedkt logistic": FedKTClassifier(make_pipeline(StandardScaler(), LogisticRegression()),
                                      student_estimator=DecisionTreeClassifier(max_depth=4),
                                      n_teachers=5),
    "oneshot all": OneShotEnsembleClassifier(_forest(), selection="all"),
    "oneshot all hard": OneShotEnsembleClassifier(_forest(), selection="all", voting="hard"),
    "oneshot cv": OneShotEnsembleClassifier(_forest(), selection="cv", n_selected=2),
    "oneshot data": OneShotEnsembleClassifier(_forest(), selection="data", n_selected=2),
    "oneshot distilled": OneShotEnsembleClassifier(
        _forest(), distill=True, final_estimator=DecisionTreeClassifier(max_depth=4)),
    "fedct default": FedCTClassifier(_forest(), n_rounds=4),
    "fedct soft": FedCTClassifier(_forest(), n_rounds=4, voting="soft"),
    "fedct private": FedCTClassifier(_forest(), n_rounds=4, privacy=BitFlips(1.0)),
    "dsfl default": DSFLClassifier(_forest(), n_rounds=3),
    "dsfl distilled": DSFLClassifier(_forest(), n_rounds=3, distill=True),
    "dsfl as the paper": DSFLClassifier(_forest(), n_rounds=3, public_weight=1.0,
                                        party_weight="equal", match_shares=False,
                                        temperature=0.5),
}
# cases also run through party and server steps with files; test_deployment checks
# more settings against fit, these pin that the deployed model equals the recorded one
DEPLOYED = ["fedkt default", "fedkt five teachers", "fedkt L2 queries", "oneshot cv"]


def dataset(name, seed=0):
    return load_federated(name, n_parties=DATASETS[name], beta=0.5, min_party_size=10,
                          random_state=seed)


def _deployed(clf, data):
    """`clf` fitted by its party steps and its server step (on a clone) through files."""
    classes = np.unique(data.y_train)
    uploads = [
        clf.fit_party(data.X_train[data.groups == p], data.y_train[data.groups == p],
                      party=int(p), classes=classes, X_unlabeled=data.X_public).to_bytes()
        for p in np.unique(data.groups)
    ]
    return clf.fit_server(uploads, data.X_public)


def fit(estimator, dataset_name, deployed=False, copy=True):
    """`estimator` (a clone, unless `copy` is False) fitted on `dataset_name` with
    ``random_state=0``, in one process or through party and server steps."""
    data = dataset(dataset_name)
    clf = (clone(estimator) if copy else estimator).set_params(random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if deployed:
            return _deployed(clf, data)
        return clf.fit(data.X_train, data.y_train, groups=data.groups,
                       X_unlabeled=data.X_public)


def outputs(name, dataset_name, deployed=False):
    """The recorded outputs of case `name` on `dataset_name`: a dict of arrays."""
    fitted = fit(CASES[name], dataset_name, deployed)
    X_test = dataset(dataset_name).X_test
    result = {"predict": fitted.predict(X_test)}
    if hasattr(fitted, "predict_proba"):
        result["predict_proba"] = fitted.predict_proba(X_test)
    epsilon = getattr(fitted, "epsilon_", None)
    if epsilon is not None:
        result["epsilon"] = np.array(epsilon, dtype=float)
    return result


def golden_keys():
    """(case, dataset, deployed) of every recorded output."""
    return ([(name, data, False) for name in CASES for data in DATASETS]
            + [(name, data, True) for name in DEPLOYED for data in DATASETS])


def key(name, dataset_name, deployed, output):
    return f"{name}|{dataset_name}|{'deployed' if deployed else 'fit'}|{output}"


def versions():
    """The libraries whose fits the outputs depend on, as recorded with them."""
    import numpy
    import scipy
    import sklearn

    return np.array([f"numpy {numpy.__version__}", f"scipy {scipy.__version__}",
                     f"scikit-learn {sklearn.__version__}"])


def golden_path():
    """The file of the outputs recorded with the versions at hand."""
    return GOLDEN_DIR / ("_".join(v.replace(" ", "-") for v in versions()) + ".npz")


def main():
    recorded = {"versions": versions()}
    for name, dataset_name, deployed in golden_keys():
        for output, value in outputs(name, dataset_name, deployed).items():
            recorded[key(name, dataset_name, deployed, output)] = value
    path = golden_path()
    path.parent.mkdir(exist_ok=True)
    np.savez_compressed(path, **recorded)
    print(f"{len(recorded)} arrays written to {path}")


if __name__ == "__main__":
    main()

"""scikit-learn's estimator checks, for every estimator and the variants of its contract."""

import pytest
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from xgboost import XGBClassifier

from skfedkt import (
    DSFLClassifier,
    FedAvgClassifier,
    FedCTClassifier,
    FedKTClassifier,
    OneShotEnsembleClassifier,
)
from skfedkt.privacy import BitFlips, TeacherVotes


# one configuration per estimator, plus the base estimators and options that change
# its contract: the input it accepts (sparse: logistic regression; missing values:
# histogram gradient boosting; XGBoost's own tags; a Pipeline's), and which methods it
# offers (FedKT without a final model, FedCT's soft vote, a hard-voting ensemble)
@parametrize_with_checks(
    [
        FedKTClassifier(random_state=0),
        FedKTClassifier(LogisticRegression(), random_state=0),
        FedKTClassifier(HistGradientBoostingClassifier(max_iter=20), random_state=0),
        FedKTClassifier(XGBClassifier(n_estimators=10, max_depth=3), random_state=0),
        FedKTClassifier(make_pipeline(StandardScaler(), LogisticRegression()),
                        random_state=0),
        FedKTClassifier(distill=False, random_state=0),
        FedCTClassifier(n_rounds=3, random_state=0),
        FedCTClassifier(HistGradientBoostingClassifier(max_iter=20), n_rounds=3,
                        random_state=0),
        FedCTClassifier(voting="soft", n_rounds=2, random_state=0),
        FedCTClassifier(LogisticRegression(), privacy=BitFlips(1.0, sensitivity=4),
                        n_rounds=2, random_state=0),
        FedCTClassifier(privacy=TeacherVotes(8.0, n_teachers=2, n_queries=10), n_rounds=2,
                        random_state=0),
        DSFLClassifier(n_rounds=2, random_state=0),
        DSFLClassifier(HistGradientBoostingClassifier(max_iter=20), n_rounds=2,
                       voting="hard", random_state=0),
        DSFLClassifier(LogisticRegression(), n_rounds=2, distill=True, temperature=0.5,
                       random_state=0),
        FedAvgClassifier(SGDClassifier(loss="log_loss"), n_rounds=2, random_state=0),
        FedAvgClassifier(MLPClassifier(hidden_layer_sizes=(8,), batch_size=16,
                                       learning_rate_init=0.01),
                         n_rounds=4, local_epochs=4, random_state=0),
        # FedProx and FedDF (on the rows of X, which check_estimator passes as public)
        FedAvgClassifier(MLPClassifier(hidden_layer_sizes=(8,), batch_size=16,
                                       learning_rate_init=0.01),
                         n_rounds=3, local_epochs=4, proximal_mu=0.1, distill_epochs=2,
                         random_state=0),
        OneShotEnsembleClassifier(random_state=0),
        OneShotEnsembleClassifier(HistGradientBoostingClassifier(max_iter=20),
                                  random_state=0),
        # not SVC: SVC itself fails check_estimators_pickle(readonly_memmap=True) in
        # scikit-learn 1.9.1, libsvm rejecting the read-only arrays of a loaded model
        OneShotEnsembleClassifier(LogisticRegression(), selection="cv", n_selected=3,
                                  random_state=0),
        OneShotEnsembleClassifier(selection="random", n_selected=2, voting="hard",
                                  random_state=0),
        # distillation needs public data, which check_estimator never passes: it is
        # tested in test_oneshot.py
    ]
)
# the checks' toy data is too small and too skewed for federated labels not to collapse
@pytest.mark.filterwarnings("ignore::skfedkt.LabelCollapseWarning")
# they fit without groups or a public set: every fit says what it assumed
@pytest.mark.filterwarnings("ignore::skfedkt.AssumptionWarning")
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)

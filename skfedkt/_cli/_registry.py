"""The one table of algorithms and base estimators that both command lines serve: the
experiment runner (``skfedkt run``) and the deployment commands (``skfedkt party``,
``server``, ``audit``)."""

import numpy as np
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler
from sklearn.tree import DecisionTreeClassifier

from .._fedavg import FedAvgClassifier
from .._fedct import FedCTClassifier
from .._fedkt import FedKTClassifier
from .._oneshot import OneShotEnsembleClassifier


def _xgboost():
    try:
        from xgboost import XGBClassifier
    except ImportError as exc:  # an optional dependency
        raise ValueError(
            "estimator 'xgb' needs XGBoost: pip install xgboost-cpu (or, from the "
            "source tree, pip install '.[xgboost]')"
        ) from exc
    return XGBClassifier(n_estimators=100, max_depth=6)


# the papers' models: FedKT's random forest (100 trees, depth 6) and MLP (two layers of
# 100 units), its GBDT (depth 6), and the trees of FedCT's interpretable models
ESTIMATORS = {
    "rf": lambda: RandomForestClassifier(n_estimators=100, max_depth=6),
    "dt": lambda: DecisionTreeClassifier(),
    "lr": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)),
    "hgb": lambda: HistGradientBoostingClassifier(max_depth=6),
    "mlp": lambda: make_pipeline(
        StandardScaler(), MLPClassifier(hidden_layer_sizes=(100, 100), max_iter=300)
    ),
    "xgb": _xgboost,
}

ALGORITHMS = ["fedkt", "fedkt-undistilled", "fedkt-paper", "fedct", "oneshot", "ensemble",
              "solo", "pate", "central", "fedavg", "fedprox", "feddf", "fedkt-prox"]

# the iterative algorithms: they average the weights of the MLP
AVERAGING = ["fedavg", "fedprox", "feddf", "fedkt-prox"]

DESCRIPTIONS = {
    "fedkt": "FedKT, skfedkt's default (one round, two-tier knowledge transfer, soft "
    "votes)",
    "fedkt-undistilled": "FedKT without the final model: the server's pooled vote of the "
    "students predicts (distill=False)",
    "fedkt-paper": "FedKT exactly as in the paper (hard votes, 5 teachers per partition)",
    "fedct": "FedCT: co-training rounds on the public set, a model per party",
    "oneshot": "one-shot ensemble: the local models of the parties chosen by validation "
    "score",
    "ensemble": "every party's own model, their probabilities averaged (no distillation)",
    "solo": "SOLO: each party alone, mean over parties",
    "pate": "PATE: the paper's FedKT with one party holding every row (not federated)",
    "central": "centralized: one model on all training rows (not federated)",
    "fedavg": "FedAvg: the parties' MLP weights averaged, round after round (--estimator "
    "mlp)",
    "fedprox": "FedProx: FedAvg with a proximal term pulling local training to the "
    "average",
    "feddf": "FedDF: FedAvg whose server distils the parties' models into the average on "
    "the public set",
    "fedkt-prox": "FedKT-Prox: FedKT's model as the first round of FedProx",
}

# the algorithms a consortium can deploy: a party step and a server step each
DEPLOYED = ["fedkt", "fedct", "oneshot"]


def _standardize(X, mean, scale):
    return (X - mean) / scale


def public_scaling(X_public):
    """Standardisation by the public set's statistics: the same transform at every party
    (a scaler fit on each party's rows would feed every party's weights other
    features), and stateless, so that FedAvg can average the model after it."""
    mean, scale = X_public.mean(axis=0), X_public.std(axis=0)
    return FunctionTransformer(_standardize, kw_args=dict(mean=mean,
                                                          scale=np.where(scale > 0, scale, 1)))


def averaged_model(estimator, X_public):
    """The runner's model for the iterative algorithms: its MLP after the public set's
    standardisation instead of its own scaler."""
    learner = estimator[-1] if isinstance(estimator, Pipeline) else estimator
    return make_pipeline(public_scaling(X_public), learner)


def first_round(estimator, fedkt_options, local_epochs):
    """FedKT-Prox's first round: FedKT, whose final model (where the rounds start, an
    MLP or a Pipeline ending in one) trains only as long as a round's local training,
    `local_epochs` epochs; a model fitted longer to the public set is a worse start
    (``benchmarks/bench_networks.py``)."""
    final = clone(estimator)
    (final[-1] if isinstance(final, Pipeline) else final).set_params(max_iter=local_epochs)
    return FedKTClassifier(estimator, **fedkt_options, final_estimator=final)


def make_estimator(algorithm, estimator, options, seed, n_jobs, verbose):
    """The meta-estimator of `algorithm` (a name of `ALGORITHMS` that fits one model)
    around `estimator`, with `options` (keyword arguments per algorithm family)."""
    common = dict(n_jobs=n_jobs, random_state=seed, verbose=verbose)
    if algorithm in AVERAGING:
        fedavg = options["fedavg"]
        return FedAvgClassifier(
            estimator, n_rounds=fedavg["n_rounds"], local_epochs=fedavg["local_epochs"],
            proximal_mu=fedavg["proximal_mu"] if algorithm in ("fedprox", "fedkt-prox")
            else 0.0,
            distill_epochs=fedavg["distill_epochs"] if algorithm == "feddf" else 0,
            init=(first_round(estimator, options["fedkt"], fedavg["local_epochs"])
                  if algorithm == "fedkt-prox" else None),
            **common,
        )
    if algorithm in ("fedkt", "fedkt-undistilled"):
        return FedKTClassifier(estimator, **options["fedkt"],
                               distill=algorithm == "fedkt", **common)
    if algorithm in ("fedkt-paper", "pate"):
        return FedKTClassifier(estimator, **{**options["fedkt"], "voting": "hard"}, **common)
    if algorithm == "fedct":
        return FedCTClassifier(estimator, **options["fedct"], **common)
    if algorithm == "oneshot":
        return OneShotEnsembleClassifier(estimator, **options["oneshot"], **common)
    return OneShotEnsembleClassifier(estimator, selection="all", **common)

"""FedAvg on the command line: its flags, and the iterative configurations ``skfedkt
run`` compares on the MLP (FedAvg, FedProx, FedDF, FedKT-Prox). The deployment
commands do not run it: its parties need the same feature scaling, which the runner
takes from the public set (`averaged_model`)."""

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer

from .._engine._nets import final_step
from .._fedkt import FedKTClassifier
from .._registry import Algorithm, Flag, Method, positive, register
from ._classifier import FedAvgClassifier


FLAGS = (
    Flag("--averaging-rounds", "rounds of the iterative algorithms (FedKT-Prox's first is "
         "FedKT)", type=positive(int), default=10, parameter="n_rounds"),
    Flag("--local-epochs", "epochs a party trains in every round (the FedKT paper's 10; "
         "the class's default is 1, FedAvg's own), and the epochs of FedKT-Prox's first "
         "model, where its rounds start", type=positive(int), default=10,
         parameter="local_epochs"),
    Flag("--mu", "FedProx's proximal weight (the FedKT paper's 0.1)", type=positive(float),
         default=0.1, parameter="proximal_mu"),
    Flag("--distill-epochs", "epochs FedDF's server trains the average on the public set "
         "(the class's default, 0, distils nothing: that is FedAvg)", type=positive(int),
         default=10, parameter="distill_epochs"),
)


def _standardize(X: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return (X - mean) / scale


def public_scaling(X_public: np.ndarray) -> FunctionTransformer:
    """Standardisation by the public set's statistics: the same transform at every party
    (a scaler fit on each party's rows would feed every party's weights other
    features), and stateless, so that FedAvg can average the model after it."""
    mean, scale = X_public.mean(axis=0), X_public.std(axis=0)
    return FunctionTransformer(_standardize, kw_args=dict(mean=mean,
                                                          scale=np.where(scale > 0, scale, 1)))


def averaged_model(estimator: Any, X_public: np.ndarray) -> Pipeline:
    """The runner's model for the iterative algorithms: its MLP after the public set's
    standardisation instead of its own scaler."""
    return make_pipeline(public_scaling(X_public), final_step(estimator))


def first_round(estimator: Any, fedkt_options: dict[str, Any],
                local_epochs: int) -> FedKTClassifier:
    """FedKT-Prox's first round: FedKT, whose final model (where the rounds start, an
    MLP or a Pipeline ending in one) trains only as long as a round's local training,
    `local_epochs` epochs; a model fitted longer to the public set is a worse start
    (``benchmarks/bench_networks.py``)."""
    final = clone(estimator)
    final_step(final).set_params(max_iter=local_epochs)
    return FedKTClassifier(estimator, **fedkt_options, final_estimator=final)


def _iterative(proximal: bool = False, distill: bool = False,
               fedkt_first: bool = False) -> Callable[..., FedAvgClassifier]:
    def make(estimator: Any, options: dict[str, dict[str, Any]],
             common: dict[str, Any]) -> FedAvgClassifier:
        own = options["fedavg"]
        return FedAvgClassifier(
            estimator, n_rounds=own["n_rounds"], local_epochs=own["local_epochs"],
            proximal_mu=own["proximal_mu"] if proximal else 0.0,
            distill_epochs=own["distill_epochs"] if distill else 0,
            init=(first_round(estimator, options["fedkt"], own["local_epochs"])
                  if fedkt_first else None),
            **common,
        )

    return make


_ITERATIVE: dict[str, Any] = dict(
    needs_estimator=("mlp", "the iterative algorithms ({names}) average the weights of an MLP"),
    prepare=averaged_model)

register(Algorithm(
    name="fedavg", estimator_class=FedAvgClassifier,
    title="FedAvg, FedProx, FedDF, FedKT-Prox (--estimator mlp)", listed=40,
    flags=FLAGS, deployed=False,
    methods=(
        Method("fedavg", "FedAvg: the parties' MLP weights averaged, round after round "
               "(--estimator mlp)", _iterative(), **_ITERATIVE),
        Method("fedprox", "FedProx: FedAvg with a proximal term pulling local training to "
               "the average", _iterative(proximal=True), **_ITERATIVE),
        Method("feddf", "FedDF: FedAvg whose server distils the parties' models into the "
               "average on the public set", _iterative(distill=True), **_ITERATIVE),
        Method("fedkt-prox", "FedKT-Prox: FedKT's model as the first round of FedProx",
               _iterative(proximal=True, fedkt_first=True), **_ITERATIVE),
    ),
))

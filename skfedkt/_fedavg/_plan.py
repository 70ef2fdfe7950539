"""FedAvg's plan: the parameters of one fit, checked once and frozen. The party step and
the server step read the plan and nothing else of the estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sklearn.base import clone
from sklearn.neural_network import MLPClassifier

from .._engine._nets import final_step
from .._engine._plan import Plan
from .._engine._weights import check_averageable

if TYPE_CHECKING:  # the base class: the algorithm's own would import in a circle
    from .._base import BaseFederatedClassifier


@dataclass(frozen=True)
class FedAvgPlan(Plan):
    """What one fit of `FedAvgClassifier` runs (see `FedAvgPlan.of`): FedAvg, FedProx
    with a positive `proximal_mu`, FedDF with `distill_epochs`, and a one-shot algorithm
    as the first round with `init` (its own plan in `init_plan`)."""

    estimator_name = "FedAvgClassifier"

    estimator: Any
    n_rounds: int
    local_epochs: int
    proximal_mu: float
    distill_epochs: int
    init: BaseFederatedClassifier | None
    init_plan: Plan | None
    max_weight_norm: float | None = None

    @classmethod
    def of(cls, estimator: BaseFederatedClassifier) -> FedAvgPlan:
        """The plan of a `FedAvgClassifier`'s parameters; a model whose parameters
        cannot be averaged, and a first round whose model FedAvg cannot continue, are
        refused here, before any work."""
        model = base_estimator(estimator.estimator)
        check_averageable(model, "FedAvgClassifier", estimator.proximal_mu)
        if estimator.distill_epochs and not hasattr(model, "predict_proba"):
            raise ValueError(
                "FedAvgClassifier's distill_epochs (FedDF) labels the public set with the "
                "parties' mean class probabilities, which "
                f"{type(model).__name__}(loss={model.get_params().get('loss')!r}) does not "
                "give: use loss='log_loss' or an MLPClassifier, or distill_epochs=0."
            )
        init = None if estimator.init is None else clone(estimator.init)
        if init is not None:
            check_first_round(init, model)
        return cls(estimator=model, n_rounds=estimator.n_rounds,
                   local_epochs=estimator.local_epochs,
                   proximal_mu=float(estimator.proximal_mu),
                   distill_epochs=estimator.distill_epochs, init=init,
                   init_plan=None if init is None else init._plan_type.of(init),
                   max_weight_norm=(None if estimator.max_weight_norm is None
                                    else float(estimator.max_weight_norm)),
                   n_jobs=estimator.n_jobs, verbose=estimator.verbose)

    @property
    def upload_kind(self) -> str:
        # weights, or in a first round that algorithm's upload
        return "weights" if self.init_plan is None else self.init_plan.upload_kind

    @property
    def public_set_use(self) -> str | None:
        # plain FedAvg and FedProx use none (one given is ignored)
        if self.distill_epochs:
            return "distill_epochs distils on it, as FedDF"
        return None if self.init is None else "init's first round labels it"

    def uploaded_estimators(self, party: Any) -> list[Any]:
        # weights are arrays, which any upload file holds; a first round's models are
        # checked as that algorithm checks them
        return [] if self.init_plan is None else self.init_plan.uploaded_estimators(party)


def base_estimator(estimator: Any) -> Any:
    """FedAvg's model: the FedKT paper's MLP (two hidden layers of 100 ReLU units, Adam,
    batch 32) by default."""
    if estimator is None:
        return MLPClassifier(hidden_layer_sizes=(100, 100), batch_size=32)
    return estimator


# what must match between the first round's final model and FedAvg's model for its
# weights to start the rounds
_ARCHITECTURE = ("hidden_layer_sizes", "activation", "loss", "fit_intercept")


def check_first_round(init: Any, model: Any) -> None:
    """Refuse a first round whose final model FedAvg cannot continue: one-round
    algorithms of this package that distil into a model of `model`'s kind and shape."""
    runs_one_round = hasattr(init, "_plan_type") and not init.runs_rounds
    if not runs_one_round or not getattr(init, "distill", False):
        raise TypeError(
            "FedAvgClassifier's init runs the first round: a FedKTClassifier (or "
            "OneShotEnsembleClassifier) with distill=True, whose final model the rounds "
            f"continue; got {init!r}."
        )
    if getattr(init, "privacy", None) is not None:
        raise ValueError(
            "FedAvgClassifier's rounds send every party's weights without noise, so a "
            "private first round's guarantee would not cover the model: give init "
            f"privacy=None (got {init.privacy!r})."
        )
    final = init._base_estimators()[-1]
    # the models themselves, after any Pipeline steps
    final_model, rounds_model = final_step(final), final_step(model)
    params = (final_model.get_params(deep=False)
              if type(final_model) is type(rounds_model) else {})
    differing = [name for name in _ARCHITECTURE
                 if name in params and params[name] != rounds_model.get_params()[name]]
    if type(final_model) is not type(rounds_model) or differing:
        raise ValueError(
            f"FedAvgClassifier's init trains a final model the rounds cannot continue: "
            f"{final!r}, against the rounds' {model!r}"
            + (f" (they differ in {', '.join(differing)})" if differing else "")
            + ". Give init the same model as its final_estimator (or estimator)."
        )

"""FedAvg's plan: the parameters of one fit, checked once and frozen. The party step and
the server step read the plan and nothing else of the estimator."""

from dataclasses import dataclass

from sklearn.neural_network import MLPClassifier

from .._engine._plan import Plan
from .._engine._weights import check_averageable


@dataclass(frozen=True)
class FedAvgPlan(Plan):
    """What one fit of `FedAvgClassifier` runs (see `FedAvgPlan.of`)."""

    estimator_name = "FedAvgClassifier"

    estimator: object
    n_rounds: int
    local_epochs: int

    @classmethod
    def of(cls, estimator):
        """The plan of a `FedAvgClassifier`'s parameters; a model whose parameters
        cannot be averaged is refused here, before any work."""
        model = base_estimator(estimator.estimator)
        check_averageable(model, "FedAvgClassifier")
        return cls(estimator=model, n_rounds=estimator.n_rounds,
                   local_epochs=estimator.local_epochs, n_jobs=estimator.n_jobs,
                   verbose=estimator.verbose)


def base_estimator(estimator):
    """FedAvg's model: the FedKT paper's MLP (two hidden layers of 100 ReLU units, Adam,
    batch 32) by default."""
    if estimator is None:
        return MLPClassifier(hidden_layer_sizes=(100, 100), batch_size=32)
    return estimator

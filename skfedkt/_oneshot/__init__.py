"""One-shot federated ensembles with selection and distillation (Guha, Talwalkar, Smith).

- `_plan`: `OneShotPlan`, the parameters of one fit resolved and frozen; both steps
  read it and nothing else of the estimator.
- `_party`: what runs at a party: its local model and, for ``selection="cv"``, that
  model's score on a held-out share of its rows.
- `_payloads`: what crosses, typed: a party's upload, its local model.
- `_server`: what runs at the server: the selection of the ensemble among the parties'
  models, and its distillation into one final model on a public set.
- `_sums`: what a party sends in the sum, with secure aggregation on or off: its
  class counts and, where the server distils every party's model, its votes on the
  public set.
- `_classifier`: `OneShotEnsembleClassifier`, its parameters; `fit` runs both steps in
  one process, `fit_party` and `fit_server` one each with the deployment's checks.
- `_declaration`: its declaration to the registry (`skfedkt._registry`): its
  command-line flags and the configurations the experiment runner compares.
"""

from . import _declaration  # noqa: F401  (declares the algorithm to the registry)
from ._classifier import OneShotEnsembleClassifier

__all__ = ["OneShotEnsembleClassifier"]

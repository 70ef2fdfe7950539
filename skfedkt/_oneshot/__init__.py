"""One-shot federated ensembles with selection and distillation (Guha, Talwalkar, Smith).

- `_party`: what runs at a party: its local model and, for ``selection="cv"``, that
  model's score on a held-out share of its rows.
- `_server`: what runs at the server: the selection of the ensemble among the parties'
  models, and its distillation into a student on public data.
- `_classifier`: `OneShotEnsembleClassifier`, its parameters, `fit`, which runs both
  steps in one process, and prediction.
"""

from ._classifier import OneShotEnsembleClassifier

__all__ = ["OneShotEnsembleClassifier"]

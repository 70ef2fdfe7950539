"""DS-FL: distillation-based semi-supervised federated learning by soft labels on a
public set (Itahara et al.).

- `_party`: what runs at a party in every round: its model on its rows plus the
  public rows weighted by the soft labels, and its probabilities of the public set.
- `_payloads`: what crosses, typed: a party's upload and the server's message.
- `_server`: what runs at the server: the average of the parties' probabilities,
  sharpened into soft labels, when to stop, and the final model (the parties' vote or
  one model distilled on the public rows).
- `_sums`: what a party sends in the sum every round (its probabilities, its accuracy
  on its rows), with secure aggregation on or off, and the server's check of their
  total.
- `_classifier`: `DSFLClassifier`, its parameters, and the hooks through which the
  base class's `fit` (`skfedkt._base`) runs the rounds of both steps in one process.
- `_declaration`: its declaration to the registry (`skfedkt._registry`): its
  command-line flags and the configurations the experiment runner compares.
"""

from . import _declaration  # noqa: F401  (declares the algorithm to the registry)
from ._classifier import DSFLClassifier

__all__ = ["DSFLClassifier"]

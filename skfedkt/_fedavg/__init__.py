"""FedAvg: federated averaging of the parameters of incrementally trained models
(McMahan et al., 2017), the iterative baseline of the FedKT paper.

- `_party`: what runs at a party in every round: its clone started from the global
  weights (the shared initialisation in round 0), trained for a few epochs on its rows.
- `_payloads`: what the server sends back, typed: its message.
- `_server`: what runs at the server: the average of the parties' weights, weighted by
  their rows, and when to stop; the final model carries the last average.
- `_sums`: what a round sends in the sum, with secure aggregation on or off: the
  parties' weights times their rows, within a bound each party enforces.
- `_classifier`: `FedAvgClassifier`, its parameters, and `fit`, which runs the rounds of
  both steps in one process.
- `_declaration`: its declaration to the registry (`skfedkt._registry`): its
  command-line flags and the configurations the experiment runner compares.
"""

from . import _declaration  # noqa: F401  (declares the algorithm to the registry)
from ._classifier import FedAvgClassifier

__all__ = ["FedAvgClassifier"]

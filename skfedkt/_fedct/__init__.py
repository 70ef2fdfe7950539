"""FedCT: federated co-training by sharing hard labels on a public set (Abourayya et al.).

- `_party`: what runs at a party in every round: its model on its rows plus the
  consensus-labelled public rows, and its (bit-flipped) labels of the public set.
- `_payloads`: what crosses, typed: a party's upload and the server's message.
- `_server`: what runs at the server: the consensus of the parties' labels, when to stop,
  and the final voting classifier of the parties' models.
- `_sums`: what a party sends in the sum every round (its labels as counts, its
  training accuracy), with secure aggregation on or off, and the server's check of
  their total.
- `_classifier`: `FedCTClassifier`, its parameters, and the hooks through which the
  base class's `fit` (`skfedkt._base`) runs the rounds of both steps in one process.
- `_declaration`: its declaration to the registry (`skfedkt._registry`): its
  command-line flags and the configurations the experiment runner compares.
"""

from . import _declaration  # noqa: F401  (declares the algorithm to the registry)
from ._classifier import FedCTClassifier

__all__ = ["FedCTClassifier"]

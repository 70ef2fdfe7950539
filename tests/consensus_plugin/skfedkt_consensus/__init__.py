"""A test-only algorithm of DS-FL's shape (Itahara et al., 2020), written as a
contributor writes one from ``doc/extending.rst``: its package, registered by
importing it, and nothing edited elsewhere.

- `_plan`, `_payloads`: its parameters, frozen, and what its uploads and messages hold.
- `_party`: each round, every party's model fit on its rows plus the public rows the
  last consensus labels (one tier of `fit_clones`), and its class probabilities on the
  public set (a float matrix).
- `_server`: each round, the probabilities averaged and sharpened into the next
  consensus; after the last, the final model.
- `_classifier`: `ConsensusDistillClassifier`, its parameters, checks and declarations.
- `_declaration`: its declaration to the registry, with a ``--rounds`` flag that FedCT
  also declares.
"""

from . import _declaration  # noqa: F401  (declares the algorithm to the registry)
from ._classifier import ConsensusDistillClassifier

__all__ = ["ConsensusDistillClassifier"]

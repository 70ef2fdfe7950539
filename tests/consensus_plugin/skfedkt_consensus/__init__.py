"""A test-only algorithm of DS-FL's shape (Itahara et al., 2020), written as a
contributor writes one from ``doc/extending.rst``: its package, registered by
importing it, and nothing edited elsewhere.

- `_classifier`: the plan and `ConsensusDistillClassifier`, whose party step shares
  class probabilities on the public set (a float matrix) every round, and whose server
  averages and sharpens them into the consensus the next round learns.
- `_declaration`: its declaration to the registry, with a ``--rounds`` flag that FedCT
  also declares.
"""

from . import _declaration  # noqa: F401  (declares the algorithm to the registry)
from ._classifier import ConsensusDistillClassifier

__all__ = ["ConsensusDistillClassifier"]

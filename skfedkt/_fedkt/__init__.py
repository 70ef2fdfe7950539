"""FedKT: one-shot federated learning by two-tier knowledge transfer (Li, He and Song).

- `_plan`: `FedKTPlan`, the parameters of one fit resolved, checked and frozen, and what
  both tiers do with them (the rows they label, their noise, their learners' targets);
  both steps read it and nothing else of the estimator.
- `_party`: what runs at a party (Algorithm 1, lines 2-13): teachers on the party's
  rows, their votes on the public set, the students it uploads.
- `_payloads`: what crosses, typed: a party's upload, its students.
- `_sums`: what a party sends in the sum (its students' votes, its class counts) and
  the server's vote from their total, added in the clear or securely; each party's
  weight in it.
- `_server`: what runs at the server (lines 14-22): the students' pooled vote on the
  public set, the final model, the privacy accounting.
- `_votes`: `SoftVotes` and `HardVotes`, its ``voting`` parameter.
- `_classifier`: `FedKTClassifier`, its parameters; `fit` runs both steps in one
  process, `fit_party` and `fit_server` one each with the deployment's checks.
- `_declaration`: its declaration to the registry (`skfedkt._registry`): its
  command-line flags and the configurations the experiment runner compares.
"""

from . import _declaration  # noqa: F401  (declares the algorithm to the registry)
from ._classifier import FedKTClassifier
from ._votes import HardVotes, SoftVotes

__all__ = ["FedKTClassifier", "HardVotes", "SoftVotes"]

"""FedKT: one-shot federated learning by two-tier knowledge transfer (Li, He and Song).

- `_party`: what runs at a party (Algorithm 1, lines 2-13): teachers on the party's
  rows, their votes on the public data, the students it uploads.
- `_server`: what runs at the server (lines 14-22): the students' pooled vote on the
  public data, the final model, the privacy accounting.
- `_votes`: `SoftVotes` and `HardVotes`, its ``voting`` parameter.
- `_classifier`: `FedKTClassifier`, its parameters and options, and `fit`, which runs
  both steps in one process.
"""

from ._classifier import FedKTClassifier
from ._votes import HardVotes, SoftVotes

__all__ = ["FedKTClassifier", "HardVotes", "SoftVotes"]

"""Privacy: what the mechanisms guarantee, and what an attacker actually learns.

- Mechanisms (`ServerNoise`, `DistributedNoise`, `PartyNoise`, `BitFlips`,
  `TeacherVotes`): the noise FedKT and FedCT add, passed as their ``privacy``
  parameter.
- Accounting (`pate_epsilon`, `data_independent_epsilon`, `bit_flip_epsilon`, ...): the
  epsilon a noise mechanism guarantees, with its stated sensitivity and accountant.
- Auditing (`membership_audit`): membership-inference attacks against every release of
  a fitted estimator (the parties' uploads, the final model), next to that epsilon.

Examples
--------
`membership_audit` on a one-shot ensemble of 1-nearest-neighbour models, each of whose
uploads keeps its party's rows:

>>> import numpy as np
>>> from sklearn.datasets import make_classification
>>> from sklearn.neighbors import KNeighborsClassifier
>>> from skfedkt import OneShotEnsembleClassifier
>>> from skfedkt.privacy import membership_audit
>>> X, y = make_classification(600, flip_y=0.3, random_state=0)
>>> X_train, y_train, X_holdout, y_holdout = X[:300], y[:300], X[300:], y[300:]
>>> party = np.arange(300) % 3
>>> leaky = OneShotEnsembleClassifier(KNeighborsClassifier(1), selection="all")
>>> leaky = leaky.fit(X_train, y_train, groups=party)
>>> audit = membership_audit(leaky, X_train, y_train, groups=party,
...                          X_holdout=X_holdout, y_holdout=y_holdout, random_state=0)
>>> print(f"{audit.auc('upload', 'loss'):.1f}")  # each 1-NN upload keeps its rows
0.7

`party_membership_audit`: a hospital attacks its own FedKT upload before sending it:

>>> from sklearn.datasets import load_breast_cancer
>>> from skfedkt import FedKTClassifier
>>> from skfedkt.privacy import party_membership_audit
>>> X, y = load_breast_cancer(return_X_y=True)
>>> audit = party_membership_audit(
...     FedKTClassifier(random_state=0), X[:200], y[:200], party="h0", classes=[0, 1],
...     X_unlabeled=X[200:300], X_holdout=X[300:], y_holdout=y[300:], n_reference=2,
...     random_state=0)
>>> [(row["release"], row["attack"]) for row in audit.summary()]
[('upload', 'loss'), ('upload', 'lira')]
"""

from .._audit import membership_audit, party_membership_audit
from .._audit_results import AttackResult, MembershipAudit, dp_auc_bound
from .._privacy._accounting import (
    DEFAULT_ORDERS,
    data_independent_epsilon,
    epsilon_from_log_moments,
    laplace_epsilon,
    pate_epsilon,
    pate_epsilon_data_independent,
    pate_log_moments,
)
from .._privacy._bit_flips import bit_flip_epsilon, bit_flip_probability
from .._privacy._gaussian import (
    gaussian_epsilon,
    gaussian_sigma,
    gnmax_epsilon,
    unanimous_flip_probability,
)
from .._privacy._reports import (
    BitFlipPrivacyReport,
    guarantee_strength,
    PrivacyReport,
    TeacherVotesPrivacyReport,
)
from .._privacy._mechanisms import (
    BitFlips,
    DistributedNoise,
    PartyNoise,
    ServerNoise,
    TeacherVotes,
)
from .._privacy._release import Release

__all__ = [
    "DEFAULT_ORDERS",
    "AttackResult",
    "BitFlips",
    "DistributedNoise",
    "BitFlipPrivacyReport",
    "MembershipAudit",
    "PartyNoise",
    "PrivacyReport",
    "Release",
    "ServerNoise",
    "TeacherVotes",
    "TeacherVotesPrivacyReport",
    "bit_flip_epsilon",
    "bit_flip_probability",
    "data_independent_epsilon",
    "dp_auc_bound",
    "epsilon_from_log_moments",
    "gaussian_epsilon",
    "gaussian_sigma",
    "gnmax_epsilon",
    "guarantee_strength",
    "laplace_epsilon",
    "membership_audit",
    "party_membership_audit",
    "pate_epsilon",
    "pate_epsilon_data_independent",
    "pate_log_moments",
    "unanimous_flip_probability",
]

"""Privacy: what the mechanisms guarantee, and what an attacker actually learns.

- Mechanisms (`ServerNoise`, `PartyNoise`, `BitFlips`, `TeacherVotes`): the noise FedKT
  and FedCT add, passed as their ``privacy`` parameter.
- Accounting (`pate_epsilon`, `data_independent_epsilon`, `bit_flip_epsilon`, ...): the
  epsilon a noise mechanism guarantees, with its stated sensitivity and accountant.
- Auditing (`membership_audit`): membership-inference attacks against every release of
  a fitted estimator (the parties' uploads, the final model), next to that epsilon.
"""

from .._audit import (
    AttackResult,
    MembershipAudit,
    dp_auc_bound,
    membership_audit,
    party_membership_audit,
)
from .._privacy._accounting import (
    DEFAULT_ORDERS,
    BitFlipPrivacyReport,
    PrivacyReport,
    TeacherVotesPrivacyReport,
    bit_flip_epsilon,
    bit_flip_probability,
    data_independent_epsilon,
    epsilon_from_log_moments,
    gaussian_epsilon,
    gaussian_sigma,
    gnmax_epsilon,
    guarantee_strength,
    laplace_epsilon,
    pate_epsilon,
    pate_epsilon_data_independent,
    pate_log_moments,
    unanimous_flip_probability,
)
from .._privacy._mechanisms import BitFlips, PartyNoise, ServerNoise, TeacherVotes
from .._privacy._release import Release

__all__ = [
    "DEFAULT_ORDERS",
    "AttackResult",
    "BitFlips",
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

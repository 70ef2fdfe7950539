"""FedCT's plan: the parameters of one fit, checked once and frozen. The party step and
the server step read the plan and nothing else of the estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._engine._party_models import PartyModels, checked_entries, final_of
from .._engine._plan import Plan
from .._engine._seeds import public_queries
from .._privacy._accounting import ONE_VOTE_L2
from .._privacy._gaussian import gaussian_sigma
from .._privacy._mechanisms import BitFlips, TeacherVotes

if TYPE_CHECKING:  # the base class: the algorithm's own would import in a circle
    from .._base import BaseFederatedClassifier

# standard deviations beyond which no noise draw of an honest party plausibly lies
# (probability below 1e-20 per count)
PLAUSIBLE_NOISE = 10


@dataclass(frozen=True)
class FedCTPlan(PartyModels, Plan):
    """What one fit of `FedCTClassifier` runs (see `FedCTPlan.of`)."""

    estimator_name = "FedCTClassifier"
    upload_kind = "final model"

    estimator: Any
    n_rounds: int
    tol: float
    n_iter_no_change: int
    voting: str
    privacy: BitFlips | TeacherVotes | None
    #: the final model: a clone of it fitted on the public rows with the last consensus
    #: (``distill=True``), or None for the parties' vote
    final: Any = None

    @property
    def distill(self) -> bool:
        return self.final is not None

    @classmethod
    def of(cls, estimator: BaseFederatedClassifier) -> FedCTPlan:
        """The plan of a `FedCTClassifier`'s parameters; every entry of a list or dict
        `estimator` must be an estimator, and a distilled model needs a consensus to
        learn and one estimator to learn it."""
        entries = checked_entries(estimator)
        return cls(estimator=entries, n_rounds=estimator.n_rounds, tol=estimator.tol,
                   n_iter_no_change=estimator.n_iter_no_change, voting=estimator.voting,
                   privacy=estimator.privacy,
                   final=final_of(estimator, "the last round's consensus"),
                   n_jobs=estimator.n_jobs, verbose=estimator.verbose)

    @property
    def party_noise(self) -> str | None:
        return None if self.privacy is None else type(self.privacy).__name__

    @property
    def teacher_votes(self) -> TeacherVotes | None:
        """The `TeacherVotes` of the fit, or None (bit flips, or no privacy)."""
        return self.privacy if isinstance(self.privacy, TeacherVotes) else None

    @property
    def known_teacher_votes(self) -> TeacherVotes:
        """The `TeacherVotes` of a fit that shares teacher votes (what reads it runs
        only there)."""
        votes = self.teacher_votes
        if votes is None:
            raise RuntimeError("FedCT shares no teacher votes without TeacherVotes.")
        return votes

    def queries(self, n_public: int, root: int) -> np.ndarray:
        """The public rows the parties vote on with `TeacherVotes`, in every round."""
        return public_queries(n_public, min(self.known_teacher_votes.n_queries, n_public),
                              root)

    def vote_sigma(self, n_queries: int) -> float:
        """The noise on every teacher vote count with `n_queries` queries (`queries`):
        the fit's largest number of noisy histograms, every query in every round,
        composes to the budget."""
        votes = self.known_teacher_votes
        n_releases = n_queries * max(self.n_rounds, 1)
        return gaussian_sigma(n_releases, epsilon=votes.epsilon, delta=votes.delta,
                              sensitivity=ONE_VOTE_L2)

    def vote_bound(self, n_queries: int) -> float:
        """The largest magnitude of an honest party's noisy vote count with `n_queries`
        queries: every teacher's vote plus `PLAUSIBLE_NOISE` standard deviations of its
        noise (`vote_sigma`)."""
        return (self.known_teacher_votes.n_teachers
                + PLAUSIBLE_NOISE * self.vote_sigma(n_queries))

    def sensitivity(self, n_public: int) -> float:
        """The bits one training example can change in a party's shared labels of
        `n_public` rows with `BitFlips`: the given one, else the worst case
        ``2 * n_public``."""
        given = self.privacy.sensitivity if isinstance(self.privacy, BitFlips) else None
        return 2.0 * n_public if given is None else float(given)

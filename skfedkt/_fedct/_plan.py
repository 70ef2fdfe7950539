"""FedCT's plan: the parameters of one fit, checked once and frozen. The party step and
the server step read the plan and nothing else of the estimator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from .._engine._compat import InvalidParameterError
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
class FedCTPlan(Plan):
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
        entries = estimator.estimator
        if isinstance(entries, (list, dict)):
            for key, entry in (entries.items() if isinstance(entries, dict)
                               else enumerate(entries)):
                if not (hasattr(entry, "fit") and hasattr(entry, "predict")):
                    raise InvalidParameterError(
                        f"The 'estimator' parameter of {type(estimator).__name__} must "
                        f"hold estimators with fit and predict; entry {key!r} is {entry!r} "
                        f"of type {type(entry).__name__}."
                    )
        return cls(estimator=entries, n_rounds=estimator.n_rounds, tol=estimator.tol,
                   n_iter_no_change=estimator.n_iter_no_change, voting=estimator.voting,
                   privacy=estimator.privacy, final=final_of(estimator),
                   n_jobs=estimator.n_jobs, verbose=estimator.verbose)

    def party_estimators(self, parties: list[Any]) -> list[Any]:
        """One (unfitted) estimator per party of `parties` (the sorted party labels)."""
        if isinstance(self.estimator, dict):
            missing = [p for p in parties if p not in self.estimator]
            unknown = [p for p in self.estimator if p not in parties]
            if missing or unknown:
                raise ValueError(
                    "estimator must have one entry per party of groups: "
                    f"missing {missing}, unknown {unknown}; parties are {parties}."
                )
            return [self.estimator[p] for p in parties]
        if isinstance(self.estimator, list):
            if len(self.estimator) != len(parties):
                raise ValueError(
                    f"estimator is a list of {len(self.estimator)} estimators but groups "
                    f"has {len(parties)} parties; give one per party, in the order "
                    f"of the sorted party labels {parties}."
                )
            return self.estimator
        return base_estimators(self.estimator) * len(parties)

    def own_estimator(self, party: Any) -> Any:
        """The estimator of `party` on its own machine, which knows only its name."""
        if isinstance(self.estimator, list):
            raise ValueError(
                "A list estimator is aligned with the sorted party labels, which a party "
                "does not know: give a dict keyed by party name to fit_party."
            )
        if isinstance(self.estimator, dict):
            if party not in self.estimator:
                raise ValueError(
                    f"estimator has no entry for party {party!r}; its keys are "
                    f"{list(self.estimator)}."
                )
            return self.estimator[party]
        return base_estimators(self.estimator)[0]

    @property
    def party_noise(self) -> str | None:
        return None if self.privacy is None else type(self.privacy).__name__

    def uploaded_estimators(self, party: Any) -> list[Any]:
        return [self.own_estimator(party)]

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


def base_estimators(estimator: Any) -> list[Any]:
    """The estimators of FedCT's `estimator` parameter: a decision tree by default."""
    if estimator is None:
        return [DecisionTreeClassifier()]
    if isinstance(estimator, dict):
        return list(estimator.values())
    if isinstance(estimator, list):
        return estimator
    return [estimator]


def final_of(estimator: BaseFederatedClassifier) -> Any:
    """The final model of a `FedCTClassifier` that distils (None where it does not): its
    `final_estimator`, or its one base estimator; refused, naming the parameter, where
    there is no consensus to learn or no one estimator to learn it with."""
    if not estimator.distill:
        return None
    if estimator.n_rounds == 0:
        raise ValueError("distill=True fits a model on the last round's consensus of the "
                         "public rows, and n_rounds=0 makes none: set n_rounds to 1 or "
                         "more, or distill=False.")
    if estimator.final_estimator is not None:
        return estimator.final_estimator
    if isinstance(estimator.estimator, (list, dict)):
        raise ValueError("distill=True with a list or dict estimator (one kind of model "
                         "per party) needs the final model's kind: pass final_estimator.")
    return base_estimators(estimator.estimator)[0]

"""The plan of a fit: an algorithm's parameters resolved, checked and frozen once, before
any work. An algorithm's party and server steps read their plan and nothing else of the
estimator, so that what runs where is plain from their arguments."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict, TypeVar

_PlanT = TypeVar("_PlanT", bound="Plan")


class CloneFitting(TypedDict):
    """The keywords of the engine's clone fitting (`Plan.clone_fitting`)."""

    n_jobs: int | None
    verbose: int
    say: Callable[[str], None]


@dataclass(frozen=True)
class Plan:
    """What every algorithm's plan holds: how its clone fits run in parallel and how
    much it prints. Subclasses add the algorithm's own parameters and ``of``, which
    builds the plan from an estimator's parameters."""

    n_jobs: int | None
    verbose: int

    # the estimator whose fit the plan runs, in what `say` prints
    estimator_name: ClassVar[str] = ""

    @classmethod
    def of(cls: type[_PlanT], estimator: Any) -> _PlanT:
        """The plan of `estimator`'s parameters, resolved and checked before any work
        (each algorithm's plan defines it)."""
        raise NotImplementedError(f"{cls.__name__} must define `of(estimator)`.")

    @property
    def clone_fitting(self) -> CloneFitting:
        """The keywords of the engine's clone fitting: the jobs, its own verbosity one
        level below the plan's, and where it says which path trained torch networks."""
        return CloneFitting(n_jobs=self.n_jobs, verbose=max(self.verbose - 1, 0),
                            say=self.say)

    def say(self, message: str) -> None:
        """Print a stage of the fit when ``verbose`` is set."""
        if self.verbose:
            print(f"[{self.estimator_name}] {message}", flush=True)

    # --- what the parameters imply for the steps, which the base class reads ------------

    @property
    def upload_kind(self) -> str:
        """What a party's upload holds, in messages ("students", "local model"); a plan
        may set it as a constant."""
        return "upload"

    @property
    def public_set_use(self) -> str | None:
        """What the steps do with the agreed public set, in a few words for a refusal
        ("the teachers label it"); None where they use none. Where it is needed, `fit`
        without one takes the training rows, with a warning, and the deployed steps
        refuse to run without it."""
        return "the parties' models label it"

    @property
    def party_noise(self) -> str | None:
        """The privacy mechanism whose noise a party draws (`fit_party` warns without a
        secret ``party_seed``), or None."""
        return None

    @property
    def noisy_sums(self) -> bool:
        """Whether the parties' sums carry privacy noise of their own, which the
        accountant counts round by round: then a round of a secure deployment may have
        other survivors than the last (`InputLedger`). By default, where a party draws
        noise (`party_noise`)."""
        return self.party_noise is not None

    def uploaded_estimators(self, party: Any) -> list[Any]:
        """The (unfitted) estimators `party`'s upload will hold, which `fit_party`
        checks skops can write before any training; none by default."""
        return []

"""The plan of a fit: an algorithm's parameters resolved, checked and frozen once, before
any work. An algorithm's party and server steps read their plan and nothing else of the
estimator, so that what runs where is plain from their arguments."""

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Plan:
    """What every algorithm's plan holds: how its clone fits run in parallel and how
    much it prints. Subclasses add the algorithm's own parameters and ``of``, which
    builds the plan from an estimator's parameters."""

    n_jobs: "int | None"
    verbose: int

    # the estimator whose fit the plan runs, in what `say` prints
    estimator_name: ClassVar[str] = ""

    @property
    def clone_fitting(self):
        """The keywords of the engine's clone fitting: the jobs, its own verbosity one
        level below the plan's, and where it says which path trained torch networks."""
        return dict(n_jobs=self.n_jobs, verbose=max(self.verbose - 1, 0), say=self.say)

    def say(self, message):
        """Print a stage of the fit when ``verbose`` is set."""
        if self.verbose:
            print(f"[{self.estimator_name}] {message}", flush=True)

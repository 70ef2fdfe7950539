"""FedKT's plan: the parameters of one fit, resolved and checked once, frozen, and what
both tiers do with them (which rows they label, their noise, what their learners learn).

The party step and the server step read the plan and nothing else of the estimator.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.tree import DecisionTreeClassifier

from .._engine._compat import num_samples
from .._engine._augment import jittered_rows
from .._engine._class_codes import sample_weight_param, soft_label_rows
from .._engine._fitting import Task
from .._engine._plan import Plan
from .._engine._seeds import derived_random_state, public_queries
from .._engine._rows import stack_rows
from .._engine._voting import plurality_vote
from .._privacy._mechanisms import DistributedNoise, PartyNoise, ServerNoise, add_noise
from ._votes import HardVotes, SoftVotes

if TYPE_CHECKING:  # the base class: the algorithm's own would import in a circle
    from .._base import BaseFederatedClassifier

# the paper's teachers per partition (its t). With n_teachers="auto" a party trains from
# FEWEST_TEACHERS to PAPER_TEACHERS, each on at least TEACHER_ROWS rows: fewer than three
# let a membership attack on census uploads above an AUC of 0.55 (benchmarks/
# bench_membership.py --uploads-only: LiRA 0.59 with one teacher, 0.56 with two, 0.54
# with three, 0.52 with five)
PAPER_TEACHERS = 5
FEWEST_TEACHERS = 3
TEACHER_ROWS = 100


@dataclass(frozen=True)
class FedKTPlan(Plan):
    """What one FedKT fit runs: every parameter of `FedKTClassifier`, the defaults and
    the votes' "auto" parts resolved (see `FedKTPlan.of`)."""

    estimator_name = "FedKTClassifier"
    upload_kind = "students"

    teacher: BaseEstimator
    student: BaseEstimator
    final: BaseEstimator
    n_students: int
    n_teachers: int | str
    votes: SoftVotes | HardVotes
    student_data: str
    soft_labels: str | None
    distill: bool
    privacy: ServerNoise | PartyNoise | DistributedNoise | None

    @classmethod
    def of(cls, estimator: BaseFederatedClassifier) -> FedKTPlan:
        """The plan of a `FedKTClassifier`'s parameters; refuses combinations that
        break privacy or cannot be carried out, before any work."""
        teacher, student, final = learners(estimator)
        privacy = estimator.privacy
        plan = cls(
            teacher=teacher, student=student, final=final,
            n_students=estimator.n_students, n_teachers=estimator.n_teachers,
            votes=resolved_votes(estimator.voting, privacy),
            student_data=estimator.student_data, soft_labels=estimator.soft_labels,
            distill=estimator.distill, privacy=privacy, n_jobs=estimator.n_jobs,
            verbose=estimator.verbose,
        )
        plan._check()
        return plan

    @property
    def level(self) -> str:
        """FedKT's privacy level: "L0" (no noise), "L1" (server) or "L2" (parties)."""
        return "L0" if self.privacy is None else self.privacy.level

    @property
    def server_noise_level(self) -> str | None:
        """The tier whose histogram the server adds noise to (`vote_targets`): "L1"
        with `ServerNoise`; None where the parties' sums carry the noise
        (`DistributedNoise`) or no noise is added there."""
        return "L1" if isinstance(self.privacy, ServerNoise) else None

    @property
    def party_noise(self) -> str | None:
        return "PartyNoise" if self.level == "L2" else None

    @property
    def noisy_sums(self) -> bool:
        return self.level == "L2" or isinstance(self.privacy, DistributedNoise)

    def uploaded_estimators(self, party: Any) -> list[Any]:
        return [self.student]

    @property
    def soft_votes(self) -> bool:
        return isinstance(self.votes, SoftVotes)

    @property
    def pooling(self) -> str:
        return self.votes.pooling if isinstance(self.votes, SoftVotes) else "sum"

    @property
    def match_shares(self) -> bool:
        return isinstance(self.votes, SoftVotes) and bool(self.votes.match_shares)

    @property
    def releases_counts(self) -> bool:
        """Whether the parties send noisy class counts: at L2, where the server's soft
        votes use counts (prior-corrected pooling or share matching)."""
        return self.level == "L2" and isinstance(self.votes, SoftVotes) and (
            self.votes.pooling == "prior-corrected" or bool(self.votes.match_shares))

    @property
    def mechanism(self) -> ServerNoise | PartyNoise | DistributedNoise:
        """The privacy mechanism of a fit that adds noise (what reads it runs only at L1
        and L2)."""
        if self.privacy is None:
            raise RuntimeError("FedKT adds no noise at L0.")
        return self.privacy

    @property
    def counts_gamma(self) -> float:
        """Inverse noise scale of the parties' class counts where they release them."""
        assert isinstance(self.privacy, PartyNoise), "only parties release class counts"
        counts_gamma = self.privacy.counts_gamma
        return self.privacy.gamma if counts_gamma == "gamma" else counts_gamma

    def teachers_for(self, n_rows: int) -> int:
        """Teachers per partition of a party with `n_rows` rows: `n_teachers`, or with
        ``"auto"`` as many as give each at least `TEACHER_ROWS` rows, from
        `FEWEST_TEACHERS` (or one a row, for fewer rows) to `PAPER_TEACHERS`; the
        paper's `PAPER_TEACHERS` with hard votes or noise, where the count is part of
        the algorithm or of its privacy analysis."""
        if not isinstance(self.n_teachers, str):  # a number, not "auto"
            return self.n_teachers
        if not self.soft_votes or self.privacy is not None:
            return PAPER_TEACHERS
        fewest = min(FEWEST_TEACHERS, n_rows)
        return int(np.clip(n_rows // TEACHER_ROWS, fewest, PAPER_TEACHERS))

    def learns_soft_labels(self, tier: str) -> bool:
        """Whether the learners of `tier` ("students" or "final") learn vote
        distributions rather than winning classes."""
        return self.soft_labels == "all" or (tier == "students"
                                             and self.soft_labels == "students")

    def _check(self) -> None:
        private, votes = f"privacy={self.privacy!r}", self.votes
        undistilled = "distill=False predicts with the students' pooled votes on new rows"
        if not self.distill and self.level == "L1":
            raise ValueError(
                f"{undistilled}, but at L1 only the server's noisy labels of the public "
                f"set are private, not those votes ({private}). Use distill=True, or "
                "privacy None or PartyNoise."
            )
        if isinstance(votes, SoftVotes) and not _counts_covered(self.privacy):
            # "auto" resolves to the safe part: an unsafe one was asked for
            for part, value, unsafe in (("pooling", votes.pooling, "prior-corrected"),
                                        ("match_shares", votes.match_shares, True)):
                if value == unsafe:
                    raise ValueError(
                        f"SoftVotes({part}={unsafe!r}) uses every party's class counts, "
                        f"which no privacy accountant covers with {private}, so it is "
                        f"refused. Leave {part}='auto', or use PartyNoise with "
                        "counts_gamma, which releases the counts with noise."
                    )
        if self.level == "L2" and self.student_data == "party+public":
            raise ValueError(
                "student_data='party+public' trains every student on its party's rows, but "
                "PartyNoise needs students that learn from noisy teacher votes only. Use "
                "student_data='public' with PartyNoise."
            )
        if self.soft_labels is not None:
            tiers = [("student_estimator", self.student, "the students")]
            if self.soft_labels == "all" and self.distill:
                tiers.append(("final_estimator", self.final, "the final model"))
            for name, estimator, learner in tiers:
                if sample_weight_param(estimator) is None:
                    raise ValueError(
                        f"soft_labels={self.soft_labels!r} teaches {learner} vote "
                        f"distributions through sample weights, but the {name} "
                        f"{type(estimator).__name__} takes no sample_weight in fit. Use "
                        "soft_labels=None."
                    )

    def tier_rows(self, X_public: Any, root: int) -> tuple[Any, np.ndarray, np.ndarray]:
        """The rows the tiers label, and which of them each tier labels.

        Returns ``(X_labelled, party_rows, server_rows)``: the public rows followed by
        their jittered copies (up to the votes' `min_public_rows`), and the indices into
        them that the party tier and the server tier label. The noisy tier labels only its
        queries, drawn from the public rows: the server with ``ServerNoise``, the parties
        with ``PartyNoise``; the other tier labels every row, copies included, and so do
        both tiers without noise.
        """
        synthetic = jittered_rows(X_public, self.votes.min_public_rows,
                                  derived_random_state(root, "synthetic"))
        X_labelled = X_public if synthetic is None else stack_rows(X_public, synthetic)
        every_row = np.arange(num_samples(X_labelled))
        if self.privacy is None:
            return X_labelled, every_row, every_row
        n_public = num_samples(X_public)
        queries = public_queries(n_public, self.n_queries(n_public), root)
        if self.level == "L2":
            return X_labelled, queries, every_row
        return X_labelled, every_row, queries

    def n_queries(self, n_public: int) -> int:
        """How many public examples the noisy tier labels: `query_fraction` of them. A
        larger fraction adds queries and never swaps them (`public_queries`), so the
        privacy cost grows with it."""
        return max(1, round(self.mechanism.query_fraction * n_public))

    def vote_targets(self, histograms: Iterable[np.ndarray], level: str | None,
                     soft_labels: bool, noise_rng: np.random.RandomState,
                     tie_rng: np.random.RandomState) -> Iterator[np.ndarray]:
        """What a tier's learner is taught from each of its vote histograms.

        Laplace noise of scale 1/gamma, or Gaussian noise of standard deviation 1/gamma,
        is added to every count at the tier of `level` only (None: the histograms
        carry their noise already); then either the (noisy) vote distribution, clipped
        at zero and normalised, or the plurality label.
        """
        noisy = self.level == level
        for votes in histograms:
            if noisy:
                votes = add_noise(votes, noise=self.mechanism.noise, gamma=self.mechanism.gamma,
                                  random_state=noise_rng)
            if soft_labels:
                votes = np.clip(votes, 0, None)
                totals = votes.sum(axis=1, keepdims=True)
                yield np.divide(votes, totals, out=np.zeros_like(votes, dtype=float),
                                where=totals > 0)
            else:
                yield plurality_vote(votes, tie_rng)


def learners(estimator: BaseFederatedClassifier) -> tuple[Any, Any, Any]:
    """The teacher, student and final estimators of a `FedKTClassifier`: a decision tree
    by default, the students like the teachers, the final model like the students."""
    teacher = DecisionTreeClassifier() if estimator.estimator is None else estimator.estimator
    student = teacher if estimator.student_estimator is None else estimator.student_estimator
    final = student if estimator.final_estimator is None else estimator.final_estimator
    return teacher, student, final


def resolved_votes(voting: str | SoftVotes | HardVotes,
                   privacy: ServerNoise | PartyNoise | DistributedNoise | None,
                   ) -> SoftVotes | HardVotes:
    """The votes that run: `voting` as an object ("soft" and "hard" are ``SoftVotes()``
    and ``HardVotes()``), its "auto" parts resolved: a count-based correction where the
    counts may be used (no noise, or `PartyNoise` releasing them), else a plain sum."""
    if isinstance(voting, str):
        votes = SoftVotes() if voting == "soft" else HardVotes()
    else:
        votes = clone(voting)
    if isinstance(votes, SoftVotes):
        counted = _counts_covered(privacy)
        if votes.pooling == "auto":
            votes.set_params(pooling="prior-corrected" if counted else "sum")
        if votes.match_shares == "auto":
            votes.set_params(match_shares=counted)
    return votes


def _counts_covered(privacy: ServerNoise | PartyNoise | DistributedNoise | None) -> bool:
    """Whether the server may use the parties' class counts: without noise, or with
    `PartyNoise` that releases them with noise of its own (an L1 party's counts are
    all of it: no noise small enough to keep them useful covers them)."""
    return privacy is None or getattr(privacy, "counts_gamma", None) is not None


def target_task(estimator: Any, targets: np.ndarray, rows: np.ndarray, n_rows: int,
                name: str) -> Task:
    """The Task (called `name`) that teaches `estimator` the targets of rows `rows` of
    a matrix of `n_rows` rows.

    `targets` are labels (``-1`` for none) or per-row distributions (soft labels,
    passed as sample weights).
    """
    if targets.ndim == 2:
        pairs, labels, weights = soft_label_rows(targets)
        return Task(estimator, labels, rows[pairs], weights, name=name)
    labelled = targets >= 0
    # every row: None, with which the engine copies nothing
    every_row = labelled.all() and np.array_equal(rows, np.arange(n_rows))
    return Task(estimator, targets[labelled].astype(np.int64),
                None if every_row else rows[labelled], name=name)

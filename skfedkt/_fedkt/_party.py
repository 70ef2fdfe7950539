"""FedKT's party step: what runs on a party's machine (Algorithm 1, lines 2-13).

Functions of a frozen `FedKTPlan` and the party's data: `party_step` on one party's
machine, `party_tier` for the teachers and students of many parties in one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any, NamedTuple

import numpy as np

from .._engine._compat import num_samples, safe_indexing
from .._engine._context import SumParties
from .._deployment._upload import PartyUpload
from .._engine._class_codes import ClassCodeModel, code_dtype
from .._engine._fitting import Task, TierJob, fit_clones, group_votes, iter_clone_fits
from .._engine._rows import StackedRows
from .._engine._seeds import draw_seeds
from .._engine._validation import parties_in_words
from .._engine._voting import class_shares
from .._privacy._accounting import (
    DEFAULT_ORDERS,
    ONE_VOTE_L2,
    _largest_order_noted,
    data_independent_epsilon,
    epsilon_from_log_moments,
    pate_log_moments,
)
from .._privacy._gaussian import gaussian_log_moments, gdp_epsilon, gnmax_log_moments
from .._privacy._mechanisms import noisy_class_counts
from ._payloads import FedKTUpload
from ._plan import FedKTPlan, target_task
from ._sums import party_sums

# what an upload's manifest and the privacy report say when students learn party rows
PARTY_ROWS_NOTE = (
    "The students learned their party's own labelled rows as well as the teachers' labels "
    "of the public set (student_data='party+public'): an upload reveals which rows its "
    "party holds about as much as a model trained on them, and no privacy guarantee "
    "covers that."
)


def _with_party_rows(task, n_public, party_rows, y):
    """`task` on public rows, plus the party's own labelled rows (stacked after them).

    Soft labels (weighted rows) of the public rows weigh together at most as much as the
    party's rows: they come from teachers of those very rows and add no evidence, so a
    large public set would otherwise make the student a lossy copy of its teacher.
    """
    public_rows = np.arange(n_public) if task.rows is None else task.rows
    weights = task.sample_weight
    if weights is not None:
        public_weight = weights.sum()
        if public_weight > len(party_rows):
            weights = weights * (len(party_rows) / public_weight)
        weights = np.concatenate([weights, np.ones(len(party_rows))])
    return Task(task.estimator, np.concatenate([task.y, y[party_rows]]),
                np.concatenate([public_rows, n_public + party_rows]), weights,
                name=task.name)


class StudentLabels(NamedTuple):
    """What a party's labelling of its students' rows (`FedKTParty.student_tasks`)
    hands its upload, beside the students."""

    #: public rows each student learned
    n_queries: int
    #: per partition, the class shares of its student's labels
    student_shares: list
    #: at L2 with hard labels, the log moments of the party's noisy histograms (zeros
    #: otherwise)
    log_moments: np.ndarray


class FedKTParty:
    """One party's draws and what it learns on the way (Algorithm 1, lines 2-13):
    teachers, their votes, students.

    `party_step` runs it alone on the party's machine; `FedKTClassifier.fit` runs every
    party's, their teachers in one flat parallel batch and then their students
    (`party_tier`).

    Parameters
    ----------
    plan : FedKTPlan
        What the fit runs.
    party : str or int
        The party's name.
    rows : ndarray of int
        The party's rows in the matrix its tasks index (all rows of its own data on its
        machine, its slice of the pooled data in ``fit``).
    y : ndarray of int
        Class codes of every row of that matrix.
    random_state : RandomState
        The party's own stream: partitions, clone seeds, L2 noise and tie breaks.
    """

    def __init__(self, plan: FedKTPlan, party: Any, rows: np.ndarray, y: np.ndarray,
                 random_state: np.random.RandomState) -> None:
        self.plan, self.party, self.rows, self.y = plan, party, rows, y
        self.n_teachers = plan.teachers_for(len(rows))
        self.noise_rng, self.tie_rng = (
            np.random.RandomState(seed) for seed in draw_seeds(random_state, 2)
        )
        self.teacher_rows = [
            subset
            for _ in range(plan.n_students)
            for subset in np.array_split(random_state.permutation(rows), self.n_teachers)
        ]
        self.teacher_seeds = draw_seeds(random_state, len(self.teacher_rows))
        self.student_seeds = draw_seeds(random_state, plan.n_students)

    def teacher_tasks(self) -> list[Task]:
        """Lines 2-8: one teacher per subset of every partition."""
        return [Task(self.plan.teacher, self.y[rows], rows,
                     name=f"party {self.party!r}, partition {index // self.n_teachers + 1}, "
                          f"teacher {index % self.n_teachers + 1}")
                for index, rows in enumerate(self.teacher_rows)]

    def student_tasks(self, histograms: list[np.ndarray], queries: np.ndarray, n_public: int,
                      n_classes: int) -> tuple[list[Task], StudentLabels]:
        """Lines 9-12: every partition's (noisy, at L2) vote, one histogram each of
        `histograms`, labels the queries for its student; with
        ``student_data="party+public"`` the party's rows are added (they index the
        public rows stacked above the party's matrix).

        Returns the students' tasks and the `StudentLabels` the upload reports.
        """
        plan = self.plan
        soft_labels = plan.learns_soft_labels("students")
        log_moments = np.zeros(len(DEFAULT_ORDERS))
        if plan.level == "L2" and not soft_labels:
            # each partition is a PATE over the party's rows: one example moves one
            # teacher's vote (sensitivity 2 in L1 norm, sqrt(2) in L2 norm)
            for votes in histograms:
                log_moments += (
                    pate_log_moments(votes, gamma=plan.mechanism.gamma, sensitivity=2.0,
                                     orders=DEFAULT_ORDERS)
                    if plan.mechanism.noise == "laplace" else
                    gnmax_log_moments(votes, sigma=1 / plan.mechanism.gamma,
                                      orders=DEFAULT_ORDERS)
                )
        targets = [
            target.astype(np.float32 if soft_labels else code_dtype(n_classes))
            for target in plan.vote_targets(
                histograms, "L2", soft_labels, self.noise_rng, self.tie_rng
            )
        ]
        student_shares = [
            class_shares(t if t.ndim == 2 else np.bincount(t[t >= 0], minlength=n_classes)[None])
            for t in targets
        ]
        tasks = [target_task(plan.student, t, queries, n_public,
                             f"party {self.party!r}, student {index + 1}")
                 for index, t in enumerate(targets)]
        if plan.student_data == "party+public":
            tasks = [_with_party_rows(task, n_public, self.rows, self.y) for task in tasks]
        return tasks, StudentLabels(len(queries), student_shares, log_moments)

    def upload(self, student_models: list[ClassCodeModel], labels: StudentLabels,
               n_classes: int, manifest: dict[str, Any], student_votes: np.ndarray,
               queries: np.ndarray, sum_parties: SumParties | None) -> PartyUpload:
        """Line 13: what the party sends: its students, and the facts the server needs:
        its class counts (at L2 only with noise, where its soft votes use them), its
        students' class shares and, at L2, its privacy guarantee (from `labels`, its
        `StudentLabels`); what the upload reveals when its students learned the party's
        rows; and in the sum (`_sums.party_sums`) its students' votes
        (`student_votes`, on the rows the tiers label) and its class counts."""
        plan = self.plan
        private = plan.level == "L2"
        counts = np.bincount(self.y[self.rows], minlength=n_classes)
        if plan.releases_counts:
            counts = noisy_class_counts(counts, gamma=plan.counts_gamma,
                                        noise=plan.mechanism.noise, random_state=self.noise_rng)
        payload = dict(FedKTUpload(
            students=[model.estimator for model in student_models],
            codes=[model.codes for model in student_models],
        ), sums=party_sums(plan, student_votes, queries, counts, n_classes, sum_parties))
        return PartyUpload(
            manifest=dict(
                manifest,
                class_counts=None if private and not plan.releases_counts
                else counts.tolist(),
                student_class_shares=np.asarray(labels.student_shares).tolist(),
                n_queries=labels.n_queries,
                n_teachers=self.n_teachers,
                privacy=party_guarantee(plan, labels.log_moments, labels.n_queries)
                if private else None,
                privacy_note=PARTY_ROWS_NOTE
                if self.plan.student_data == "party+public" else None,
            ),
            payload=payload,
        )


def party_step(plan: FedKTPlan, parties: Sequence[FedKTParty], X: Any,
               tiers: tuple[Any, np.ndarray, np.ndarray], n_classes: int,
               manifests: list[dict[str, Any]],
               sum_parties: SumParties | None = None) -> list[PartyUpload]:
    """FedKT's party step for `parties` (`FedKTParty`: one on its own machine, every
    party in ``fit``): their teachers, their votes on the rows of `tiers` (what
    `FedKTPlan.tier_rows` returns), their students; each party's upload with its
    manifest of `manifests`, its students' votes on those rows in its sums
    (`sum_parties`: the parties of a secure sum, whose threshold sizes
    `DistributedNoise`'s shares; None without secure aggregation).
    """
    X_labelled, party_rows, server_rows = tiers
    teachers = np.array([party.n_teachers for party in parties])
    per_partition = (f"{teachers[0]}" if np.all(teachers == teachers[0])
                     else f"{teachers.min()}-{teachers.max()}")
    plan.say(
        f"party tier: {sum(len(party.teacher_rows) for party in parties)} teachers "
        f"({parties_in_words(len(parties))} x {plan.n_students} partitions x {per_partition} "
        f"subsets) vote on {len(party_rows)} public rows, {plan.votes.kind} votes"
    )
    student_models, labels, student_votes = party_tier(plan, parties, X, X_labelled,
                                                       party_rows, n_classes)
    per_party = student_votes.reshape(len(parties), plan.n_students, *student_votes.shape[1:])
    return [party.upload(models, party_labels, n_classes, manifest, votes, server_rows,
                         sum_parties)
            for party, models, party_labels, manifest, votes
            in zip(parties, student_models, labels, manifests, per_party)]


def party_tier(plan: FedKTPlan, parties: Sequence[FedKTParty], X: Any, X_public: Any,
               party_queries: np.ndarray, n_classes: int,
               ) -> tuple[list[list[ClassCodeModel]], list[StudentLabels], np.ndarray]:
    """Lines 2-12 for `parties` (`FedKTParty`): all their teachers in one flat parallel
    batch, then all their students. `X_public` holds the rows the tiers label (the
    public rows and their jittered copies), `party_queries` the ones this tier labels.
    Returns each party's fitted students (ClassCodeModel), each party's
    `StudentLabels`, and the students' votes on `X_public`, stacked
    (n_parties * n_students, n_labelled, ...).
    """
    n_public = num_samples(X_public)
    teacher_fits = iter_clone_fits(
        [task for party in parties for task in party.teacher_tasks()],
        TierJob(X, n_classes,
                X_predict=(X_public if len(party_queries) == n_public
                           else safe_indexing(X_public, party_queries)),
                soft_votes=plan.soft_votes, keep_models=False),
        np.concatenate([party.teacher_seeds for party in parties]),
        tier="teachers",
        **plan.clone_fitting,
    )
    histograms = group_votes(
        teacher_fits,
        [party.n_teachers for party in parties for _ in range(plan.n_students)],
        n_classes,
    )
    # the histograms stream partition by partition, party by party, as the teachers'
    # chunks finish: each party takes its own n_students, in the parties' order
    tasks_and_labels = [
        party.student_tasks(list(islice(histograms, plan.n_students)), party_queries,
                            n_public, n_classes)
        for party in parties
    ]
    student_tasks = [task for tasks, _ in tasks_and_labels for task in tasks]
    with_party_rows = plan.student_data == "party+public"
    plan.say(f"party tier: {len(student_tasks)} students learn "
             f"{'their party rows and ' if with_party_rows else ''}the teachers' labels")
    students = fit_clones(
        student_tasks,
        TierJob(StackedRows(X_public, X) if with_party_rows else X_public, n_classes,
                X_predict=X_public, soft_votes=plan.soft_votes),
        np.concatenate([party.student_seeds for party in parties]),
        tier="students",
        **plan.clone_fitting,
    )
    s, models = plan.n_students, students.models
    return ([models[start : start + s] for start in range(0, len(models), s)],
            [labels for _, labels in tasks_and_labels], students.predictions)


def check_party_sizes(plan: FedKTPlan, parties: list[Any],
                      party_rows: list[np.ndarray]) -> None:
    """Refuse, before any fit, a party with fewer rows than teachers per partition."""
    for party, rows in zip(parties, party_rows):
        n_teachers = plan.teachers_for(len(rows))
        if len(rows) < n_teachers:
            raise ValueError(
                f"Party {party!r} has {len(rows)} sample(s), fewer than "
                f"n_teachers={n_teachers}: each of its teachers needs at least one "
                "sample. Use fewer n_teachers (with soft votes and no privacy mechanism, "
                "n_teachers='auto' sizes them by each party's rows)."
            )


def party_guarantee(plan: FedKTPlan, log_moments: np.ndarray,
                    n_queries: int) -> dict[str, Any]:
    """A party's L2 guarantee, from the log moments of its noisy histograms.

    An example sits in one teacher of every partition: the party's partitions compose
    (their moments are summed), and sensitivity is 2 (L1 norm; sqrt(2) in L2 norm for
    Gaussian noise). With soft labels the whole histogram is released: only the
    data-independent bound holds. With Gaussian noise the guarantee is the exact
    composition, and the data-dependent value only reported. The noisy class counts
    (`FedKTPlan.releases_counts`, same sensitivity) are one more release: Gaussian-DP
    composed exactly (and as Renyi DP into the moments), or Laplace's pure
    ``2 * counts_gamma`` added.
    """
    privacy, n_releases = plan.mechanism, plan.n_students * n_queries
    soft_labels, gaussian = plan.learns_soft_labels("students"), privacy.noise == "gaussian"
    counts_gamma = plan.counts_gamma if plan.releases_counts else 0.0
    if gaussian and counts_gamma:
        log_moments = log_moments + gaussian_log_moments(
            sigma=1 / counts_gamma, sensitivity=ONE_VOTE_L2, orders=DEFAULT_ORDERS)
    with _largest_order_noted() as largest_order:
        data_dependent = np.nan if soft_labels else epsilon_from_log_moments(
            log_moments, delta=privacy.delta, orders=DEFAULT_ORDERS
        )
    if gaussian:
        data_independent = gdp_epsilon(
            ONE_VOTE_L2 * np.hypot(np.sqrt(n_releases) * privacy.gamma, counts_gamma),
            delta=privacy.delta,
        )
    else:
        pure_counts = 2.0 * counts_gamma
        data_dependent += pure_counts
        data_independent = pure_counts + data_independent_epsilon(
            n_releases, sensitivity=2.0, gamma=privacy.gamma, delta=privacy.delta,
            orders=DEFAULT_ORDERS)
    return dict(
        data_dependent_epsilon=float(data_dependent),
        data_independent_epsilon=float(data_independent),
        # Gaussian noise: the exact composition, which may be published, is the guarantee
        epsilon=float(data_independent if soft_labels or gaussian
                      else min(data_dependent, data_independent)),
        largest_order=bool(largest_order),
    )

"""FedKT's party step: what runs on a party's machine (Algorithm 1, lines 2-13)."""

import warnings
from itertools import islice

import numpy as np
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import _num_samples

from .._deployment._protocol import PartyData, require_public_set
from .._deployment._upload import PartyUpload
from .._engine._base import stack_rows
from .._engine._fitting import (
    Task,
    code_dtype,
    fit_clones,
    group_votes,
    iter_clone_fits,
)
from .._engine._seeds import draw_seeds, party_random_state, root_seed
from .._engine._voting import class_shares
from ..privacy._accounting import (
    DEFAULT_ORDERS,
    _largest_order_noted,
    data_independent_epsilon,
    epsilon_from_log_moments,
    gaussian_epsilon,
    pate_log_moments,
)

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
                np.concatenate([public_rows, n_public + party_rows]), weights)


class _FedKTParty:
    """FedKT's party step (Algorithm 1, lines 2-13): teachers, their votes, students.

    Holds one party's draws and what it learns on the way. `FedKTClassifier.fit_party`
    runs it alone on the party's machine; `FedKTClassifier.fit` runs every party's, their
    teachers in one flat parallel batch and then their students.

    Parameters
    ----------
    config : FedKTClassifier
        The parameters.
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

    def __init__(self, config, party, rows, y, random_state):
        self.config, self.party, self.rows, self.y = config, party, rows, y
        self.noise_rng, self.tie_rng = (
            np.random.RandomState(seed) for seed in draw_seeds(random_state, 2)
        )
        self.teacher_rows = [
            subset
            for _ in range(config.n_partitions)
            for subset in np.array_split(random_state.permutation(rows), config.n_subsets)
        ]
        self.teacher_seeds = draw_seeds(random_state, len(self.teacher_rows))
        self.student_seeds = draw_seeds(random_state, config.n_partitions)

    def teacher_tasks(self):
        """Lines 2-8: one teacher per subset of every partition."""
        return [Task(self.config._teacher_template(), self.y[rows], rows)
                for rows in self.teacher_rows]

    def student_tasks(self, partition_votes, queries, n_public, n_classes):
        """Lines 9-12: every partition's (noisy, at L2) vote labels the queries for its
        student; with ``student_data="party+public"`` the party's rows are added (they
        index the public rows stacked above the party's matrix).

        Also keeps what the upload reports: the students' class shares and, at L2, the
        log moments of the party's noisy histograms.
        """
        config = self.config
        soft_labels = config._soft_labels("students")
        self.n_queries = len(queries)
        self.log_moments = np.zeros(len(DEFAULT_ORDERS))

        def account(histograms):
            for votes in histograms:
                if (config._level() == "L2" and not soft_labels
                        and config.privacy.noise == "laplace"):
                    # each partition is a PATE over the party's rows (sensitivity 2)
                    self.log_moments += pate_log_moments(
                        votes, gamma=config.privacy.gamma, sensitivity=2.0, orders=DEFAULT_ORDERS
                    )
                yield votes

        targets = [
            target.astype(np.float32 if soft_labels else code_dtype(n_classes))
            for target in config._vote_targets(
                account(partition_votes), "L2", soft_labels, self.noise_rng, self.tie_rng
            )
        ]
        self.student_shares = [
            class_shares(t if t.ndim == 2 else np.bincount(t[t >= 0], minlength=n_classes)[None])
            for t in targets
        ]
        self.class_counts = np.bincount(self.y[self.rows], minlength=n_classes)
        tasks = [config._target_task(config._student_template(), t, queries, n_public)
                 for t in targets]
        if config.student_data == "party+public":
            tasks = [_with_party_rows(task, n_public, self.rows, self.y) for task in tasks]
        return tasks

    def upload(self, student_models, manifest):
        """Line 13: what the party sends, its students, and the facts the server needs:
        its class counts (not at L2, where they are not protected), its students' class
        shares and, at L2, its privacy guarantee; and what the upload reveals when its
        students learned the party's rows."""
        private = self.config._level() == "L2"
        return PartyUpload(
            manifest=dict(
                manifest,
                class_counts=None if private else self.class_counts.tolist(),
                student_class_shares=np.asarray(self.student_shares).tolist(),
                n_queries=self.n_queries,
                privacy=self.config._party_privacy(self.log_moments, self.n_queries)
                if private else None,
                privacy_note=PARTY_ROWS_NOTE
                if self.config.student_data == "party+public" else None,
            ),
            payload={
                "students": [model.estimator for model in student_models],
                "codes": [model.codes for model in student_models],
            },
        )


class _FedKTPartyStep:
    """FedKTClassifier's party side: the party step of Algorithm 1 (lines 2-13),
    run by `fit_party` on one party's machine and by `fit` for every party."""

    def fit_party(self, X, y, *, party, classes, X_unlabeled, party_seed=None):
        """FedKT's party step, on one party's machine: teachers, votes, students.

        Runs lines 2-13 of Algorithm 1 on the party's own rows and returns what the
        party sends: its students and a manifest. This estimator is not modified.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The party's rows.
        y : array-like of shape (n_samples,)
            Their labels, all among `classes`.
        party : str or int
            The party's name, as the server will know it.
        classes : array-like of shape (n_classes,)
            The class labels every party and the server agreed on.
        X_unlabeled : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
            The agreed public unlabelled data.
        party_seed : int, default=None
            Seed of this party's own draws (partitions, clone seeds, L2 noise, ties).
            ``None`` derives them from `random_state` and `party`, as `fit` does. At
            ``privacy=PartyNoise(...)`` a server that knows `random_state` could then
            recompute the party's noise: pass a secret seed there.

        Returns
        -------
        upload : skfedkt.PartyUpload
            Save it with ``upload.save(path)`` and send the file to the server.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.base import clone
        >>> from sklearn.datasets import load_breast_cancer
        >>> from skfedkt import FedKTClassifier
        >>> X, y = load_breast_cancer(return_X_y=True)
        >>> X_public, X, y = X[:100], X[100:], y[100:]
        >>> party = np.arange(len(y)) % 3
        >>> clf = FedKTClassifier(random_state=0)
        >>> uploads = [clf.fit_party(X[party == p], y[party == p], party=p, classes=[0, 1],
        ...                          X_unlabeled=X_public) for p in range(3)]
        >>> [len(upload.payload["students"]) for upload in uploads]
        [2, 2, 2]
        >>> server = clone(clf).fit_server(uploads, X_public)
        >>> pooled = clone(clf).fit(X, y, groups=party, X_unlabeled=X_public)
        >>> bool((server.predict_proba(X) == pooled.predict_proba(X)).all())
        True
        """
        self._validate_params()
        self._check_options()
        require_public_set(X_unlabeled, "FedKT's party step")
        data = PartyData(self, X, y, classes, X_unlabeled, party)
        rows = np.arange(len(data.y))
        self._check_party_sizes([rows], [data.party])
        if self._level() == "L2" and party_seed is None:
            warnings.warn(
                "With PartyNoise the party's noise comes from party_seed; without "
                "one it derives from random_state and the party's name, which a server "
                "knowing random_state can recompute. Pass a secret party_seed.",
                UserWarning,
            )
        X_labelled, party_rows, _ = self._tier_rows(data.X_public,
                                                    root_seed(self.random_state))
        step = _FedKTParty(self, data.party, rows, data.y,
                           party_random_state(self.random_state, data.party, party_seed))
        (models,), _ = self._party_tier(
            [step], data.X, X_labelled, party_rows, len(data.classes)
        )
        return step.upload(models, data.manifest(self))

    def _party_tier(self, steps, X, X_public, party_queries, n_classes):
        """Lines 2-12 for the parties of `steps`: all their teachers in one flat parallel
        batch, then all their students. `X_public` holds the rows the tiers label (the
        public rows and their jittered copies), `party_queries` the ones this tier
        labels. Returns each party's fitted students (ClassCodeModel) and their votes on
        `X_public`, stacked (n_parties * n_partitions, n_labelled, ...).
        """
        fit_options = dict(n_classes=n_classes, n_jobs=self.n_jobs,
                           verbose=max(self.verbose - 1, 0))
        n_public = _num_samples(X_public)
        teacher_fits = iter_clone_fits(
            [task for step in steps for task in step.teacher_tasks()],
            X,
            seeds=np.concatenate([step.teacher_seeds for step in steps]),
            X_predict=(X_public if len(party_queries) == n_public
                       else _safe_indexing(X_public, party_queries)),
            soft_votes=self._soft_votes(),
            keep_models=False,
            **fit_options,
        )
        histograms = group_votes(teacher_fits, self.n_subsets, n_classes)
        student_tasks = [
            task
            for step in steps
            for task in step.student_tasks(
                islice(histograms, self.n_partitions), party_queries, n_public, n_classes
            )
        ]
        with_party_rows = self.student_data == "party+public"
        self._say(f"party tier: {len(student_tasks)} students learn "
                  f"{'their party rows and ' if with_party_rows else ''}the teachers' labels")
        models, votes, _ = fit_clones(
            student_tasks,
            stack_rows(X_public, X) if with_party_rows else X_public,
            seeds=np.concatenate([step.student_seeds for step in steps]),
            X_predict=X_public,
            soft_votes=self._soft_votes(),
            **fit_options,
        )
        s = self.n_partitions
        return [models[start : start + s] for start in range(0, len(models), s)], votes

    def _check_party_sizes(self, party_rows, parties=None):
        parties = self.parties_.tolist() if parties is None else parties
        for party, rows in zip(parties, party_rows):
            if len(rows) < self.n_subsets:
                raise ValueError(
                    f"Party {party!r} has {len(rows)} sample(s), fewer than "
                    f"n_subsets={self.n_subsets}: each of its teachers needs at least "
                    "one sample."
                )

    def _party_privacy(self, log_moments, n_queries):
        """A party's L2 guarantee, from the log moments of its noisy histograms.

        An example sits in one teacher of every partition: the party's partitions
        compose (their moments are summed), and sensitivity is 2 (L1 norm; sqrt(2) in
        L2 norm for Gaussian noise). With soft labels the whole histogram is released:
        only the data-independent bound holds.
        """
        if self.privacy.noise == "gaussian":
            epsilon = gaussian_epsilon(self.n_partitions * n_queries, sigma=1 / self.privacy.gamma,
                                       delta=self.privacy.delta, sensitivity=np.sqrt(2))
            return dict(data_dependent_epsilon=np.nan, data_independent_epsilon=epsilon,
                        epsilon=epsilon, largest_order=False)
        soft_labels = self._soft_labels("students")
        with _largest_order_noted() as largest_order:
            data_independent = data_independent_epsilon(
                self.n_partitions * n_queries, sensitivity=2.0, gamma=self.privacy.gamma,
                delta=self.privacy.delta, orders=DEFAULT_ORDERS,
            )
            data_dependent = np.nan if soft_labels else epsilon_from_log_moments(
                log_moments, delta=self.privacy.delta, orders=DEFAULT_ORDERS
            )
        return dict(
            data_dependent_epsilon=float(data_dependent),
            data_independent_epsilon=float(data_independent),
            epsilon=float(data_independent if soft_labels
                          else min(data_dependent, data_independent)),
            largest_order=bool(largest_order),
        )

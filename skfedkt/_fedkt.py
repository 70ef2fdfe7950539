"""FedKT: one-shot federated learning by two-tier knowledge transfer (Li, He and Song)."""

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils import _safe_indexing, check_random_state
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._base import (
    _MIN_CLASS_SHARE,
    BaseFederatedClassifier,
    LabelCollapseWarning,
    pickled_bytes,
    stack_rows,
)
from ._fitting import (
    Task,
    code_dtype,
    draw_seeds,
    fit_clones,
    group_votes,
    iter_clone_fits,
    sample_weight_param,
    soft_label_rows,
)
from ._voting import class_shares, count_votes, plurality_vote, prior_corrected_proba
from .privacy import (
    DEFAULT_ORDERS,
    PrivacyReport,
    data_independent_epsilon,
    epsilon_from_log_moments,
    guarantee_strength,
    pate_epsilon,
    pate_log_moments,
)


def _with_party_rows(task, n_public, party_rows, y):
    """`task` on public rows, plus the party's own labelled rows (stacked after them)."""
    public_rows = np.arange(n_public) if task.rows is None else task.rows
    weights = task.sample_weight
    if weights is not None:
        weights = np.concatenate([weights, np.ones(len(party_rows))])
    return Task(task.estimator, np.concatenate([task.y, y[party_rows]]),
                np.concatenate([public_rows, n_public + party_rows]), weights)


def _lost_classes(learned, reference, ratio=0.5):
    """Classes holding at least `_MIN_CLASS_SHARE` of `reference` but under `ratio` of
    that share in `learned` (both arrays of class shares)."""
    return np.flatnonzero((reference >= _MIN_CLASS_SHARE) & (learned < ratio * reference))


def _final_estimator_has(attr):
    def check(self):
        return hasattr(self._final_template(), attr)

    return check


class FedKTClassifier(BaseFederatedClassifier):
    """FedKT: one-shot federated classification by two-tier knowledge transfer.

    Each party splits its rows ``n_partitions`` times into ``n_subsets`` disjoint
    subsets and trains one teacher per subset. In every partition the teachers vote on
    the public unlabelled data and a student learns the winning labels (PATE inside the
    party). The parties send their students to the server, which lets them vote on the
    public data in turn and trains the final model on the winning labels. One round of
    communication, any classifier, and only the students leave the parties.

    By default votes are class probabilities (``voting="soft"``), which keeps the
    minority classes of skewed parties alive through both tiers; ``voting="hard"`` is
    the paper's Algorithm 1 exactly. With ``privacy_level="L1"`` or ``"L2"``, Laplace
    noise on the vote counts of one tier makes the final model differentially private;
    ``epsilon_`` and ``privacy_report_`` state the guarantee.

    Parameters
    ----------
    estimator : estimator object, default=None
        The teacher model, cloned for every subset of every partition of every party.
        ``None`` means ``DecisionTreeClassifier()``. It must implement ``fit`` and
        ``predict``.
    student_estimator : estimator object, default=None
        The student model trained per partition on the teachers' labels of the public
        data. ``None`` means a clone of `estimator`.
    final_estimator : estimator object, default=None
        The model trained by the server on the students' labels of the public data.
        ``None`` means a clone of `student_estimator`. Its methods (``predict_proba``,
        ``decision_function``) are those this classifier offers.
    n_partitions : int, default=2
        Number of partitions ``s`` of each party's data, hence of students per party.
    n_subsets : int or "auto", default="auto"
        Number of subsets ``t`` per partition, hence of teachers per partition. Every
        party needs at least `n_subsets` rows. ``"auto"`` is the paper's 5 with
        ``voting="hard"`` and at ``privacy_level="L2"`` (whose example-level guarantee
        rests on disjoint teachers), and 1 otherwise: without L2 noise, subsets only
        make the teachers weaker.
    voting : {"soft", "hard"}, default="soft"
        How teachers and students vote. ``"soft"``: each model adds its class
        probabilities (a one-hot vote if it has no ``predict_proba``) to the histogram,
        so a party's model that gives a minority class 40% still counts for it.
        ``"hard"``: each model votes for its predicted class, as in the paper; with
        label skew, hard votes drift toward the majority class at every tier.
    student_data : {"auto", "public", "party+public"}, default="auto"
        What the students learn from: the public data labelled by the teachers
        (``"public"``, the paper), or that plus their party's own labelled rows
        (``"party+public"``), so that a student knows at least what its party knows.
        ``"auto"`` is ``"public"`` with ``voting="hard"`` and at L2 (where students must
        learn from noisy votes only; ``"party+public"`` is refused there), else
        ``"party+public"``.
    pooling : {"auto", "sum", "prior-corrected"}, default="auto"
        How the server combines soft votes. ``"sum"``: it adds every student's class
        probabilities. ``"prior-corrected"``: it corrects each party's probabilities for
        the party's own class shares and pools what remains, the evidence about the
        example, by least squares, then adds the global class shares back (see
        `skfedkt` user guide, "Under label skew"); a party that never saw a class says
        nothing about it instead of voting against it. This uses every party's class
        counts, which no accountant covers, so it is refused at L1 and L2. ``"auto"``
        is ``"prior-corrected"`` with soft votes at L0, else ``"sum"``.
    soft_labels : bool, default=False
        If True, the students and the final model learn the (noisy) vote distribution of
        every public example instead of its winning class: every example is repeated
        once per class with the class's share as sample weight, so both estimators must
        accept ``sample_weight`` (a Pipeline's final step must). At L1 and L2 the whole
        noisy histogram is then released, which only the data-independent bound covers.
        Measured with random forests: better on breast_cancer and wine, worse on the 10
        classes of digits (see the user guide).
    consistent_voting : bool, default=True
        With ``voting="hard"``: if True, a party casts its `n_partitions` votes for a
        class only when all its students predict that class, and none otherwise (the
        paper's consistent voting); if False, every student casts one vote. When no
        party is unanimous on any public example, every student's vote is counted
        instead, with a warning. Soft votes are always summed over every student.
    privacy_level : {"L0", "L1", "L2"}, default="L0"
        Where Laplace noise is added (FedKT's privacy levels):

        - ``"L0"``: nowhere; no privacy guarantee.
        - ``"L1"`` (server noise): on every count of the server's vote histogram. The final
          model is differentially private at the *party* level (sensitivity
          ``2 * n_partitions``: one party moves all its students' votes).
        - ``"L2"`` (party noise): on every count of every teacher vote histogram of every
          partition of every party. Every student, and hence the final model, is
          differentially private at the *example* level, even towards the server.
    gamma : float, default=0.05
        Inverse scale of the Laplace noise (scale ``1/gamma``); larger means less noise
        and a larger epsilon. Unused at L0.
    query_fraction : float in (0, 1], default=1.0
        Fraction of the public set that the noisy tier labels: the server at L0 and L1,
        every partition of every party at L2. The other public examples are not used by
        that tier: at L1 the final model learns from the queries only, at L2 the students
        do. Fewer queries cost less privacy.
    delta : float in (0, 1), default=1e-5
        The delta of the reported (epsilon, delta) guarantee.
    n_jobs : int, default=None
        Number of jobs for fitting the clones. All teachers of all parties form one flat
        parallel batch, then all students; ``None`` means 1 unless in a
        :obj:`joblib.parallel_config` context, ``-1`` means all processors. When clones
        run in parallel, every ``n_jobs`` parameter of the base estimators is set to 1.
    random_state : int, RandomState instance or None, default=None
        Controls the partitions, one seed per clone (set on every ``random_state``
        parameter of a clone, nested ones too, and on torch's RNG for skorch nets), the
        noise and the tie breaks. Results are identical for any `n_jobs` and joblib
        backend, except for skorch nets under the threading backend, whose threads share
        torch's RNG.
    verbose : int, default=0
        If positive, `fit` prints each stage (teachers, students, server); larger
        values also make the parallel fitting verbose.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, over all parties.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit. Defined only when `X` has string column names.
    parties_ : ndarray of shape (n_parties,)
        The party labels found in ``groups``, sorted.
    students_ : list of list of estimator
        ``students_[i]`` holds the `n_partitions` fitted students of party
        ``parties_[i]``. Like every fitted clone, they were trained on integer class
        codes (indices into ``classes_``) of the classes present in their labels; a
        student whose labels held a single class is a constant ``DummyClassifier``.
    final_estimator_ : estimator
        The server's fitted final model, trained on class codes like the students.
    upload_bytes_ : ndarray of int of shape (n_parties,)
        Bytes each party sent, aligned with ``parties_``: its pickled students, the only
        communication of FedKT (the final model's trip back is not counted).
    vote_counts_ : ndarray of shape (n_public, n_classes)
        The server's noise-free vote histogram on the whole public set: vote counts
        (int64) with hard voting, summed class probabilities (float64) with soft voting.
        For analysis: it is what the L1 noise protects, and a deployment would not
        publish it.
    public_mask_ : ndarray of bool of shape (n_public,)
        Which public examples the final model learned from: the server's queries that
        received a vote. At L1 every query is labelled by the noisy argmax; otherwise an
        example without votes (with consistent voting, no party unanimous) is left out.
    public_labels_ : ndarray of shape (n_learned,)
        The labels the final model learned, for the public examples in `public_mask_`
        (with `soft_labels`, the most probable class of each learned distribution).
    class_shares_ : dict of ndarray
        The class shares of what every tier learned from, columns in the order of
        ``classes_``: ``"training"`` (all training rows, shape (n_classes,)),
        ``"parties"`` (each party's rows, (n_parties, n_classes)), ``"students"``
        (each student's labels, (n_parties, n_partitions, n_classes)) and ``"final"``
        (the final model's labels, (n_classes,)). `fit` raises a
        `LabelCollapseWarning` when a student learned a single class from a party
        holding several, when the final model's labels hold less than half of a class's
        training share (for classes of at least 5%), or when the final model predicts a
        single class on public rows labelled with several.
    privacy_report_ : skfedkt.privacy.PrivacyReport
        The guarantee: level, protected unit ("party" at L1, "example" at L2), gamma,
        delta, number of queries, data-dependent and data-independent epsilon, per-party
        epsilon at L2, the moment orders, and a statement in words.
    epsilon_ : float
        ``privacy_report_.epsilon``: the privacy budget spent, ``inf`` at L0.

    See Also
    --------
    sklearn.ensemble.BaggingClassifier : An ensemble of one estimator on subsets of data.

    Notes
    -----
    ``groups`` gives the party of every training row; ``groups=None`` means a single
    party, which makes this the paper's centralized PATE baseline. ``X_unlabeled`` is the
    public data both tiers label; ``None`` uses the rows of ``X`` without their labels,
    which is convenient for experiments but gives no privacy, since the students then
    learn from the parties' own rows.

    Privacy accounting follows the paper's Section 4: the data-dependent moments
    accountant of Papernot et al. (2017) with ``q`` computed from the noise-free counts
    of the queries, next to data-independent bounds (see `skfedkt.privacy`); the reported
    epsilon is the smaller. Publishing a data-dependent epsilon itself leaks information.
    Unlike the paper's public code, every query is counted, the sensitivity at L1 is
    ``2 * n_partitions`` and the moments bound is used only where it is valid
    (``q < 1 / (exp(eps0) + 1)``).

    Argmax ties of either vote are broken uniformly at random among the tied classes
    (from `random_state`): a fixed rule would hand every tie to one class, and a rule
    such as "the class with most votes overall" hands them to the class that skew
    already favours.

    Soft votes keep the privacy analysis: a model's vote has L1 mass one either way, so
    one model moves a histogram by at most 2 and the sensitivities above hold; the
    data-dependent bound of Papernot et al. holds for real-valued counts as long as
    only the argmax is released (not with `soft_labels`).

    References
    ----------
    .. [1] Q. Li, B. He and D. Song, "Practical One-Shot Federated Learning for
       Cross-Silo Setting", IJCAI 2021, Algorithm 1 and Section 4.
    .. [2] N. Papernot, M. Abadi, U. Erlingsson, I. Goodfellow and K. Talwar,
       "Semi-supervised Knowledge Transfer for Deep Learning from Private Training
       Data", ICLR 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.model_selection import train_test_split
    >>> from skfedkt import FedKTClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    >>> X_train, X_public, y_train, _ = train_test_split(X_train, y_train, random_state=0)
    >>> party = np.arange(len(y_train)) % 4  # four hospitals
    >>> clf = FedKTClassifier(n_partitions=2, random_state=0)
    >>> clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    FedKTClassifier(random_state=0)
    >>> clf.parties_
    array([0, 1, 2, 3])
    >>> clf.vote_counts_.shape  # the server's votes on the public set
    (107, 2)
    >>> clf.class_shares_["final"].round(2)  # the classes the final model learned
    array([0.38, 0.62])
    >>> print(f"{clf.score(X_test, y_test):.2f}")
    0.9...
    """

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "student_estimator": [HasMethods(["fit", "predict"]), None],
        "final_estimator": [HasMethods(["fit", "predict"]), None],
        "n_partitions": [Interval(Integral, 1, None, closed="left")],
        "n_subsets": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "voting": [StrOptions({"soft", "hard"})],
        "student_data": [StrOptions({"auto", "public", "party+public"})],
        "pooling": [StrOptions({"auto", "sum", "prior-corrected"})],
        "soft_labels": ["boolean"],
        "consistent_voting": ["boolean"],
        "privacy_level": [StrOptions({"L0", "L1", "L2"})],
        "gamma": [Interval(Real, 0, None, closed="neither")],
        "query_fraction": [Interval(Real, 0, 1, closed="right")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        student_estimator=None,
        final_estimator=None,
        n_partitions=2,
        n_subsets="auto",
        voting="soft",
        student_data="auto",
        pooling="auto",
        soft_labels=False,
        consistent_voting=True,
        privacy_level="L0",
        gamma=0.05,
        query_fraction=1.0,
        delta=1e-5,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.student_estimator = student_estimator
        self.final_estimator = final_estimator
        self.n_partitions = n_partitions
        self.n_subsets = n_subsets
        self.voting = voting
        self.student_data = student_data
        self.pooling = pooling
        self.soft_labels = soft_labels
        self.consistent_voting = consistent_voting
        self.privacy_level = privacy_level
        self.gamma = gamma
        self.query_fraction = query_fraction
        self.delta = delta
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _teacher_template(self):
        return DecisionTreeClassifier() if self.estimator is None else self.estimator

    def _student_template(self):
        if self.student_estimator is None:
            return self._teacher_template()
        return self.student_estimator

    def _final_template(self):
        if self.final_estimator is None:
            return self._student_template()
        return self.final_estimator

    def _base_estimators(self):
        return [self._teacher_template(), self._student_template(), self._final_template()]

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, groups=None, X_unlabeled=None):
        """Run FedKT: teachers and students in every party, then the server's model.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The training rows of all parties.
        y : array-like of shape (n_samples,)
            Their labels (any type: strings, integers, booleans).
        groups : array-like of shape (n_samples,), default=None
            The party of each row. ``None`` means a single party (centralized PATE).
        X_unlabeled : {array-like, sparse matrix, DataFrame} or PublicSet, default=None
            The public unlabelled data, of shape (n_public, n_features). ``None`` uses
            the rows of `X` without labels (no privacy). Wrap it in `PublicSet` inside
            cross-validation when it may have exactly as many rows as `X`.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        data = self._validate_federated_data(X, y, groups, X_unlabeled)
        self._check_party_sizes(data.party_rows)  # before any fit
        self._check_options()
        soft_labels, soft_votes = self.soft_labels, self.voting == "soft"
        with_party_rows = self._student_data() == "party+public"
        n_subsets = self._n_subsets()
        n_classes = len(self.classes_)
        n_parties = len(self.parties_)
        n_public = _num_samples(data.X_public)
        rng = check_random_state(self.random_state)
        # own streams, so noise, queries and tie breaks leave every other draw unchanged
        noise_rng, query_rng, tie_rng = (
            np.random.RandomState(seed) for seed in draw_seeds(rng, 3)
        )
        queries = self._draw_queries(n_public, query_rng)
        # the noisy tier labels only the queries (the server at L0/L1, the parties at L2)
        every_public = np.arange(n_public)
        party_queries, server_queries = (
            (queries, every_public) if self.privacy_level == "L2" else (every_public, queries)
        )
        fit_options = dict(n_classes=n_classes, n_jobs=self.n_jobs,
                           verbose=max(self.verbose - 1, 0))

        # Party side, lines 2-10: the teachers of every partition of every party vote.
        teacher_rows = [
            subset
            for rows in data.party_rows
            for _ in range(self.n_partitions)
            for subset in np.array_split(rng.permutation(rows), n_subsets)
        ]
        self._say(
            f"party tier: {len(teacher_rows)} teachers ({n_parties} parties x "
            f"{self.n_partitions} partitions x {n_subsets} subsets) vote on "
            f"{len(party_queries)} public rows, {'soft' if soft_votes else 'hard'} votes"
        )
        teacher_fits = iter_clone_fits(
            [Task(self._teacher_template(), data.y[rows], rows) for rows in teacher_rows],
            data.X,
            seeds=draw_seeds(rng, len(teacher_rows)),
            X_predict=(data.X_public if len(party_queries) == n_public
                       else _safe_indexing(data.X_public, party_queries)),
            soft_votes=soft_votes,
            keep_models=False,
            **fit_options,
        )
        # Lines 11-12: a student per partition learns the teachers' (noisy) vote.
        student_targets, party_moments = self._student_targets(
            group_votes(teacher_fits, n_subsets, n_classes), soft_labels, noise_rng,
            tie_rng,
        )
        student_tasks = [
            self._target_task(self._student_template(), targets, party_queries)
            for targets in student_targets
        ]
        X_students = data.X_public
        if with_party_rows:
            # the party's own labelled rows too: students then know what their party knows
            X_students = stack_rows(data.X_public, data.X)
            student_tasks = [
                _with_party_rows(task, n_public, data.party_rows[i // self.n_partitions],
                                 data.y)
                for i, task in enumerate(student_tasks)
            ]
        self._say(f"party tier: {len(student_tasks)} students learn "
                  f"{'their party rows and ' if with_party_rows else ''}the teachers' labels")
        student_models, student_votes, _ = fit_clones(
            student_tasks,
            X_students,
            seeds=draw_seeds(rng, len(student_targets)),
            X_predict=data.X_public,
            soft_votes=soft_votes,
            **fit_options,
        )
        self.students_ = [
            [model.estimator for model in student_models[start : start + self.n_partitions]]
            for start in range(0, len(student_models), self.n_partitions)
        ]
        # line 13: the students are all that a party sends
        self.upload_bytes_ = np.array([pickled_bytes(students) for students in self.students_])

        # Server side, lines 14-22: the students vote, the final model learns.
        party_counts = np.array(
            [np.bincount(data.y[rows], minlength=n_classes) for rows in data.party_rows]
        )
        self.vote_counts_ = self._server_votes(
            student_votes.reshape(n_parties, self.n_partitions, *student_votes.shape[1:]),
            n_classes, party_counts,
        )
        (final_targets,) = self._vote_targets(
            [self.vote_counts_[server_queries]], "L1", soft_labels, noise_rng, tie_rng
        )
        final_task = self._target_task(self._final_template(), final_targets, server_queries)
        self._say(f"server: {self._pooling() if soft_votes else 'hard'} vote of "
                  f"{len(student_tasks)} students; the final model learns "
                  f"{len(np.unique(final_task.y))} classes on the public rows")
        (self._final_model,), _, _ = fit_clones(
            [final_task], data.X_public, seeds=draw_seeds(rng, 1), **fit_options
        )
        self.final_estimator_ = self._final_model.estimator
        final_rows = every_public if final_task.rows is None else final_task.rows
        learned = np.zeros((n_public, n_classes))
        np.add.at(learned, (final_rows, final_task.y),
                  1.0 if final_task.sample_weight is None else final_task.sample_weight)
        self.public_mask_ = learned.any(axis=1)
        self.public_labels_ = self.classes_[learned[self.public_mask_].argmax(axis=1)]
        self.class_shares_ = self._class_shares(data, party_counts, student_targets, learned)
        self._warn_on_collapse()
        learned_rows = np.flatnonzero(self.public_mask_)
        self._warn_if_single_class(
            self._final_model.predict(_safe_indexing(data.X_public, learned_rows)),
            f"The final model {type(self._final_template()).__name__} predicts on the "
            f"{len(learned_rows)} public rows it learned", learned[learned_rows].argmax(axis=1),
            "their labels", "it cannot learn from so few rows with its parameters (for "
            "example HistGradientBoostingClassifier's min_samples_leaf=20). Pass a "
            "final_estimator that suits the public set's size, or more public data.",
        )
        self.privacy_report_ = self._privacy_report(party_moments, queries, soft_labels)
        self.epsilon_ = self.privacy_report_.epsilon
        return self

    def _paper_tier_defaults(self):
        """Whether "auto" means the paper's choice: hard voting (the paper's algorithm),
        or L2, whose example-level guarantee needs disjoint teachers and students that
        learn only from their noisy votes."""
        return self.voting == "hard" or self.privacy_level == "L2"

    def _n_subsets(self):
        if self.n_subsets != "auto":
            return self.n_subsets
        # without L2 noise, subsets only weaken the teachers: one teacher per partition
        # learns from all of its party's rows
        return 5 if self._paper_tier_defaults() else 1

    def _pooling(self):
        if self.pooling != "auto":
            return self.pooling
        robust = self.voting == "soft" and self.privacy_level == "L0"
        return "prior-corrected" if robust else "sum"

    def _student_data(self):
        if self.student_data != "auto":
            return self.student_data
        return "public" if self._paper_tier_defaults() else "party+public"

    def _check_options(self):
        """Refuse option combinations that break privacy or cannot be carried out."""
        if self.pooling == "prior-corrected" and (
            self.voting == "hard" or self.privacy_level != "L0"
        ):
            raise ValueError(
                "pooling='prior-corrected' pools the students' class probabilities with "
                "their parties' class counts: it needs voting='soft', and no privacy "
                "accountant covers it, so it is refused at privacy_level "
                f"{self.privacy_level!r} (voting={self.voting!r}). Use pooling='auto' or "
                "'sum'."
            )
        if self.privacy_level == "L2" and self._student_data() == "party+public":
            raise ValueError(
                "student_data='party+public' trains every student on its party's rows, but "
                "privacy_level='L2' needs students that learn from noisy teacher votes "
                "only. Use student_data='auto' or 'public' at L2."
            )
        if self.soft_labels:
            for name, estimator in (("student_estimator", self._student_template()),
                                    ("final_estimator", self._final_template())):
                if sample_weight_param(estimator) is None:
                    raise ValueError(
                        "soft_labels=True teaches the students and the final model vote "
                        f"distributions through sample weights, but the {name} "
                        f"{type(estimator).__name__} takes no sample_weight in fit. Use "
                        "soft_labels=False."
                    )

    def _vote_targets(self, histograms, level, soft_labels, noise_rng, tie_rng):
        """What a tier's learner is taught from each of its vote histograms.

        Laplace noise is added at the tier of `level`; then either the (noisy) vote
        distribution, clipped at zero and normalised, or the plurality label.
        """
        for votes in histograms:
            votes = self._add_noise(votes, noise_rng, level)
            if soft_labels:
                votes = np.clip(votes, 0, None)
                totals = votes.sum(axis=1, keepdims=True)
                yield np.divide(votes, totals, out=np.zeros_like(votes, dtype=float),
                                where=totals > 0)
            else:
                yield plurality_vote(votes, tie_rng)

    @staticmethod
    def _target_task(estimator, targets, rows):
        """The Task that teaches `estimator` the targets of public rows `rows`.

        `targets` are labels (``-1`` for none) or per-row distributions (soft labels,
        passed as sample weights).
        """
        if targets.ndim == 2:
            pairs, labels, weights = soft_label_rows(targets)
            return Task(estimator, labels, rows[pairs], weights)
        labelled = targets >= 0
        if labelled.all() and np.array_equal(rows, np.arange(len(rows))):
            rows = None  # every public row: the engine then copies nothing
        else:
            rows = rows[labelled]
        return Task(estimator, targets[labelled].astype(np.int64), rows)

    def _student_targets(self, partition_votes, soft_labels, noise_rng, tie_rng):
        """Vote-1 of every partition, one partition at a time to bound memory.

        Returns each student's targets and, at L2, the log moments of each party's noisy
        histograms for the accountant.
        """
        moments = np.zeros((len(self.parties_), len(DEFAULT_ORDERS)))

        def account(partition_votes):
            for partition, votes in enumerate(partition_votes):
                if self.privacy_level == "L2" and not soft_labels:
                    # each partition is a PATE over its party's rows (sensitivity 2)
                    moments[partition // self.n_partitions] += pate_log_moments(
                        votes, gamma=self.gamma, sensitivity=2.0, orders=DEFAULT_ORDERS
                    )
                yield votes

        targets = [
            target.astype(np.float32) if soft_labels else target.astype(
                code_dtype(len(self.classes_))
            )
            for target in self._vote_targets(
                account(partition_votes), "L2", soft_labels, noise_rng, tie_rng
            )
        ]
        return targets, moments

    def _class_shares(self, data, party_counts, student_targets, learned):
        n_classes = len(self.classes_)

        def shares_of(targets):
            if targets.ndim == 2:
                return class_shares(targets)
            return class_shares(np.bincount(targets[targets >= 0], minlength=n_classes)[None])

        return {
            "training": class_shares(np.bincount(data.y, minlength=n_classes)[None]),
            "parties": party_counts / party_counts.sum(axis=1, keepdims=True),
            "students": np.array([shares_of(t) for t in student_targets]).reshape(
                len(self.parties_), self.n_partitions, n_classes
            ),
            "final": class_shares(learned),
        }

    def _warn_on_collapse(self):
        """One warning per tier whose labels lost classes that its training rows hold."""
        shares, names = self.class_shares_, self.classes_.tolist()
        remedy = (
            "Use voting='soft' (the default): it carries class probabilities through both tiers"
            if self.voting == "hard" else
            "More public data, fewer n_subsets (more rows per teacher) or a teacher that "
            "predicts calibrated probabilities help"
        )
        # a student's labels follow the public data, not its party's class mix, so only
        # a collapse to one class, where the party holds several, is a clear signal
        collapsed_students = [
            (party, partition, party_shares, np.flatnonzero(learned > 0))
            for party, party_shares, student_shares in zip(
                self.parties_.tolist(), shares["parties"], shares["students"]
            )
            for partition, learned in enumerate(student_shares)
            if np.count_nonzero(learned) == 1 and np.sum(party_shares >= _MIN_CLASS_SHARE) > 1
        ]
        if collapsed_students:
            party, partition, party_shares, (c,) = collapsed_students[0]
            held = ", ".join(f"{names[k]!r} {share:.0%}" for k, share in
                             enumerate(party_shares) if share >= _MIN_CLASS_SHARE)
            warnings.warn(
                f"{len(collapsed_students)} of {shares['students'][..., 0].size} students "
                "learned a single class from a party whose rows hold several; e.g. party "
                f"{party}, student {partition} learned only {names[c]!r} from rows holding "
                f"{held} (class_shares_ has every tier's shares). {remedy}.",
                LabelCollapseWarning,
            )
        final, training = shares["final"], shares["training"]
        lost = _lost_classes(final, training)
        if lost.size:
            learned_classes = [names[c] for c in np.flatnonzero(final > 0)]
            summary = (
                f"a single class ({learned_classes[0]!r})" if len(learned_classes) == 1
                else "labels far from the training labels' class shares"
            )
            details = ", ".join(
                f"class {names[c]!r}: {training[c]:.0%} of the training rows, "
                f"{final[c]:.0%} of the server's labels"
                for c in lost
            )
            warnings.warn(
                f"The final model learned {summary} ({details}); it will under-predict "
                f"those classes. {remedy}.",
                LabelCollapseWarning,
            )

    def _draw_queries(self, n_public, rng):
        """Sorted indices of the public examples the noisy tier labels.

        A prefix of one permutation: a larger `query_fraction` adds queries and never
        swaps them, so the privacy cost grows with it.
        """
        n_queries = max(1, round(self.query_fraction * n_public))
        return np.sort(rng.permutation(n_public)[:n_queries])

    def _add_noise(self, votes, rng, level):
        """Laplace noise of scale 1/gamma on every count, at the tier of `level` only."""
        if self.privacy_level != level:
            return votes
        return votes + rng.laplace(scale=1 / self.gamma, size=votes.shape)

    def _privacy_report(self, party_moments, queries, soft_labels):
        """Account the noisy tier (FedKT's Section 4 and Appendix A).

        Every vote, a class code or a probability vector, has L1 mass one, so one model
        moves a histogram by at most 2 either way. With soft labels the whole noisy
        histogram is released, not its argmax: only the data-independent bounds hold.
        """
        level, n_queries = self.privacy_level, len(queries)
        if level == "L0":
            return PrivacyReport(
                level="L0", unit=None, gamma=None, delta=None, sensitivity=None,
                n_queries=n_queries, data_dependent_epsilon=np.inf,
                data_independent_epsilon=np.inf, epsilon=np.inf,
                statement="FedKT-L0 adds no noise: no differential privacy (epsilon = inf).",
            )
        # said once in the statement rather than warned at every fit
        with warnings.catch_warnings(record=True) as largest_order:
            warnings.filterwarnings("always", message=".*largest moment order")
            data_dependent, data_independent, party_epsilons, sensitivity = self._account(
                party_moments, queries, soft_labels
            )
        if soft_labels:
            epsilon = data_independent
        elif level == "L1":
            epsilon = min(data_dependent, data_independent)
        else:
            # parallel composition over parties (Theorem 4)
            epsilon = max(party_epsilons.values())
        protects = (
            "for each party (whether it took part, with all its rows): the final model and "
            "the server's labels" if level == "L1" else
            "for each training example of each party, even towards the server: every "
            "student, hence the final model"
        )
        release = "noisy histograms (soft labels)" if soft_labels else "noisy-argmax queries"
        if soft_labels:
            bounds = (f"data-independent epsilon {data_independent:.4g} (the data-dependent "
                      "moments accountant covers argmax releases only)")
        else:
            bounds = (
                f"data-dependent epsilon {data_dependent:.4g} (moments accountant"
                + (f", still decreasing at the largest moment order {DEFAULT_ORDERS[-1]}"
                   if largest_order else "")
                + f"); data-independent epsilon {data_independent:.4g}. The data-dependent "
                "value is itself computed from private votes, so publishing it leaks "
                "information; only the data-independent value may be published as is"
            )
        statement = (
            f"FedKT-{level} is ({epsilon:.4g}, {self.delta:g})-differentially private "
            f"{protects}; {guarantee_strength(epsilon)}. {n_queries} {release} per noisy "
            f"histogram tier, Laplace scale 1/gamma = {1 / self.gamma:.4g}, sensitivity "
            f"{sensitivity:g}; {bounds}."
        )
        return PrivacyReport(
            level=level, unit="party" if level == "L1" else "example", gamma=self.gamma,
            delta=self.delta, sensitivity=sensitivity, n_queries=n_queries,
            data_dependent_epsilon=data_dependent, data_independent_epsilon=data_independent,
            epsilon=epsilon, party_epsilons=party_epsilons, orders=DEFAULT_ORDERS,
            statement=statement,
        )

    def _account(self, party_moments, queries, soft_labels):
        """(data-dependent, data-independent, per-party epsilons, sensitivity)."""
        accountant = dict(gamma=self.gamma, delta=self.delta, orders=DEFAULT_ORDERS)
        s, n_queries = self.n_partitions, len(queries)
        if self.privacy_level == "L1":
            # one party moves all s of its students: a count moves by s (Theorem 1)
            sensitivity = 2.0 * s
            data_dependent = np.nan if soft_labels else pate_epsilon(
                self.vote_counts_[queries], sensitivity=sensitivity, **accountant
            )
            data_independent = data_independent_epsilon(
                n_queries, sensitivity=sensitivity, **accountant
            )
            return data_dependent, data_independent, None, sensitivity
        # an example sits in one teacher of every partition: a party's partitions compose
        # (their moments were summed per party)
        sensitivity = 2.0
        data_independent = data_independent_epsilon(
            s * n_queries, sensitivity=sensitivity, **accountant
        )
        if soft_labels:
            return np.nan, data_independent, dict.fromkeys(
                self.parties_.tolist(), data_independent
            ), sensitivity
        party_data_dependent = [
            epsilon_from_log_moments(moments, delta=self.delta, orders=DEFAULT_ORDERS)
            for moments in party_moments
        ]
        party_epsilons = {
            party: min(eps, data_independent)
            for party, eps in zip(self.parties_.tolist(), party_data_dependent)
        }
        return max(party_data_dependent), data_independent, party_epsilons, sensitivity

    def _check_party_sizes(self, party_rows):
        for party, rows in zip(self.parties_.tolist(), party_rows):
            if len(rows) < self._n_subsets():
                raise ValueError(
                    f"Party {party!r} has {len(rows)} sample(s), fewer than "
                    f"n_subsets={self._n_subsets()}: each of its teachers needs at least "
                    "one sample."
                )

    def _server_votes(self, student_votes, n_classes, party_counts=None):
        """Vote-2 histogram of the students' votes on the public set.

        `student_votes` has shape (n_parties, n_partitions, n_public): class codes
        (hard voting), or (n_parties, n_partitions, n_public, n_classes): class
        probabilities (soft voting), summed over every student or pooled with the
        parties' class counts `party_counts` (needed for ``"prior-corrected"`` pooling
        only), then scaled to as many votes.
        """
        if student_votes.ndim == 4:
            if self._pooling() == "prior-corrected":
                n_students = student_votes.shape[0] * student_votes.shape[1]
                return n_students * prior_corrected_proba(
                    student_votes.mean(axis=1, dtype=np.float64), party_counts
                )
            return student_votes.sum(axis=(0, 1), dtype=np.float64)
        every_student_votes = count_votes(
            student_votes.reshape(-1, student_votes.shape[-1]), n_classes
        )
        if not self.consistent_voting:
            return every_student_votes
        first = student_votes[:, 0]
        unanimous = (student_votes == first[:, None]).all(axis=1)
        votes = count_votes(
            np.where(unanimous, first, -1), n_classes, weights=self.n_partitions
        )
        if not votes.any() and self.privacy_level != "L1":
            # at L1 the histogram is released as is: a data-dependent switch would leak
            warnings.warn(
                "No party's students agree on any public example, so consistent voting "
                "leaves nothing to learn from; counting every student's vote instead. "
                "More public data, more rows per teacher or fewer n_partitions avoid this.",
                UserWarning,
            )
            return every_student_votes
        return votes

    def predict(self, X):
        """Predict class labels with the final model.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The input samples.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            The predicted classes.
        """
        check_is_fitted(self)
        return self.classes_[self._final_model.predict(self._validate_predict_data(X))]

    @available_if(_final_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """Class probabilities of the final model, one column per class of ``classes_``.

        Classes the final model never learned get probability 0.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The input samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            The class probabilities, columns in the order of ``classes_``.
        """
        check_is_fitted(self)
        return self._final_model.predict_proba(
            self._validate_predict_data(X), len(self.classes_)
        )

    @available_if(_final_estimator_has("predict_proba"))
    def predict_log_proba(self, X):
        """Logarithm of `predict_proba`.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The input samples.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            The log class probabilities, columns in the order of ``classes_``.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    @available_if(_final_estimator_has("decision_function"))
    def decision_function(self, X):
        """Decision scores of the final model, in scikit-learn's layout for ``classes_``.

        Classes the final model never learned score ``-inf``.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The input samples.

        Returns
        -------
        scores : ndarray of shape (n_samples,) or (n_samples, n_classes)
            1-D for two classes (positive favours ``classes_[1]``).
        """
        check_is_fitted(self)
        return self._final_model.decision_function(
            self._validate_predict_data(X), len(self.classes_)
        )

"""FedKT: one-shot federated learning by two-tier knowledge transfer (Li, He and Song)."""

import warnings
from contextlib import contextmanager
from itertools import islice
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._base import (
    _MIN_CLASS_SHARE,
    BaseFederatedClassifier,
    LabelCollapseWarning,
    _lost_classes,
    pickled_bytes,
    stack_rows,
)
from ._federation import (
    PartyData,
    collect_uploads,
    derived_random_state,
    party_random_state,
    require_public_set,
    root_seed,
    server_expectations,
)
from ._fitting import (
    ClassCodeModel,
    Task,
    code_dtype,
    draw_seeds,
    fit_clones,
    group_votes,
    iter_clone_fits,
    predict_votes,
    sample_weight_param,
    soft_label_rows,
)
from ._voting import (
    class_shares,
    count_votes,
    plurality_vote,
    prior_corrected_proba,
    share_matching_offsets,
)
from ._upload import PartyUpload
from .privacy import (
    DEFAULT_ORDERS,
    PrivacyReport,
    data_independent_epsilon,
    epsilon_from_log_moments,
    guarantee_strength,
    pate_epsilon,
    pate_log_moments,
)


# standard errors by which the server's label shares may differ from the training's
# before it shifts them (see match_shares). Measured on random public subsets
# (benchmarks/bench_share_tolerance.py): 0 forces exact shares and costs up to 3 points
# where the votes were right; 2 gains far less under strong skew.
SHARE_TOLERANCE = 1.0


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
            for subset in np.array_split(random_state.permutation(rows), config._n_subsets())
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
                if config.privacy_level == "L2" and not soft_labels:
                    # each partition is a PATE over the party's rows (sensitivity 2)
                    self.log_moments += pate_log_moments(
                        votes, gamma=config.gamma, sensitivity=2.0, orders=DEFAULT_ORDERS
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
        tasks = [config._target_task(config._student_template(), t, queries) for t in targets]
        if config._student_data() == "party+public":
            tasks = [_with_party_rows(task, n_public, self.rows, self.y) for task in tasks]
        return tasks

    def upload(self, student_models, manifest):
        """Line 13: what the party sends, its students, and the facts the server needs:
        its class counts (not at L2, where they are not protected), its students' class
        shares and, at L2, its privacy guarantee."""
        private = self.config.privacy_level == "L2"
        return PartyUpload(
            manifest=dict(
                manifest,
                class_counts=None if private else self.class_counts.tolist(),
                student_class_shares=np.asarray(self.student_shares).tolist(),
                n_queries=self.n_queries,
                privacy=self.config._party_privacy(self.log_moments, self.n_queries)
                if private else None,
            ),
            payload={
                "students": [model.estimator for model in student_models],
                "codes": [model.codes for model in student_models],
            },
        )


@contextmanager
def _largest_order_noted():
    """Collects the accountant's 'largest moment order' warnings: the privacy statement
    says it once instead of a warning at every fit."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=".*largest moment order")
        yield caught


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
    match_shares : bool or "auto", default="auto"
        If True, the server adds one offset per class to the logarithm of its pooled
        soft votes, so that the share of every class among the labels it gives the
        public examples is within one standard error of sampling (``sqrt(p (1 - p) /
        n)`` for a class share ``p`` and ``n`` queries) of the class's share of the
        training rows (from the parties' class counts). Forests trained on skewed
        parties rank examples well but shrink a minority class's probability toward
        their own priors, so argmax labels under-count it; the offsets move the
        decision boundaries without reordering examples, and labels whose shares are
        already plausible for a random public set are left alone. This assumes the
        public data comes from the population of the training rows. It needs soft
        votes and the class counts, which no accountant covers: refused with
        ``voting="hard"`` and at L1 and L2. ``"auto"`` is True with soft votes at L0,
        else False.
    soft_labels : bool or {"auto", "students"}, default="auto"
        Whether learners learn the (noisy) vote distribution of every public example
        instead of its winning class: every example is repeated once per class with the
        class's share as sample weight, so those learners must accept ``sample_weight``
        (a Pipeline's final step must). ``"students"``: the students do, the final model
        learns the server's winning classes; True: both do; False: neither (the paper).
        With ``student_data="party+public"`` the public rows' weights are scaled so that
        together they weigh at most as much as the party's own rows: the teachers'
        probabilities come from those very rows, and a large public set would otherwise
        make each student a lossy copy of its teacher. ``"auto"`` is ``"students"`` with
        soft votes below L2 when the student estimator accepts ``sample_weight``, else
        False. Where a tier's noisy histogram is learned as a distribution (the students'
        at L2, the final model's at L1), the whole histogram is released, which only the
        data-independent bound covers. Measured with random forests (see the user
        guide): soft student labels carry a skewed party's class probabilities, not only
        its majority, to the server; soft final labels do not help.
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
        Bytes each party sent, aligned with ``parties_``: its students, the only
        communication of FedKT (the final model's trip back is not counted). `fit`
        counts them pickled; `fit_server` gives the size of each upload file.
    left_out_parties_ : dict
        Only after `fit_server`: the uploads it left out under ``min_parties``, with the
        reason, keyed by party (or file).
    vote_counts_ : ndarray of shape (n_public, n_classes)
        The server's noise-free vote histogram on the whole public set: vote counts
        (int64) with hard voting, summed class probabilities (float64) with soft voting.
        For analysis: it is what the L1 noise protects, and a deployment would not
        publish it.
    share_offsets_ : ndarray of shape (n_classes,)
        The log-offsets per class that the server added to its pooled votes so that
        its labels hold the training rows' class shares (see `match_shares`); zeros
        when it does not match shares. The final model learned the argmax of
        ``log(vote_counts_) + share_offsets_``.
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
    Across organisations, `fit_party` runs the party step on each party's machine and
    `fit_server` the server step on their upload files; `fit` is exactly these steps in
    one process, so both give the same model for the same `random_state` (a party's
    draws depend only on it and the party's name).

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
    only the argmax is released (not where the noisy tier's learners are taught soft
    labels: the students at L2, the final model at L1).

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
    array([0.37, 0.63])
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
        "match_shares": ["boolean", StrOptions({"auto"})],
        "soft_labels": ["boolean", StrOptions({"auto", "students"})],
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
        match_shares="auto",
        soft_labels="auto",
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
        self.match_shares = match_shares
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

        The party step (`fit_party`) of every party and the server step (`fit_server`)
        in one process, with the teachers of all parties in one flat parallel batch,
        then all students: the model is the one the deployed steps give for the same
        `random_state`.

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
        n_classes = len(self.classes_)
        root = root_seed(self.random_state)
        party_queries, server_queries = self._tier_queries(_num_samples(data.X_public), root)
        steps = [
            _FedKTParty(self, party, rows, data.y, derived_random_state(root, "party", party))
            for party, rows in zip(self.parties_.tolist(), data.party_rows)
        ]
        self._say(
            f"party tier: {sum(len(s.teacher_rows) for s in steps)} teachers "
            f"({len(steps)} parties x {self.n_partitions} partitions x {self._n_subsets()} "
            f"subsets) vote on {len(party_queries)} public rows, {self.voting} votes"
        )
        student_models, student_votes = self._party_tier(
            steps, data.X, data.X_public, party_queries, n_classes
        )
        uploads = [
            step.upload(models, dict(party=step.party, n_rows=len(step.rows)))
            for step, models in zip(steps, student_models)
        ]
        # the students are all that a party sends
        self.upload_bytes_ = np.array(
            [pickled_bytes(upload.payload["students"]) for upload in uploads]
        )
        self._server_step(uploads, student_votes, data.X_public, server_queries, root)
        if self.privacy_level == "L2":
            # parties do not send their class counts at L2; the simulation knows them
            counts = np.array([np.bincount(data.y[rows], minlength=n_classes)
                               for rows in data.party_rows])
            self.class_shares_.update(
                training=class_shares(counts.sum(axis=0)[None]),
                parties=counts / counts.sum(axis=1, keepdims=True),
            )
        self._warn_after_fit(data.X_public)
        return self

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
            ``privacy_level="L2"`` a server that knows `random_state` could then
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
        if self.privacy_level == "L2" and party_seed is None:
            warnings.warn(
                "At privacy_level='L2' the party's noise comes from party_seed; without "
                "one it derives from random_state and the party's name, which a server "
                "knowing random_state can recompute. Pass a secret party_seed.",
                UserWarning,
            )
        root = root_seed(self.random_state)
        party_queries, _ = self._tier_queries(_num_samples(data.X_public), root)
        step = _FedKTParty(self, data.party, rows, data.y,
                           party_random_state(self.random_state, data.party, party_seed))
        (models,), _ = self._party_tier(
            [step], data.X, data.X_public, party_queries, len(data.classes)
        )
        return step.upload(models, data.manifest(self))

    def fit_server(self, uploads, X_unlabeled, *, classes=None, trusted=(),
                   min_parties=None):
        """FedKT's server step: the parties' students vote, the final model learns.

        Checks every upload (algorithm parameters, classes, features, public-set
        fingerprint, the types it holds) before loading it, then runs lines 14-22 of
        Algorithm 1. With the uploads of `fit_party` and the same `random_state`, the
        fitted estimator equals the one `fit` gives on the parties' pooled rows.

        Parameters
        ----------
        uploads : list of str, path-like, bytes or PartyUpload
            The parties' upload files.
        X_unlabeled : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
            The agreed public unlabelled data.
        classes : array-like, default=None
            The agreed classes; ``None`` takes them from the first upload, which every
            other upload must then match.
        trusted : sequence of str, default=()
            Type names to load beyond scikit-learn's and XGBoost's (see
            `skfedkt.read_upload`).
        min_parties : int, default=None
            If given, uploads that fail a check are left out (with a warning, and in
            ``left_out_parties_``) as long as this many parties remain; if None, any
            failure raises.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        self._validate_params()
        self._check_options()
        require_public_set(X_unlabeled, "FedKT's server step")
        expected, X_unlabeled = server_expectations(self, X_unlabeled, classes)
        uploads, self.left_out_parties_ = collect_uploads(
            uploads, expected, trusted=trusted, min_parties=min_parties,
        )
        self.classes_ = np.array(uploads[0].manifest["classes"])
        self.parties_ = np.array([upload.party for upload in uploads])
        self.upload_bytes_ = np.array([upload.n_bytes for upload in uploads])
        n_classes = len(self.classes_)
        models = [ClassCodeModel(student, codes) for upload in uploads
                  for student, codes in zip(upload.payload["students"], upload.payload["codes"])]
        self._say(f"server: {len(uploads)} parties sent {len(models)} students")
        student_votes = predict_votes(models, X_unlabeled, n_classes=n_classes,
                                      soft_votes=self.voting == "soft", n_jobs=self.n_jobs)
        root = root_seed(self.random_state)
        _, server_queries = self._tier_queries(_num_samples(X_unlabeled), root)
        self._server_step(uploads, student_votes, X_unlabeled, server_queries, root)
        self._warn_after_fit(X_unlabeled)
        return self

    def _tier_queries(self, n_public, root):
        """The public rows each tier labels: (party tier's, server tier's).

        The noisy tier labels only the queries: the server at L0/L1, the parties at L2.
        """
        queries = self._draw_queries(n_public, derived_random_state(root, "public"))
        every_public = np.arange(n_public)
        if self.privacy_level == "L2":
            return queries, every_public
        return every_public, queries

    def _party_tier(self, steps, X, X_public, party_queries, n_classes):
        """Lines 2-12 for the parties of `steps`: all their teachers in one flat parallel
        batch, then all their students. Returns each party's fitted students (ClassCodeModel)
        and their votes on the public set, stacked (n_parties * n_partitions, n_public, ...).
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
            soft_votes=self.voting == "soft",
            keep_models=False,
            **fit_options,
        )
        histograms = group_votes(teacher_fits, self._n_subsets(), n_classes)
        student_tasks = [
            task
            for step in steps
            for task in step.student_tasks(
                islice(histograms, self.n_partitions), party_queries, n_public, n_classes
            )
        ]
        with_party_rows = self._student_data() == "party+public"
        self._say(f"party tier: {len(student_tasks)} students learn "
                  f"{'their party rows and ' if with_party_rows else ''}the teachers' labels")
        models, votes, _ = fit_clones(
            student_tasks,
            stack_rows(X_public, X) if with_party_rows else X_public,
            seeds=np.concatenate([step.student_seeds for step in steps]),
            X_predict=X_public,
            soft_votes=self.voting == "soft",
            **fit_options,
        )
        s = self.n_partitions
        return [models[start : start + s] for start in range(0, len(models), s)], votes

    def _server_step(self, uploads, student_votes, X_public, server_queries, root):
        """Lines 14-22: the server's (noisy) vote of the students, and the final model.

        `uploads` hold each party's students and manifest, `student_votes` the students'
        votes on the public set (stacked as `_party_tier` returns them).
        """
        n_parties, n_classes = len(uploads), len(self.classes_)
        n_public = _num_samples(X_public)
        soft_labels, soft_votes = self._soft_labels("final"), self.voting == "soft"
        self.students_ = [list(upload.payload["students"]) for upload in uploads]
        counts = [upload.manifest.get("class_counts") for upload in uploads]
        party_counts = None if None in counts else np.array(counts, dtype=np.int64)
        noise_rng, tie_rng = (
            np.random.RandomState(seed)
            for seed in draw_seeds(derived_random_state(root, "server"), 2)
        )
        self.vote_counts_ = self._server_votes(
            student_votes.reshape(n_parties, self.n_partitions, *student_votes.shape[1:]),
            n_classes, party_counts,
        )
        query_votes = self.vote_counts_[server_queries]
        self.share_offsets_ = np.zeros(n_classes)
        if self._match_shares():
            training = class_shares(party_counts.sum(axis=0)[None])
            # a random public set's shares differ from the training's by sampling
            # error alone: only labels outside that band are the votes' bias
            sampling_error = np.sqrt(training * (1 - training) / len(query_votes))
            self.share_offsets_ = share_matching_offsets(
                query_votes, training, tolerance=SHARE_TOLERANCE * sampling_error
            )
            # only the argmax or the normalised distribution is learned: scaling suffices
            query_votes = query_votes * np.exp(self.share_offsets_ - self.share_offsets_.max())
        (final_targets,) = self._vote_targets(
            [query_votes], "L1", soft_labels, noise_rng, tie_rng
        )
        final_task = self._target_task(self._final_template(), final_targets, server_queries)
        self._say(f"server: {self._pooling() if soft_votes else 'hard'} vote of "
                  f"{n_parties * self.n_partitions} students; the final model learns "
                  f"{len(np.unique(final_task.y))} classes on the public rows")
        (self._final_model,), _, _ = fit_clones(
            [final_task], X_public, n_classes=n_classes,
            seeds=draw_seeds(derived_random_state(root, "final"), 1),
        )
        self.final_estimator_ = self._final_model.estimator
        final_rows = np.arange(n_public) if final_task.rows is None else final_task.rows
        learned = np.zeros((n_public, n_classes))
        np.add.at(learned, (final_rows, final_task.y),
                  1.0 if final_task.sample_weight is None else final_task.sample_weight)
        self.public_mask_ = learned.any(axis=1)
        self.public_labels_ = self.classes_[learned[self.public_mask_].argmax(axis=1)]
        unknown = np.full(n_classes, np.nan)
        self.class_shares_ = {
            "training": unknown if party_counts is None else class_shares(
                party_counts.sum(axis=0)[None]
            ),
            "parties": np.tile(unknown, (n_parties, 1)) if party_counts is None else (
                party_counts / party_counts.sum(axis=1, keepdims=True)
            ),
            "students": np.array(
                [upload.manifest["student_class_shares"] for upload in uploads]
            ),
            "final": class_shares(learned),
        }
        self.privacy_report_ = self._privacy_report(
            [upload.manifest.get("privacy") for upload in uploads], server_queries,
            uploads[0].manifest["n_queries"] if self.privacy_level == "L2"
            else len(server_queries),
        )
        self.epsilon_ = self.privacy_report_.epsilon

    def _warn_after_fit(self, X_public):
        """Collapse warnings from the class shares, and for a final model whose
        predictions hold one class or distort the shares of its labels."""
        self._warn_on_collapse()
        learned_rows = np.flatnonzero(self.public_mask_)
        self._warn_if_classes_lost(
            self._final_model.predict(_safe_indexing(X_public, learned_rows)),
            f"The final model {type(self._final_template()).__name__} predicts on the "
            f"{len(learned_rows)} public rows it learned",
            np.searchsorted(self.classes_, self.public_labels_), "their labels",
            "it cannot learn from so few rows with its parameters (for "
            "example HistGradientBoostingClassifier's min_samples_leaf=20). Pass a "
            "final_estimator that suits the public set's size, or more public data.",
        )

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

    def _match_shares(self):
        if self.match_shares != "auto":
            return self.match_shares
        return self.voting == "soft" and self.privacy_level == "L0"

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
        if self._match_shares() and (
            self.voting == "hard" or self.privacy_level != "L0"
        ):
            raise ValueError(
                "match_shares=True shifts the server's soft votes toward the training "
                "rows' class shares, from every party's class counts: it needs "
                "voting='soft', and no privacy accountant covers it, so it is refused at "
                f"privacy_level {self.privacy_level!r} (voting={self.voting!r}). Use "
                "match_shares='auto' or False."
            )
        if self.privacy_level == "L2" and self._student_data() == "party+public":
            raise ValueError(
                "student_data='party+public' trains every student on its party's rows, but "
                "privacy_level='L2' needs students that learn from noisy teacher votes "
                "only. Use student_data='auto' or 'public' at L2."
            )
        if self.soft_labels in (True, "students"):
            tiers = [("student_estimator", self._student_template(), "the students")]
            if self.soft_labels is True:
                tiers.append(("final_estimator", self._final_template(), "the final model"))
            for name, estimator, learner in tiers:
                if sample_weight_param(estimator) is None:
                    raise ValueError(
                        f"soft_labels={self.soft_labels!r} teaches {learner} vote "
                        f"distributions through sample weights, but the {name} "
                        f"{type(estimator).__name__} takes no sample_weight in fit. Use "
                        "soft_labels='auto' or False."
                    )

    def _soft_labels(self, tier):
        """Whether the learners of `tier` ("students" or "final") learn vote
        distributions rather than winning classes."""
        if self.soft_labels == "auto":
            # measured: soft student labels help under skew, soft final labels do not;
            # L2 keeps the paper's noisy argmax, which its data-dependent bound needs
            return (tier == "students" and not self._paper_tier_defaults()
                    and sample_weight_param(self._student_template()) is not None)
        return self.soft_labels is True or (tier == "students"
                                            and self.soft_labels == "students")

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

    def _privacy_report(self, party_privacy, server_queries, n_queries):
        """Account the noisy tier (FedKT's Section 4 and Appendix A).

        Every vote, a class code or a probability vector, has L1 mass one, so one model
        moves a histogram by at most 2 either way. With soft labels the whole noisy
        histogram is released, not its argmax: only the data-independent bounds hold.
        """
        level = self.privacy_level
        soft_labels = self._soft_labels("students" if level == "L2" else "final")
        if level == "L0":
            return PrivacyReport(
                level="L0", unit=None, gamma=None, delta=None, sensitivity=None,
                n_queries=n_queries, data_dependent_epsilon=np.inf,
                data_independent_epsilon=np.inf, epsilon=np.inf,
                statement="FedKT-L0 adds no noise: no differential privacy (epsilon = inf).",
            )
        data_dependent, data_independent, party_epsilons, sensitivity, largest_order = (
            self._account(party_privacy, server_queries, n_queries)
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

    def _party_privacy(self, log_moments, n_queries):
        """A party's L2 guarantee, from the log moments of its noisy histograms.

        An example sits in one teacher of every partition: the party's partitions
        compose (their moments are summed), and sensitivity is 2. With soft labels the
        whole histogram is released: only the data-independent bound holds.
        """
        soft_labels = self._soft_labels("students")
        with _largest_order_noted() as largest_order:
            data_independent = data_independent_epsilon(
                self.n_partitions * n_queries, sensitivity=2.0, gamma=self.gamma,
                delta=self.delta, orders=DEFAULT_ORDERS,
            )
            data_dependent = np.nan if soft_labels else epsilon_from_log_moments(
                log_moments, delta=self.delta, orders=DEFAULT_ORDERS
            )
        return dict(
            data_dependent_epsilon=float(data_dependent),
            data_independent_epsilon=float(data_independent),
            epsilon=float(data_independent if soft_labels
                          else min(data_dependent, data_independent)),
            largest_order=bool(largest_order),
        )

    def _account(self, party_privacy, server_queries, n_queries):
        """(data-dependent, data-independent, per-party epsilons, sensitivity, whether the
        moments bound still decreased at the largest order)."""
        if self.privacy_level == "L1":
            # one party moves all s of its students: a count moves by s (Theorem 1)
            sensitivity = 2.0 * self.n_partitions
            accountant = dict(gamma=self.gamma, delta=self.delta, orders=DEFAULT_ORDERS)
            with _largest_order_noted() as largest_order:
                data_dependent = np.nan if self._soft_labels("final") else pate_epsilon(
                    self.vote_counts_[server_queries], sensitivity=sensitivity, **accountant
                )
                data_independent = data_independent_epsilon(
                    n_queries, sensitivity=sensitivity, **accountant
                )
            return data_dependent, data_independent, None, sensitivity, bool(largest_order)
        party_epsilons = {
            party: report["epsilon"]
            for party, report in zip(self.parties_.tolist(), party_privacy)
        }
        data_dependent = max(report["data_dependent_epsilon"] for report in party_privacy)
        data_independent = party_privacy[0]["data_independent_epsilon"]
        largest_order = any(report["largest_order"] for report in party_privacy)
        return data_dependent, data_independent, party_epsilons, 2.0, largest_order

    def _check_party_sizes(self, party_rows, parties=None):
        parties = self.parties_.tolist() if parties is None else parties
        for party, rows in zip(parties, party_rows):
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

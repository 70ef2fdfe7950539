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

from ._base import BaseFederatedClassifier, pickled_bytes
from ._fitting import code_dtype, draw_seeds, fit_clones
from ._voting import count_votes, plurality_vote
from .privacy import (
    DEFAULT_ORDERS,
    PrivacyReport,
    data_independent_epsilon,
    epsilon_from_log_moments,
    pate_epsilon,
    pate_log_moments,
)


def _all_or(rows, n_rows):
    """`rows`, or None when they are all `n_rows` rows: the engine then copies nothing."""
    return None if len(rows) == n_rows else rows


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

    With ``privacy_level="L1"`` or ``"L2"``, Laplace noise on the vote counts of one
    tier makes the final model differentially private; ``epsilon_`` and
    ``privacy_report_`` state the guarantee.

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
    n_subsets : int, default=5
        Number of subsets ``t`` per partition, hence of teachers per partition. Every
        party needs at least `n_subsets` rows.
    consistent_voting : bool, default=True
        If True, a party casts its `n_partitions` votes for a class only when all its
        students predict that class, and none otherwise (the paper's consistent voting).
        If False, every student casts one vote. When no party is unanimous on any public
        example, every student's vote is counted instead, with a warning.
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
        Controls the partitions and one seed per clone (set on every ``random_state``
        parameter of a clone, nested ones too, and on torch's RNG for skorch nets).
        Results are identical for any `n_jobs` and joblib backend, except for skorch nets
        under the threading backend, whose threads share torch's RNG.
    verbose : int, default=0
        Verbosity of the parallel fitting.

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
    vote_counts_ : ndarray of int64 of shape (n_public, n_classes)
        The server's noise-free vote histogram on the whole public set (for analysis: it
        is what the L1 noise protects, and a deployment would not publish it).
    public_mask_ : ndarray of bool of shape (n_public,)
        Which public examples the final model learned from: the server's queries that
        received a vote. At L1 every query is labelled by the noisy argmax; otherwise an
        example without votes (with consistent voting, no party unanimous) is left out.
    public_labels_ : ndarray of shape (n_learned,)
        The labels the final model learned, for the public examples in `public_mask_`.
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

    Argmax ties of either vote are broken in favour of the tied class that received the
    most votes over the whole public set in that histogram, then the first class in
    ``classes_`` order.

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
    >>> clf = FedKTClassifier(n_partitions=2, n_subsets=5, random_state=0)
    >>> clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    FedKTClassifier(random_state=0)
    >>> clf.parties_
    array([0, 1, 2, 3])
    >>> clf.vote_counts_.shape  # the server's votes on the public set
    (107, 2)
    >>> print(f"{clf.score(X_test, y_test):.2f}")
    0.9...
    """

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "student_estimator": [HasMethods(["fit", "predict"]), None],
        "final_estimator": [HasMethods(["fit", "predict"]), None],
        "n_partitions": [Interval(Integral, 1, None, closed="left")],
        "n_subsets": [Interval(Integral, 1, None, closed="left")],
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
        n_subsets=5,
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
        self._check_party_sizes(data.party_rows)
        n_classes = len(self.classes_)
        n_parties = len(self.parties_)
        n_public = _num_samples(data.X_public)
        rng = check_random_state(self.random_state)
        # own streams, so the noise and the queries leave every other draw unchanged
        noise_rng, query_rng = (np.random.RandomState(seed) for seed in draw_seeds(rng, 2))
        queries = self._draw_queries(n_public, query_rng)
        # the noisy tier labels only the queries (the server at L0/L1, the parties at L2)
        every_public = np.arange(n_public)
        party_queries, server_queries = (
            (queries, every_public) if self.privacy_level == "L2" else (every_public, queries)
        )
        party_public_rows = _all_or(party_queries, n_public)
        fit_options = dict(n_classes=n_classes, n_jobs=self.n_jobs, verbose=self.verbose)

        # Party side, lines 2-10: the teachers of every partition of every party vote.
        teacher_rows = [
            subset
            for rows in data.party_rows
            for _ in range(self.n_partitions)
            for subset in np.array_split(rng.permutation(rows), self.n_subsets)
        ]
        teacher_predictions = fit_clones(
            [(self._teacher_template(), data.y, rows) for rows in teacher_rows],
            data.X,
            seeds=draw_seeds(rng, len(teacher_rows)),
            X_predict=(data.X_public if party_public_rows is None
                       else _safe_indexing(data.X_public, party_public_rows)),
            keep_models=False,
            **fit_options,
        ).predictions
        # Lines 11-12: a student per partition learns the teachers' winning labels.
        student_labels, party_moments = self._student_labels(
            teacher_predictions.reshape(n_parties * self.n_partitions, self.n_subsets, -1),
            n_classes, n_public, party_queries, noise_rng,
        )
        del teacher_predictions
        student_models, student_predictions, _ = fit_clones(
            [(self._student_template(), labels, party_public_rows) for labels in student_labels],
            data.X_public,
            seeds=draw_seeds(rng, len(student_labels)),
            X_predict=data.X_public,
            **fit_options,
        )
        self.students_ = [
            [model.estimator for model in student_models[start : start + self.n_partitions]]
            for start in range(0, len(student_models), self.n_partitions)
        ]
        # line 13: the students are all that a party sends
        self.upload_bytes_ = np.array([pickled_bytes(students) for students in self.students_])

        # Server side, lines 14-22: the students vote, the final model learns.
        self.vote_counts_ = self._server_votes(
            student_predictions.reshape(n_parties, self.n_partitions, -1), n_classes
        )
        public_codes = np.full(n_public, -1)
        public_codes[server_queries] = plurality_vote(
            self._add_noise(self.vote_counts_[server_queries], noise_rng, "L1")
        )
        self.public_mask_ = public_codes >= 0
        self.public_labels_ = self.classes_[public_codes[self.public_mask_]]
        (self._final_model,), _, _ = fit_clones(
            [(self._final_template(), public_codes,
              _all_or(np.flatnonzero(self.public_mask_), n_public))],
            data.X_public,
            seeds=draw_seeds(rng, 1),
            **fit_options,
        )
        self.final_estimator_ = self._final_model.estimator
        self.privacy_report_ = self._privacy_report(party_moments, queries)
        self.epsilon_ = self.privacy_report_.epsilon
        return self

    def _student_labels(self, teacher_predictions, n_classes, n_public, party_queries,
                        noise_rng):
        """Vote-1 of every partition, one partition at a time to bound memory.

        Returns the students' labels (``-1`` off the queries) and, at L2, the log
        moments of each party's noisy histograms for the accountant.
        """
        labels = np.full((len(teacher_predictions), n_public), -1, dtype=code_dtype(n_classes))
        moments = np.zeros((len(self.parties_), len(DEFAULT_ORDERS)))
        for partition, predictions in enumerate(teacher_predictions):
            votes = count_votes(predictions, n_classes)
            labels[partition, party_queries] = plurality_vote(
                self._add_noise(votes, noise_rng, "L2")
            )
            if self.privacy_level == "L2":
                # each partition is a PATE over its party's rows (sensitivity 2)
                moments[partition // self.n_partitions] += pate_log_moments(
                    votes, gamma=self.gamma, sensitivity=2.0, orders=DEFAULT_ORDERS
                )
        return labels, moments

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

    def _privacy_report(self, party_moments, queries):
        """Account the noisy tier (FedKT's Section 4 and Appendix A)."""
        level, n_queries, s = self.privacy_level, len(queries), self.n_partitions
        if level == "L0":
            return PrivacyReport(
                level="L0", unit=None, gamma=None, delta=None, sensitivity=None,
                n_queries=n_queries, data_dependent_epsilon=np.inf,
                data_independent_epsilon=np.inf, epsilon=np.inf,
                statement="FedKT-L0 adds no noise: no differential privacy (epsilon = inf).",
            )
        accountant = dict(gamma=self.gamma, delta=self.delta, orders=DEFAULT_ORDERS)
        if level == "L1":
            # one party moves all s of its students: a count moves by s (Theorem 1)
            sensitivity = 2.0 * s
            data_dependent = pate_epsilon(
                self.vote_counts_[queries], sensitivity=sensitivity, **accountant
            )
            data_independent = data_independent_epsilon(
                n_queries, sensitivity=sensitivity, **accountant
            )
            party_epsilons = None
            epsilon = min(data_dependent, data_independent)
            protects = (
                "party level: the final model and the server's labels hide whether any one "
                "party took part"
            )
        else:
            # an example sits in one teacher of every partition: a party's partitions
            # compose (their moments were summed per party)
            sensitivity = 2.0
            party_data_dependent = [
                epsilon_from_log_moments(moments, delta=self.delta, orders=DEFAULT_ORDERS)
                for moments in party_moments
            ]
            data_dependent = max(party_data_dependent)
            data_independent = data_independent_epsilon(
                s * n_queries, sensitivity=sensitivity, **accountant
            )
            party_epsilons = {
                party: min(eps, data_independent)
                for party, eps in zip(self.parties_.tolist(), party_data_dependent)
            }
            # parallel composition over parties (Theorem 4)
            epsilon = max(party_epsilons.values())
            protects = (
                "example level: every student, hence the final model, hides any one "
                "training example of its party, even from the server"
            )
        statement = (
            f"FedKT-{level} is ({epsilon:.4g}, {self.delta:g})-differentially private at the "
            f"{protects}. {n_queries} noisy-argmax queries per noisy histogram tier, Laplace "
            f"scale 1/gamma = {1 / self.gamma:.4g}, sensitivity {sensitivity:g}. "
            f"Data-dependent epsilon {data_dependent:.4g} (moments accountant); "
            f"data-independent epsilon {data_independent:.4g}. The data-dependent value is "
            "itself computed from private votes, so publishing it leaks information; only "
            "the data-independent value may be published as is."
        )
        return PrivacyReport(
            level=level, unit="party" if level == "L1" else "example", gamma=self.gamma,
            delta=self.delta, sensitivity=sensitivity, n_queries=n_queries,
            data_dependent_epsilon=data_dependent, data_independent_epsilon=data_independent,
            epsilon=epsilon, party_epsilons=party_epsilons, orders=DEFAULT_ORDERS,
            statement=statement,
        )

    def _check_party_sizes(self, party_rows):
        for party, rows in zip(self.parties_.tolist(), party_rows):
            if len(rows) < self.n_subsets:
                raise ValueError(
                    f"Party {party!r} has {len(rows)} sample(s), fewer than "
                    f"n_subsets={self.n_subsets}: each of its teachers needs at least "
                    "one sample."
                )

    def _server_votes(self, student_predictions, n_classes):
        """Vote-2 histogram from predictions of shape (n_parties, n_partitions, n_public)."""
        every_student_votes = count_votes(
            student_predictions.reshape(-1, student_predictions.shape[-1]), n_classes
        )
        if not self.consistent_voting:
            return every_student_votes
        first = student_predictions[:, 0]
        unanimous = (student_predictions == first[:, None]).all(axis=1)
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

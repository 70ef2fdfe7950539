"""FedKT: one-shot federated learning by two-tier knowledge transfer (Li, He and Song)."""

import warnings
from numbers import Integral

import numpy as np
from sklearn.base import _fit_context
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ._base import BaseFederatedClassifier
from ._fitting import draw_seeds, fit_clones
from ._voting import count_votes, plurality_vote


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

    This is privacy level L0 of the paper: no noise is added to any vote.

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
    feature_names_in_ : ndarray of shape (n_features_in_,)
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
    vote_counts_ : ndarray of int64 of shape (n_public, n_classes)
        The server's vote histogram on the public data.
    public_mask_ : ndarray of bool of shape (n_public,)
        Which public examples the final model learned from: those that received at least
        one vote (with consistent voting, an example on which no party is unanimous
        receives none and is left out).
    public_labels_ : ndarray of shape (n_learned,)
        The labels the final model learned, for the public examples in `public_mask_`.

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

    Argmax ties of either vote are broken in favour of the tied class that received the
    most votes over the whole public set in that histogram, then the first class in
    ``classes_`` order.

    References
    ----------
    .. [1] Q. Li, B. He and D. Song, "Practical One-Shot Federated Learning for
       Cross-Silo Setting", IJCAI 2021, Algorithm 1.

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
        rng = check_random_state(self.random_state)
        fit_options = dict(n_classes=n_classes, n_jobs=self.n_jobs, verbose=self.verbose)

        # Party side, lines 2-8: the teachers of every partition of every party vote.
        teacher_rows = [
            subset
            for rows in data.party_rows
            for _ in range(self.n_partitions)
            for subset in np.array_split(rng.permutation(rows), self.n_subsets)
        ]
        teacher = self._teacher_template()
        _, teacher_predictions = fit_clones(
            [(teacher, data.y, rows) for rows in teacher_rows],
            data.X,
            seeds=draw_seeds(rng, len(teacher_rows)),
            X_predict=data.X_public,
            keep_models=False,
            **fit_options,
        )
        teacher_predictions = teacher_predictions.reshape(
            n_parties * self.n_partitions, self.n_subsets, -1
        )
        # Line 11-12: a student per partition learns the teachers' winning labels.
        student_labels = [
            plurality_vote(count_votes(predictions, n_classes))
            for predictions in teacher_predictions
        ]
        student = self._student_template()
        student_models, student_predictions = fit_clones(
            [(student, labels, None) for labels in student_labels],
            data.X_public,
            seeds=draw_seeds(rng, len(student_labels)),
            X_predict=data.X_public,
            **fit_options,
        )
        self.students_ = [
            [model.estimator for model in student_models[start : start + self.n_partitions]]
            for start in range(0, len(student_models), self.n_partitions)
        ]

        # Server side, lines 14-22: the students vote, the final model learns.
        self.vote_counts_ = self._server_votes(
            student_predictions.reshape(n_parties, self.n_partitions, -1), n_classes
        )
        public_codes = plurality_vote(self.vote_counts_)
        self.public_mask_ = public_codes >= 0
        self.public_labels_ = self.classes_[public_codes[self.public_mask_]]
        (self._final_model,), _ = fit_clones(
            [(self._final_template(), public_codes, np.flatnonzero(self.public_mask_))],
            data.X_public,
            seeds=draw_seeds(rng, 1),
            **fit_options,
        )
        self.final_estimator_ = self._final_model.estimator
        return self

    def _check_party_sizes(self, party_rows):
        for party, rows in zip(self.parties_, party_rows):
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
        if not votes.any():
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

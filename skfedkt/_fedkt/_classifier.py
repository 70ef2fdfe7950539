"""FedKTClassifier: its parameters, and `fit`, which composes the party and server steps."""

from numbers import Integral

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _num_samples, check_is_fitted

from .._base import BaseFederatedClassifier, shared_docs
from .._deployment._protocol import (
    collect_uploads,
)
from .._engine._fitting import ClassCodeModel, predict_votes
from .._engine._seeds import derived_random_state, party_random_state, root_seed
from .._engine._validation import pickled_bytes
from .._engine._voting import class_shares
from .._privacy._accounting import DEFAULT_ORDERS
from .._privacy._mechanisms import PartyNoise, ServerNoise
from .._privacy._release import final_model_release, models_release
from ._party import (
    FedKTParty,
    check_party_sizes,
    party_guarantee,
    party_step,
    party_tier,
)
from ._plan import FedKTPlan, learners
from ._server import (
    _student_models,
    check_upload,
    pooled_student_proba,
    server_step,
    warn_after_fit,
)
from ._votes import HardVotes, SoftVotes


def _students_release(party, students, codes, n_classes, epsilon, delta):
    return models_release("upload", party, [ClassCodeModel(student, student_codes)
                                            for student, student_codes in zip(students, codes)],
                          n_classes, epsilon, delta if np.isfinite(epsilon) else 0.0)


def _final_estimator_has(attr):
    def check(self):
        return self.distill and hasattr(learners(self)[2], attr)

    return check


def _has_predict_proba(self):
    # without a final model, the students' pooled vote gives the probabilities
    return not self.distill or hasattr(learners(self)[2], "predict_proba")


class FedKTClassifier(BaseFederatedClassifier):
    """FedKT: one-shot federated classification by two-tier knowledge transfer.

    Each party splits its rows ``n_partitions`` times into ``n_subsets`` disjoint
    subsets and trains one teacher per subset. In every partition the teachers vote on
    the public unlabelled data and a student learns the winning labels (PATE inside the
    party). The parties send their students to the server, which lets them vote on the
    public data in turn and trains the final model on the winning labels. One round of
    communication, any classifier, and only the students leave the parties. With
    ``distill=False`` the server trains no final model and predicts with the students'
    vote instead.

    By default votes are class probabilities (``voting="soft"``), which keeps the
    minority classes of skewed parties alive through both tiers; ``voting="hard"`` is
    the paper's Algorithm 1 exactly. With ``privacy=ServerNoise()`` (L1) or
    ``PartyNoise()`` (L2), noise on the vote counts of one tier makes the final model
    differentially private;
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
    n_subsets : int, default=5
        Number of disjoint subsets ``t`` per partition, hence of teachers per
        partition (the paper's 5). Every party needs at least `n_subsets` rows. A row
        shapes one teacher of each partition, one vote of `n_subsets`, which keeps a
        party's rows from showing in its upload; 1 makes stronger teachers whose
        labels the students copy, and the upload leaks (measured in :doc:`/privacy`).
    voting : {"soft", "hard"}, SoftVotes or HardVotes, default="soft"
        How teachers and students vote, and how the server pools their votes.
        ``"soft"`` (`skfedkt.SoftVotes()`): class probabilities, corrected at the server
        for the parties' class mixes, on the public rows and their jittered copies; it
        keeps the minority classes of skewed parties alive through both tiers.
        ``"hard"`` (`skfedkt.HardVotes()`): each model votes for its predicted class, and
        a party only where all its students agree: the paper's Algorithm 1 exactly. An
        instance sets the parts (``SoftVotes(pooling="sum")``,
        ``HardVotes(consistent=False)``); ``voting_`` holds the one that ran.
    student_data : {"public", "party+public"}, default="public"
        What the students, all that a party uploads, learn from: the public data
        labelled by its teachers (``"public"``, the paper), so that the party's own rows
        shape its upload only through its teachers' votes; or that plus the party's own
        labelled rows (``"party+public"``), so that a student knows at least what its
        party knows. With ``"party+public"`` the upload reveals which rows the party
        holds about as much as shipping a model trained on them, and no privacy
        mechanism covers that (measured in :doc:`/privacy`): refused with
        ``PartyNoise``, stated in ``privacy_report_`` and in every upload's manifest
        (``privacy_note``). Check an upload with
        `skfedkt.privacy.party_membership_audit` before sending it.
    soft_labels : bool or "students", default=False
        Whether learners learn the (noisy) vote distribution of every public example
        instead of its winning class: every example is repeated once per class with the
        class's share as sample weight, so those learners must accept ``sample_weight``
        (a Pipeline's final step must). ``"students"``: the students do, the final model
        learns the server's winning classes; True: both do; False: neither (the
        paper). Soft student labels carry more of a skewed party's minority classes to
        the server, but a student that copies its teachers' probabilities copies what
        their rows taught them, and the upload leaks (both measured in the user guide,
        "Under label skew"). With
        ``student_data="party+public"`` the public rows' weights are scaled so that
        together they weigh at most as much as the party's own rows. Where a tier's
        noisy histogram is learned as a distribution (the students' at L2, the final
        model's at L1), the whole histogram is released, which only the
        data-independent bound covers.
    distill : bool, default=True
        Whether the server distils the students into one final model (the paper). If
        False, it trains none: `predict` and `predict_proba` pool the students' soft
        votes on the rows given exactly as the server pools them on the public set
        (prior correction and share offsets included), so every party's students run
        at prediction time: more accurate where the public set is too small to carry
        what the students know into one model (user guide, "When it struggles"), at the
        price of a model `n_partitions` times the number of parties larger. Needs soft
        votes. Refused with ``ServerNoise``,
        whose guarantee covers the server's noisy labels of the public set, not the
        students' votes on new rows; at L2 the students themselves are differentially
        private, and so is anything computed from them.
    privacy : ServerNoise, PartyNoise or None, default=None
        Where noise is added to the vote counts (FedKT's privacy levels), with its
        scale, query budget and delta (`skfedkt.privacy.ServerNoise`,
        `skfedkt.privacy.PartyNoise`):

        - ``None`` (L0): nowhere; no privacy guarantee.
        - ``ServerNoise(...)`` (L1): on every count of the server's vote histogram. The
          final model is differentially private at the *party* level.
        - ``PartyNoise(...)`` (L2): on every count of every teacher vote histogram of
          every partition of every party. Every student, and hence the final model, is
          differentially private at the *example* level, even towards the server.

        Settable in a search as ``privacy__gamma``. ``privacy_report_`` and `epsilon_`
        state the guarantee.
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
    voting_ : SoftVotes or HardVotes
        The votes that ran, every ``"auto"`` part resolved (with soft votes, the
        server's pooling and whether it matched class shares).
    students_ : list of list of estimator
        ``students_[i]`` holds the `n_partitions` fitted students of party
        ``parties_[i]``. Like every fitted clone, each was trained on the positions
        ``0..k-1`` of the ``k`` classes its labels held (skorch nets: on the indices
        into ``classes_``), so its own predictions are not labels of ``classes_``; a
        student whose labels held a single class is a constant ``DummyClassifier``.
    final_estimator_ : estimator
        The server's fitted final model, trained on class positions like the students.
        Not set with ``distill=False``.
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
        its labels hold the training rows' class shares (``SoftVotes(match_shares)``); zeros
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

    _plan_type = FedKTPlan

    _private_fitted = ("_final_model", "_party_counts", "_student_codes")

    _parameter_objects = ("privacy", "voting")

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "student_estimator": [HasMethods(["fit", "predict"]), None],
        "final_estimator": [HasMethods(["fit", "predict"]), None],
        "n_partitions": [Interval(Integral, 1, None, closed="left")],
        "n_subsets": [Interval(Integral, 1, None, closed="left")],
        "voting": [StrOptions({"soft", "hard"}), SoftVotes, HardVotes],
        "student_data": [StrOptions({"public", "party+public"})],
        "soft_labels": ["boolean", StrOptions({"students"})],
        "distill": ["boolean"],
        "privacy": [ServerNoise, PartyNoise, None],
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
        voting="soft",
        student_data="public",
        soft_labels=False,
        distill=True,
        privacy=None,
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
        self.soft_labels = soft_labels
        self.distill = distill
        self.privacy = privacy
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _base_estimators(self):
        return list(learners(self))

    @_fit_context(prefer_skip_nested_validation=False)
    @shared_docs
    def fit(self, X, y, groups=None, X_unlabeled=None):
        """Run FedKT: teachers and students in every party, then the server's model.

        The party step (`fit_party`) of every party and the server step (`fit_server`)
        in one process, with the teachers of all parties in one flat parallel batch,
        then all students: the model is the one the deployed steps give for the same
        `random_state`.

        Parameters
        ----------
        $fit_data
        $public_set

        Returns
        -------
        self : object
            The fitted classifier.
        """
        plan, data = self._fit_inputs(X, y, groups, X_unlabeled)
        check_party_sizes(plan, self.parties_.tolist(), data.party_rows)  # before any fit
        n_classes = len(self.classes_)
        root = root_seed(self.random_state)
        X_labelled, party_rows, server_rows = plan.tier_rows(data.X_public, root)
        parties = [
            FedKTParty(plan, party, rows, data.y,
                       derived_random_state(root, "party", party, scratch=True))
            for party, rows in zip(self.parties_.tolist(), data.party_rows)
        ]
        plan.say(
            f"party tier: {sum(len(p.teacher_rows) for p in parties)} teachers "
            f"({len(parties)} parties x {plan.n_partitions} partitions x {plan.n_subsets} "
            f"subsets) vote on {len(party_rows)} public rows, {plan.votes.kind} votes"
        )
        student_models, student_votes = party_tier(
            plan, parties, data.X, X_labelled, party_rows, n_classes
        )
        uploads = [
            party.upload(models, dict(party=party.party, n_rows=len(party.rows)))
            for party, models in zip(parties, student_models)
        ]
        fitted = server_step(plan, uploads, student_votes, X_labelled, server_rows, root,
                             _num_samples(data.X_public), self.classes_, claimed=False)
        # the students are all that a party sends
        fitted["upload_bytes_"] = np.array(
            [pickled_bytes(upload.payload["students"]) for upload in uploads]
        )
        if plan.level == "L2":
            # parties do not send their class counts at L2; the simulation knows them
            counts = np.array([np.bincount(data.y[rows], minlength=n_classes)
                               for rows in data.party_rows])
            fitted["class_shares_"].update(
                training=class_shares(counts.sum(axis=0)[None]),
                parties=counts / counts.sum(axis=1, keepdims=True),
            )
        warn_after_fit(plan, fitted, self.classes_, self.parties_, data.X_public)
        vars(self).update(fitted)
        return self

    @shared_docs
    def fit_party(self, X, y, *, party, classes, X_unlabeled, party_seed=None):
        """FedKT's party step, on one party's machine: teachers, votes, students.

        Runs lines 2-13 of Algorithm 1 on the party's own rows and returns what the
        party sends: its students and a manifest. This estimator is not modified.

        Parameters
        ----------
        $party_data
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

        plan, data = self._party_inputs(X, y, party, classes, X_unlabeled,
                                        public_step="FedKT's party step")
        return party_step(
            plan, data, data.manifest(self),
            party_random_state(self.random_state, data.party, party_seed),
            root_seed(self.random_state), seeded=party_seed is not None,
        )

    @shared_docs
    def fit_server(self, uploads, X_unlabeled, *, classes=None, trusted=(),
                   min_parties=None, limits=None):
        """FedKT's server step: the parties' students vote, the final model learns.

        Checks every upload (algorithm parameters, classes, features, public-set
        fingerprint, the types it holds) before loading it, then runs lines 14-22 of
        Algorithm 1. With the uploads of `fit_party` and the same `random_state`, the
        fitted estimator equals the one `fit` gives on the parties' pooled rows.

        Parameters
        ----------
        $uploads
        X_unlabeled : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
            The agreed public unlabelled data.
        $upload_checks

        Returns
        -------
        self : object
            The fitted classifier.
        """

        plan, expected, X_unlabeled = self._server_inputs(
            X_unlabeled, classes, public_step="FedKT's server step")
        root = root_seed(self.random_state)
        X_labelled, party_rows, server_rows = plan.tier_rows(X_unlabeled, root)
        # the data-independent bound of a party at L2, computed once for every upload
        bound = (party_guarantee(plan, np.zeros(len(DEFAULT_ORDERS)), len(party_rows))
                 ["data_independent_epsilon"] if plan.level == "L2" else None)
        uploads, left_out = collect_uploads(
            uploads, expected, trusted=trusted, min_parties=min_parties, limits=limits,
            check=lambda checker: check_upload(plan, checker, len(party_rows), bound),
        )
        classes = np.array(uploads[0].manifest["classes"])
        parties = np.array([upload.party for upload in uploads])
        models = _student_models([upload.payload["students"] for upload in uploads],
                                 [upload.payload["codes"] for upload in uploads])
        plan.say(f"server: {len(uploads)} parties sent {len(models)} students")
        student_votes = predict_votes(models, X_labelled, n_classes=len(classes),
                                      soft_votes=plan.soft_votes, n_jobs=plan.n_jobs)
        fitted = server_step(plan, uploads, student_votes, X_labelled, server_rows, root,
                             _num_samples(X_unlabeled), classes)
        warn_after_fit(plan, fitted, classes, parties, X_unlabeled)
        self._set_server_fit(fitted, uploads, classes, left_out)
        return self

    def _membership_releases(self):
        """What FedKT lets out (see `skfedkt.privacy.membership_audit`): every party's
        students, its upload (at L2 covered by the party's epsilon), and the final model
        (covered by ``epsilon_`` at L1 and L2)."""
        report = self.privacy_report_
        party_epsilons = report.party_epsilons or {}
        delta = 0.0 if report.delta is None else report.delta
        uploads = [
            _students_release(party, students, codes, len(self.classes_),
                              party_epsilons.get(party, np.inf), delta)
            for party, students, codes in zip(
                self.parties_.tolist(), self.students_, self._student_codes
            )
        ]
        return [*uploads, final_model_release(self, self.epsilon_, delta)]

    @staticmethod
    def _upload_releases(upload, n_classes):
        """What one party's upload lets out: its students (at L2 with its guarantee)."""
        privacy = upload.manifest.get("privacy") or {}
        return [_students_release(
            upload.party, upload.payload["students"], upload.payload["codes"], n_classes,
            privacy.get("epsilon", np.inf), upload.manifest["params"]["delta"]
            if privacy else 0.0,
        )]

    def _student_vote_proba(self, X):
        """The server's pooled, share-shifted vote of the students on `X`, normalised:
        what the final model learned on the public rows, and ``distill=False``
        predicts."""
        return pooled_student_proba(self.voting_, self.students_, self._student_codes,
                                    self._party_counts, self.share_offsets_, X,
                                    len(self.classes_), self.n_jobs)

    def _predict_codes(self, X):
        # the final model, or with distill=False the students' pooled vote
        if not self.distill:
            return self._student_vote_proba(X).argmax(axis=1)
        return self._final_model.predict(X)

    @available_if(_has_predict_proba)
    def predict_proba(self, X):
        """Class probabilities of the final model, one column per class of ``classes_``.

        Classes the final model never learned get probability 0. With
        ``distill=False``, the students' pooled vote, normalised.

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
        X = self._validate_predict_data(X)
        if not self.distill:
            return self._student_vote_proba(X)
        return self._final_model.predict_proba(X, len(self.classes_))

    @available_if(_has_predict_proba)
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

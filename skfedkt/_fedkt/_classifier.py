"""FedKTClassifier: its parameters, and `fit`, which composes the party and server steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from .._engine._compat import HasMethods, Interval, StrOptions
from .._base import BaseFederatedClassifier, Releases, Uploads, shared_docs
from .._deployment._received import UploadChecker
from .._deployment._upload import PartyUpload, payloads_bytes
from .._engine._context import (
    Message,
    PartyContext,
    PartyStepResult,
    ServerContext,
)
from .._engine._class_codes import ClassCodeModel
from .._engine._voting import class_shares
from .._privacy._accounting import DEFAULT_ORDERS
from .._privacy._mechanisms import DistributedNoise, PartyNoise, ServerNoise
from .._engine._validation import FederatedData
from .._privacy._release import Release, final_model_release, models_release
from .._deployment._fields import Field, InClear
from ._party import FedKTParty, check_party_sizes, party_guarantee, party_step
from ._payloads import FedKTUpload, fedkt_upload
from ._plan import FedKTPlan, learners
from ._server import check_upload, pooled_student_proba, server_step, warn_after_fit
from ._sums import SUMS, consistent, party_weights
from ._votes import HardVotes, SoftVotes


def _students_release(party: Any, students: list[Any], codes: list[np.ndarray],
                      n_classes: int, epsilon: float, delta: float) -> Release:
    return models_release("upload", party, [ClassCodeModel(student, student_codes)
                                            for student, student_codes in zip(students, codes)],
                          n_classes, epsilon, delta if np.isfinite(epsilon) else 0.0)


def _upload_check(context: ServerContext[FedKTPlan],
                  final: bool) -> Callable[[UploadChecker], Any]:
    plan = context.plan
    n_queries = len(plan.tier_rows(context.X_public, context.root)[1])
    # the data-independent bound of a party at L2, computed once for every upload
    bound = (party_guarantee(plan, np.zeros(len(DEFAULT_ORDERS)), n_queries)
             ["data_independent_epsilon"] if plan.level == "L2" else None)
    return lambda checker: check_upload(plan, checker, n_queries, bound)


def _sent_bytes(clf: FedKTClassifier) -> np.ndarray:
    # the students, in the clear (the base adds what each party sent in the sum)
    return payloads_bytes([dict(FedKTUpload(students=students, codes=codes))
                           for students, codes in zip(clf.students_, clf._student_codes)],
                          clf.n_jobs)


def _undistilled(plan: FedKTPlan) -> tuple[str, str] | None:
    return None if plan.distill else ("distill=False (the students' vote)", "distill=True")


def _refusal(plan: FedKTPlan, secure: bool) -> str | None:
    if not secure and isinstance(plan.privacy, DistributedNoise):
        return ("DistributedNoise is added by the parties in shares of a secure sum, "
                "which is off; pass ServerNoise for the same noise added by the server")
    return None


FIELDS: tuple[Field, ...] = (
    InClear("students", "its fitted students, one per partition", party_only=True,
            needed_when=_undistilled, withheld=[]),
    InClear("codes", "the class codes of each student's outputs", party_only=True,
            needed_when=_undistilled, withheld=[]),
    InClear("class_counts", "its rows of each class (at L2 with noise, where released)",
            "manifest", party_only=True),
    InClear("student_class_shares", "the class shares of each student's labels",
            "manifest", party_only=True),
    InClear("n_teachers", "its teachers per student", "manifest"),
    InClear("n_queries", "the public rows its noisy tier labels", "manifest"),
    InClear("privacy", "at L2, its privacy guarantee (its epsilon)", "manifest"),
    InClear("privacy_note", "where its students learned its rows, what an upload "
            "reveals", "manifest"),
    *SUMS,
)


def _fit_releases(clf: FedKTClassifier) -> list[Release]:
    """What FedKT lets out (see `skfedkt.privacy.membership_audit`): every party's
    students, its upload (at L2 covered by the party's epsilon), and the final model
    (covered by ``epsilon_`` at L1 and L2). Under secure aggregation no student leaves
    its party: the final model alone."""
    report = clf.privacy_report_
    party_epsilons = report.party_epsilons or {}
    delta = 0.0 if report.delta is None else report.delta
    uploads = [
        _students_release(party, students, codes, len(clf.classes_),
                          party_epsilons.get(party, np.inf), delta)
        for party, students, codes in zip(clf.parties_.tolist(), clf.students_,
                                          clf._student_codes)
        if students
    ]
    return [*uploads, final_model_release(clf, clf.epsilon_, delta)]


def _upload_releases(clf: FedKTClassifier, upload: PartyUpload,
                     n_classes: int) -> list[Release]:
    """What one party's upload lets out: its students (at L2 with its guarantee)."""
    privacy = upload.manifest.get("privacy") or {}
    payload = fedkt_upload(upload)
    # an L2 upload's guarantee: its epsilon in the manifest, its delta among the
    # mechanism's parameters (the estimator's privacy=PartyNoise(...))
    delta = upload.manifest["params"]["privacy"]["params"]["delta"] if privacy else 0.0
    return [_students_release(
        upload.party, payload["students"], payload["codes"], n_classes,
        privacy.get("epsilon", np.inf), delta,
    )]


@shared_docs
class FedKTClassifier(BaseFederatedClassifier):
    """FedKT: one-shot federated classification by two-tier knowledge transfer.

    Each party splits its rows ``n_students`` times into ``n_teachers`` disjoint
    subsets and trains one teacher per subset. In every partition the teachers vote on
    the public set and a student learns the winning labels (PATE inside the
    party). The parties send their students to the server, which lets them vote on the
    public set in turn and trains the final model on the winning labels. One round of
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
        The model trained by the server on the students' labels of the public set.
        ``None`` means a clone of `student_estimator`. Its methods (``predict_proba``,
        ``decision_function``) are those this classifier offers.
    n_students : int, default=2
        Students per party, all of which it uploads: the party's rows are partitioned
        once per student (the paper's ``s``, its number of partitions).
    n_teachers : int or "auto", default="auto"
        Teachers per student, each trained on a disjoint subset of the party's rows of
        that partition, one vote each (the paper's ``t``, its 5). A row shapes one
        teacher of each student, one vote of `n_teachers`, which keeps a party's rows
        from showing in its upload; fewer teachers are stronger, and their labels carry
        more of the party's rows into its students (measured in :doc:`/privacy`).
        ``"auto"``: each party as many teachers as give each at least 100 rows, from 3
        to 5, so that a small party trains teachers that know something rather than
        five that vote one class (and costs less); fewer than three let membership
        attacks on census uploads through (:doc:`/privacy`). With ``voting="hard"`` or a
        privacy mechanism, 5, the paper's. ``n_teachers_`` holds each party's count.
        An integer: every party that many, and each party needs at least as many rows.
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
        What the students, all that a party uploads, learn from: the public set
        labelled by its teachers (``"public"``, the paper), so that the party's own rows
        shape its upload only through its teachers' votes; or that plus the party's own
        labelled rows (``"party+public"``), so that a student knows at least what its
        party knows. With ``"party+public"`` the upload reveals which rows the party
        holds about as much as shipping a model trained on them, and no privacy
        mechanism covers that (measured in :doc:`/privacy`): refused with
        ``PartyNoise``, stated in ``privacy_report_`` and in every upload's manifest
        (``privacy_note``). Check an upload with
        `skfedkt.privacy.party_membership_audit` before sending it.
    soft_labels : {"students", "all"} or None, default=None
        Which learners learn the (noisy) vote distribution of every public example
        instead of its winning class: every example is repeated once per class with the
        class's share as sample weight, so those learners must accept ``sample_weight``
        (a Pipeline's final step must). ``"students"``: the students do, the final model
        learns the server's winning classes; ``"all"``: both do; None: neither (the
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
        False, it trains none: `predict` and `predict_proba` pool the students' votes
        on the rows given exactly as the server pools them on the public set (soft
        votes: prior correction and share offsets included; hard votes: the vote
        shares), so every party's students run at prediction time: more accurate where
        the public set is too small to carry what the students know into one model
        (user guide, "When it struggles"), at the price of a model `n_students` times
        the number of parties larger. Refused with ``ServerNoise``,
        whose guarantee covers the server's noisy labels of the public set, not the
        students' votes on new rows; at L2 the students themselves are differentially
        private, and so is anything computed from them.
    privacy : ServerNoise, DistributedNoise, PartyNoise or None, default=None
        Where noise is added to the vote counts (FedKT's privacy levels), with its
        scale, query budget and delta (`skfedkt.privacy.ServerNoise`,
        `skfedkt.privacy.DistributedNoise`, `skfedkt.privacy.PartyNoise`):

        - ``None`` (L0): nowhere; no privacy guarantee.
        - ``ServerNoise(...)`` (L1): on every count of the server's vote histogram. The
          final model is differentially private at the *party* level.
        - ``DistributedNoise(...)`` (L1 under secure aggregation only): the same noise,
          added by the parties in shares of the secure sum, so that the coordinator
          never sees a noise-free vote.
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
        noise and the tie breaks (but `DistributedNoise`, which comes from the operating
        system: a seed the coordinator knows would let it remove the noise). Results are
        identical for any `n_jobs` and joblib backend, except for skorch nets under the
        threading backend, whose threads share torch's RNG.
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
    n_teachers_ : ndarray of shape (n_parties,)
        Teachers per partition of each party, aligned with ``parties_`` (see
        `n_teachers`).
    voting_ : SoftVotes or HardVotes
        The votes that ran, every ``"auto"`` part resolved (with soft votes, the
        server's pooling and whether it matched class shares).
    students_ : list of list of estimator
        ``students_[i]`` holds the `n_students` fitted students of party
        ``parties_[i]``. Like every fitted clone, each was trained on the positions
        ``0..k-1`` of the ``k`` classes its labels held (skorch nets: on the indices
        into ``classes_``), so its own predictions are not labels of ``classes_``; a
        student whose labels held a single class is a constant ``DummyClassifier``.
    final_estimator_ : estimator
        The server's fitted final model, trained on class positions like the students.
        Not set with ``distill=False``.
    upload_bytes_ : ndarray of shape (n_parties,)
        Bytes each party sent, aligned with ``parties_``: its students and the votes
        it sends in the sum, the only communication of FedKT (the final model's trip
        back is not counted). After `fit`, its students as skops writes them into an
        upload file, measured when first read (NaN, with a warning, where skops cannot
        write them), and its sums' arrays; after `fit_server`, the size of each upload
        file. Under secure aggregation, the keys, sealed shares, masked votes and
        unmasking shares of its secure sum.
    left_out_parties_ : dict
        Only after `fit_server`: the uploads it left out under ``min_parties``, with the
        reason, keyed by party (or file).
    vote_counts_ : ndarray of shape (n_public, n_classes)
        The server's noise-free vote histogram on the whole public set: vote counts
        (int64) with hard voting, summed class probabilities (float64) with soft voting.
        For analysis: it is what the L1 noise protects, and a deployment would not
        publish it. With `DistributedNoise` the server never holds it: the parties'
        noisy sums on its queries, NaN on the other rows.
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
        (each student's labels, (n_parties, n_students, n_classes)) and ``"final"``
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
    $tier_fits

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
    public set both tiers label; ``None`` uses the rows of ``X`` without their labels,
    which is convenient for experiments but gives no privacy, since the students then
    learn from the parties' own rows.

    Privacy accounting follows the paper's Section 4: the data-dependent moments
    accountant of Papernot et al. (2017) with ``q`` computed from the noise-free counts
    of the queries, next to data-independent bounds (see `skfedkt.privacy`); the reported
    epsilon is the smaller. Publishing a data-dependent epsilon itself leaks information.
    Unlike the paper's public code, every query is counted, the sensitivity at L1 is
    ``2 * n_students`` and the moments bound is used only where it is valid
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
    >>> clf = FedKTClassifier(n_students=2, random_state=0)
    >>> clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    FedKTClassifier(random_state=0)
    >>> clf.parties_
    array([0, 1, 2, 3])
    >>> clf.n_teachers_  # about 80 rows a party: three teachers of its rows per student
    array([3, 3, 3, 3])
    >>> clf.vote_counts_.shape  # the server's votes on the public set
    (107, 2)
    >>> clf.class_shares_["final"].round(2)  # the classes the final model learned
    array([0.36, 0.64])
    >>> print(f"{clf.score(X_test, y_test):.2f}")
    0.9...
    """

    _plan_type = FedKTPlan
    _uploads = Uploads(check=_upload_check, sent_bytes=_sent_bytes, fields=FIELDS,
                       party_weights=party_weights, consistent=consistent,
                       refusal=_refusal)
    _releases = Releases(of_fit=_fit_releases, of_upload=_upload_releases)

    _private_fitted = ("_final_model", "_party_counts", "_student_codes")

    _parameter_objects = ("privacy", "voting")

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "student_estimator": [HasMethods(["fit", "predict"]), None],
        "final_estimator": [HasMethods(["fit", "predict"]), None],
        "n_students": [Interval(Integral, 1, None, closed="left")],
        "n_teachers": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "voting": [StrOptions({"soft", "hard"}), SoftVotes, HardVotes],
        "student_data": [StrOptions({"public", "party+public"})],
        "soft_labels": [StrOptions({"students", "all"}), None],
        "distill": ["boolean"],
        "privacy": [ServerNoise, DistributedNoise, PartyNoise, None],
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
        n_students=2,
        n_teachers="auto",
        voting="soft",
        student_data="public",
        soft_labels=None,
        distill=True,
        privacy=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.student_estimator = student_estimator
        self.final_estimator = final_estimator
        self.n_students = n_students
        self.n_teachers = n_teachers
        self.voting = voting
        self.student_data = student_data
        self.soft_labels = soft_labels
        self.distill = distill
        self.privacy = privacy
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _base_estimators(self) -> list[Any]:
        return list(learners(self))

    # --- the algorithm's steps (see BaseFederatedClassifier) ---------------------------

    def _parties(self, context: PartyContext[FedKTPlan],
                 random_state_of: Callable[[Any], np.random.RandomState]) -> list[FedKTParty]:
        plan, data = context.plan, context.data
        check_party_sizes(plan, data.parties, data.party_rows)  # before any fit
        return [FedKTParty(plan, party, rows, data.y, random_state_of(party))
                for party, rows in zip(data.parties, data.party_rows)]

    def _party_step(self, context: PartyContext[FedKTPlan],
                    parties: Sequence[FedKTParty]) -> PartyStepResult:
        plan, data = context.plan, context.data
        return PartyStepResult(party_step(
            plan, parties, data.X, plan.tier_rows(data.X_public, context.root),
            len(data.classes), context.manifests, context.secure))

    def _server_step(self, context: ServerContext[FedKTPlan],
                     uploads: Sequence[Message]) -> dict[str, Any]:
        return server_step(context.plan, uploads, context.X_public, context.root,
                           context.known_classes, context.sums)

    def _after_fit(self, context: ServerContext[FedKTPlan], uploads: Sequence[Message],
                   data: FederatedData | None) -> None:
        plan = context.plan
        if data is not None and plan.level == "L2":
            # parties do not send their class counts at L2; the simulation knows them
            counts = np.array([np.bincount(data.y[rows], minlength=len(self.classes_))
                               for rows in data.party_rows])
            self.class_shares_.update(
                training=class_shares(counts.sum(axis=0)[None]),
                parties=counts / counts.sum(axis=1, keepdims=True),
            )
        warn_after_fit(plan, vars(self), self.classes_, self.parties_, context.X_public,
                       data is not None and data.public_set_shifted)

    def _student_vote_proba(self, X: Any) -> np.ndarray:
        """The server's pooled, share-shifted vote of the students on `X`, normalised:
        what the final model learned on the public rows, and ``distill=False``
        predicts."""
        return pooled_student_proba(self.voting_, self.students_, self._student_codes,
                                    self._party_counts, self.share_offsets_, X,
                                    len(self.classes_), self.n_jobs)

    def _predict_codes(self, X: Any) -> np.ndarray:
        # the final model, or with distill=False the students' pooled vote
        if not self.distill:
            return self._student_vote_proba(X).argmax(axis=1)
        return self._final_model.predict(X)

    def _offers(self, method: str) -> bool:
        # without a final model, the students' pooled vote gives the probabilities
        if method == "predict_proba" and not self.distill:
            return True
        return self.distill and hasattr(learners(self)[2], method)

    def _proba(self, X: Any) -> np.ndarray:
        if not self.distill:
            return self._student_vote_proba(X)
        return self._final_model.predict_proba(X, len(self.classes_))

    def _decision_scores(self, X: Any) -> np.ndarray:
        return self._final_model.decision_function(X, len(self.classes_))

"""FedCTClassifier: its parameters, and `fit`, which runs the rounds of both steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

from .._engine._compat import HasMethods, Interval, StrOptions, num_samples
from .._base import BaseFederatedClassifier, Releases, Uploads, shared_docs
from .._deployment._received import UploadChecker
from .._deployment._party_models import MODEL_FIELDS
from .._deployment._upload import SUMS as SUMS_KEY, PartyUpload
from .._engine._context import (
    CheckContext,
    Message,
    PartyContext,
    PartyStepResult,
    ServerContext,
)
from .._engine._class_codes import GlobalLabelClassifier
from .._engine._voting import count_votes
from .._privacy._mechanisms import BitFlips, TeacherVotes, add_noise
from .._party_models import PartyModelsMixin, nothing_in_the_clear
from .._privacy._release import Release, final_model_release, models_release
from ._party import FedCTParty, party_round, share_labels
from ._payloads import fedct_upload
from ._plan import FedCTPlan
from ._server import (
    FedCTServer,
    check_party_upload,
    check_server_message,
    finished,
)
from ._sums import SUMS


def _upload_check(context: ServerContext[FedCTPlan],
                  final: bool) -> Callable[[UploadChecker], Any]:
    plan = context.plan
    return lambda checker: check_party_upload(checker, plan, final=final)


def _message_check(context: CheckContext[FedCTPlan]) -> Callable[[UploadChecker], Any]:
    n_public, n_rounds = num_samples(context.X_public), context.plan.n_rounds
    return lambda checker: check_server_message(checker, n_public, n_rounds)


FIELDS = (*MODEL_FIELDS, *SUMS)


def _fit_releases(clf: FedCTClassifier) -> list[Release]:
    """What FedCT lets out (see `skfedkt.privacy.membership_audit`): every party's
    shared labels (through its bit flips, covered by ``epsilon_``) as labels of rows
    the attacker chooses, which is the server's power to pick the public set; every
    party's final local model that the server received (every one, for the parties'
    vote); and the final model. With `TeacherVotes` the fitted estimator keeps no
    teachers: their vote counts are audited on the uploads
    (`skfedkt.privacy.party_membership_audit`). Under secure aggregation nothing of a
    party leaves it but in the sum: the distilled model alone, fitted on the consensus,
    post-processing of what the parties shared (covered by ``epsilon_``)."""
    report = clf.privacy_report_
    delta = 0.0 if report is None else report.delta
    n_classes = len(clf.classes_)
    releases = []
    for party, model in zip(clf.parties_.tolist(), clf._models):
        if model is None:  # the party kept it
            continue
        if not isinstance(clf.privacy, TeacherVotes):
            releases.append(_labels_release(
                clf.privacy, party, model, n_classes, getattr(report, "sensitivity", None),
                clf.epsilon_, delta))
        releases.append(models_release("local model", party, [model], n_classes))
    if clf.distill:  # the consensus it learned is post-processing of the labels
        return [*releases, final_model_release(clf, clf.epsilon_, delta)]
    return [*releases, final_model_release(clf)]


def _upload_releases(clf: FedCTClassifier, upload: PartyUpload,
                     n_classes: int) -> list[Release]:
    """What one party's upload of a round lets out: what it shares (where the party's
    models are at hand in process: ``upload.local_model``, ``upload.teachers``) and its
    model when the upload carries it. Its labels are labels of rows the attacker
    chooses; its noisy teacher votes, the teachers' noisy plurality on them, with the
    budget of the whole fit."""
    releases = []
    plan, payload = FedCTPlan.of(clf), fedct_upload(upload)
    sums = upload.payload.get(SUMS_KEY) or {}
    vote_counts, labels = sums.get("vote_counts"), sums.get("label_counts")
    if plan.teacher_votes is not None and vote_counts is not None:
        releases.append(_teacher_votes_release(
            plan.teacher_votes, upload.party, upload.teachers, n_classes,
            plan.vote_sigma(len(vote_counts))))
    elif labels is not None and upload.local_model is not None:
        n_public = len(labels)
        epsilon = np.inf if clf.privacy is None else clf.privacy.epsilon
        releases.append(_labels_release(
            clf.privacy, upload.party, upload.local_model.model, n_classes,
            plan.sensitivity(n_public), epsilon, 0.0,
        ))
    if payload["model"] is not None:
        releases.append(models_release("local model", upload.party, [upload.model()],
                                       n_classes))
    return releases


def _labels_release(privacy: Any, party: Any, model: Any, n_classes: int,
                    sensitivity: float | None, epsilon: float, delta: float) -> Release:
    def shared_votes(X: Any) -> np.ndarray:
        # the same flips every time: the attacker sees one release
        labels = share_labels(privacy, model.predict(X), n_classes, sensitivity,
                              np.random.RandomState(0))
        return (labels[:, None] == np.arange(n_classes)).astype(float)

    return Release("labels", party, "labels", shared_votes, epsilon, delta)


def _teacher_votes_release(privacy: TeacherVotes, party: Any, teachers: list[Any],
                           n_classes: int, sigma: float) -> Release:
    def shared_votes(X: Any) -> np.ndarray:
        # one noise draw per row, the same every time: the attacker sees one release
        counts = count_votes([teacher.predict(X) for teacher in teachers], n_classes)
        noisy = add_noise(counts, noise="gaussian", gamma=1 / sigma,
                          random_state=np.random.RandomState(0))
        return (noisy.argmax(axis=1)[:, None] == np.arange(n_classes)).astype(float)

    return Release("labels", party, "labels", shared_votes, privacy.epsilon, privacy.delta)


@shared_docs
class FedCTClassifier(PartyModelsMixin, BaseFederatedClassifier):
    """Federated co-training: parties agree on labels for a public set, round after round.

    In round 0 every party fits its own model on its own rows. In every round after,
    each party labels the public set with its model and shares those hard
    labels (nothing else); the server forms the consensus by majority vote and sends it
    back; every party refits its model on its own rows plus the public set with the
    consensus labels. Any classifier works, and each party may use a different one.

    Parameters
    ----------
    estimator : estimator, list of estimators or dict, default=None
        The parties' model: one estimator (cloned for every party), a list aligned with
        the sorted party labels ``parties_``, or a dict keyed by party label. ``None``
        means ``DecisionTreeClassifier()``. Every estimator must implement ``fit`` and
        ``predict``.
    n_rounds : int, default=20
        Largest number of communication rounds. ``0`` trains local models only.
    tol : float, default=0.0
        The consensus has stopped changing when at most this fraction of its public
        labels changed in a round.
    n_iter_no_change : int, default=2
        Stop once the consensus has stopped changing in this many consecutive rounds
        (the local models then already learned it).
    voting : {"hard", "soft"}, default="hard"
        How the parties' final models predict together. ``"hard"``: majority vote, and
        ``predict_proba`` gives the vote shares; ties go to the first class of
        ``classes_``. ``"soft"``: argmax of the averaged ``predict_proba`` (a model
        without it contributes its vote). Either way ``predict`` is the argmax of
        ``predict_proba``, as scikit-learn requires. With ``distill=True``, the final
        model gives its own probabilities.
    distill : bool, default=False
        The federation's model. ``False``: the parties' vote, which needs every party's
        final model (each party sends it in the final step). ``True``: one model (a
        seeded clone of `final_estimator`) fitted by the server on the public rows with
        the last round's consensus labels; no party's model is needed, so it runs under
        secure aggregation, which keeps every party's model at the party (there
        ``distill=False`` is refused). Refused with ``n_rounds=0``, which makes no
        consensus.
    final_estimator : estimator, default=None
        With ``distill=True``: the final model. ``None`` means a clone of `estimator`
        (a list or dict `estimator` needs one).
    privacy : BitFlips or None, default=None
        If set (`skfedkt.privacy.BitFlips`), every party flips the bits of the labels
        it shares at random before sending them, which makes each round's release
        differentially private; ``privacy_report_`` and `epsilon_` state the composed
        guarantee. Settable in a search as ``privacy__epsilon``.
    n_jobs : int, default=None
        Number of jobs for fitting the parties' models of a round in parallel.
    random_state : int, RandomState instance or None, default=None
        Controls one seed per party and round (set on every ``random_state`` parameter of
        a clone, and on torch's RNG for skorch nets) and the bit flips.
    verbose : int, default=0
        If positive, `fit` prints every round's consensus change; larger values also
        make the parallel fitting verbose.

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
    estimators_ : list of estimator
        The final model of every party, aligned with ``parties_``. Like every fitted
        clone, each was trained on the positions ``0..k-1`` of the ``k`` classes its
        labels held (skorch nets: on the indices into ``classes_``), so its own
        predictions are not labels of ``classes_``; a party whose training labels held
        one class has a constant ``DummyClassifier``. Empty where no party sent its
        model (with ``distill=True`` under secure aggregation).
    final_estimator_ : estimator
        With ``distill=True``: the final model, fitted on the public rows of the last
        consensus (``consensus_mask_``, ``consensus_labels_``).
    consensus_mask_ : ndarray of bool of shape (n_public,)
        Public examples that received a consensus label in the last round (with bit-flip
        noise, an example on which every party abstained gets none).
    consensus_labels_ : ndarray of shape (n_consensus,)
        The last consensus labels, for the examples in `consensus_mask_`.
    n_rounds_ : int
        Communication rounds run.
    history_ : list of dict
        Per round: ``round``, ``consensus_changed`` (fraction of public labels that
        changed), ``train_accuracy`` (mean accuracy of the parties' models on their own
        training rows after the round's refit) and ``bytes_sent`` (the information each
        party shared: its one-hot label matrix, one bit per public example and class).
    upload_bytes_ : ndarray of int of shape (n_parties,)
        Bytes each party sent over all rounds, aligned with ``parties_``: with `fit`,
        the arrays of its sums (its one-hot labels, 8 bytes per public example and
        class, and its training accuracy; its final model and the consensus broadcast
        back are not counted); with `fit_server`, the size of each party's final upload
        file. Under secure aggregation, the keys, sealed shares, masked counts and
        unmasking shares of its secure sums.
    left_out_parties_ : dict
        Only after `fit_server`: the uploads it left out under ``min_parties``, with the
        reason, keyed by party (or file).
    privacy_report_ : skfedkt.privacy.BitFlipPrivacyReport or None
        The guarantee when `privacy` is set.
    epsilon_ : float
        ``privacy_report_.epsilon``; ``inf`` without bit-flip noise.
    $tier_fits

    Notes
    -----
    Across organisations, every round runs `fit_party` on each party's machine and
    `server_round` on their uploads, whose message goes back to every party; when it
    says done, `fit_server` assembles the parties' final models. `fit` is exactly these
    steps in one process, so both give the same model for the same `random_state`.

    Every round each party sends its labels as one-hot counts (with `TeacherVotes`,
    its noisy vote counts, each clipped to a count plus ten standard deviations of its
    noise) and its training accuracy in the sum: the server votes on their total
    alone. Under ``skfedkt.set_config(secure_aggregation=True)`` (at least three
    parties) a secure sum adds them, and the server sees the summed counts alone,
    forming the same consensus round after round; no party's model leaves it, so only
    ``distill=True`` runs there, and gives the model it gives without.

    Every round refits a fresh clone of each party's estimator on its rows plus the
    pseudo-labelled public set: this works for any model (trees have no weights to keep)
    and makes a round's result independent of fitting history. Estimators that could
    continue training (``warm_start``, ``partial_fit``, skorch nets) are therefore
    retrained from scratch each round.

    The consensus is the plurality of the parties' (possibly noisy) labels; a tie is
    broken uniformly at random among the tied classes (from `random_state`, with the
    same draw in every round, so a tie cannot flip back and forth), so no class, the
    majority one in particular, gains from ties; an example without any vote is left
    out of that round.

    Privacy: the paper's XOR mechanism adds a correlated Bernoulli matrix and calibrates
    it through its eigenvalues (Ji et al., 2021). Independent bit flips are the special
    case without correlations, for which the per-bit randomized-response analysis above
    is exact and no more conservative than needed. The worst-case sensitivity
    ``2 * len(X_unlabeled)`` assumes one example may flip every public label; the paper
    uses an empirical estimate, which is smaller but not a guarantee.

    References
    ----------
    .. [1] "Protecting Sensitive Data through Federated Co-Training" (FedCT),
       Algorithm 1, Section 4 and Appendix C.1.
    .. [2] T. Ji et al., "Differentially private binary- and matrix-valued data query: an
       XOR mechanism", VLDB 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.model_selection import train_test_split
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from skfedkt import FedCTClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    >>> X_train, X_public, y_train, _ = train_test_split(X_train, y_train, random_state=0)
    >>> party = np.arange(len(y_train)) % 5
    >>> clf = FedCTClassifier(DecisionTreeClassifier(max_depth=4), n_rounds=10,
    ...                       random_state=0)
    >>> clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    FedCTClassifier(estimator=DecisionTreeClassifier(max_depth=4), n_rounds=10,
                    random_state=0)
    >>> len(clf.estimators_), clf.n_rounds_ <= 10
    (5, True)
    >>> print(f"{clf.score(X_test, y_test):.2f}")
    0.9...
    """

    _plan_type = FedCTPlan
    _party_type = FedCTParty
    _uploads = Uploads(check=_upload_check, sent_bytes=nothing_in_the_clear,
                       message_check=_message_check, fields=FIELDS)
    _releases = Releases(of_fit=_fit_releases, of_upload=_upload_releases)

    runs_rounds = True

    _private_fitted = ("_models", "_final_model")

    _parameter_objects = ("privacy",)

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), list, dict, None],
        "n_rounds": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, 1, closed="both")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "voting": [StrOptions({"hard", "soft"})],
        "distill": ["boolean"],
        "final_estimator": [HasMethods(["fit", "predict"]), None],
        "privacy": [BitFlips, TeacherVotes, None],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        n_rounds=20,
        tol=0.0,
        n_iter_no_change=2,
        voting="hard",
        distill=False,
        final_estimator=None,
        privacy=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.n_rounds = n_rounds
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.voting = voting
        self.distill = distill
        self.final_estimator = final_estimator
        self.privacy = privacy
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # --- the algorithm's steps (see BaseFederatedClassifier) ---------------------------

    def _party_step(self, context: PartyContext[FedCTPlan],
                    parties: Sequence[FedCTParty]) -> PartyStepResult:
        uploads = party_round(context.plan, parties, context.data, context.root,
                              context.message, context.manifests, context.share_model)
        for party, upload in zip(parties, uploads):
            # in process, for the membership audit of what the upload lets out
            upload.local_model = GlobalLabelClassifier(party.model, context.data.classes)
            upload.teachers = party.teachers
        return PartyStepResult(uploads)

    def _server_round(self, context: ServerContext[FedCTPlan],
                      uploads: Sequence[Message]) -> PartyUpload:
        server = FedCTServer(context.plan, num_samples(context.X_public),
                             len(context.known_classes), context.root)
        return server.round(uploads, context.message, context.sums)

    def _server_step(self, context: ServerContext[FedCTPlan],
                     uploads: Sequence[Message]) -> dict[str, Any]:
        assert context.message is not None  # the rounds end on the server's message
        return finished(context.plan, uploads, context.message, context.known_classes,
                        context.sums, context.X_public, context.root)

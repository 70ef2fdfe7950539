"""DSFLClassifier: its parameters, and `fit`, which runs the rounds of both steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Any

from .._base import BaseFederatedClassifier, Releases, Uploads, shared_docs
from .._deployment._party_models import MODEL_FIELDS
from .._deployment._received import UploadChecker
from .._deployment._upload import SUMS as SUMS_KEY, PartyUpload
from .._engine._class_codes import GlobalLabelClassifier
from .._engine._compat import HasMethods, Interval, StrOptions, num_samples
from .._engine._context import (
    CheckContext,
    Message,
    PartyContext,
    PartyStepResult,
    ServerContext,
)
from .._party_models import PartyModelsMixin, nothing_in_the_clear
from .._privacy._release import Release, final_model_release, models_release
from ._party import DSFLParty, party_round
from ._payloads import dsfl_upload
from ._plan import DSFLPlan
from ._server import DSFLServer, check_party_upload, check_server_message, finished
from ._sums import SUMS, party_weights


def _upload_check(context: ServerContext[DSFLPlan],
                  final: bool) -> Callable[[UploadChecker], Any]:
    plan = context.plan
    return lambda checker: check_party_upload(checker, plan, final=final)


def _message_check(context: CheckContext[DSFLPlan]) -> Callable[[UploadChecker], Any]:
    n_public, n_rounds = num_samples(context.X_public), context.plan.n_rounds
    return lambda checker: check_server_message(checker, n_public, n_rounds)


FIELDS = (*MODEL_FIELDS, *SUMS)


def _fit_releases(clf: DSFLClassifier) -> list[Release]:
    """What DS-FL lets out (see `skfedkt.privacy.membership_audit`): every party's
    probabilities of the public rows, which are its model's probabilities of rows the
    attacker chooses (the server picks the public set), and its final model where the
    server received it; and the final model. Under secure aggregation nothing of a party
    leaves it but in the sum: the distilled model alone."""
    n_classes = len(clf.classes_)
    releases = []
    for party, model in zip(clf.parties_.tolist(), clf._models):
        if model is not None:  # the party kept it
            releases += [models_release("probabilities", party, [model], n_classes),
                         models_release("local model", party, [model], n_classes)]
    return [*releases, final_model_release(clf)]


def _upload_releases(clf: DSFLClassifier, upload: PartyUpload,
                     n_classes: int) -> list[Release]:
    """What one party's upload of a round lets out: its probabilities of the public
    rows, as its model (at hand in process: ``upload.local_model``) gives them for rows
    the attacker chooses, and its model when the upload carries it."""
    releases = []
    sums = upload.payload.get(SUMS_KEY) or {}
    if sums.get("probabilities") is not None and upload.local_model is not None:
        releases.append(Release("probabilities", upload.party, "proba",
                                upload.local_model.predict_proba))
    if dsfl_upload(upload)["model"] is not None:
        releases.append(models_release("local model", upload.party, [upload.model()],
                                       n_classes))
    return releases


@shared_docs
class DSFLClassifier(PartyModelsMixin, BaseFederatedClassifier):
    """Distillation-based semi-supervised federated learning: soft labels, round after round.

    In round 0 every party fits its own model on its own rows and sends its class
    probabilities of the public set in the sum. The server averages them (weighted by
    the parties' rows, `party_weight`), matches their class shares to the federation's
    (`match_shares`) and sharpens them into soft labels (a distribution over the classes
    per public row, `temperature`), and sends them back; in every later round each party
    refits its model on its own rows plus every public row once per class, weighted by
    that class's soft label (the public rows together weighing as much as the party's
    own, `public_weight`), and sends its new probabilities. The federation's model is
    the parties' vote (their last models) or one model distilled on the public rows with
    the last soft labels.

    Any classifier that takes ``sample_weight`` in ``fit`` works, and each party may use
    a different one.

    Parameters
    ----------
    estimator : estimator, list of estimators or dict, default=None
        The parties' model: one estimator (cloned for every party), a list aligned with
        the sorted party labels ``parties_``, or a dict keyed by party label. ``None``
        means ``DecisionTreeClassifier()``. Every estimator must take ``sample_weight``
        in ``fit`` (a Pipeline passes it to its last step); one that does not is
        refused before any work.
    n_rounds : int, default=5
        Largest number of rounds of soft labels after round 0. ``0`` trains local
        models only.
    temperature : float, default=1.0
        The soft labels are the parties' averaged probabilities raised to
        ``1 / temperature`` and normalised: ``1`` keeps the average as it is, smaller
        values sharpen it toward its top class (the paper's entropy reduction), larger
        ones flatten it. Soft targets kept soft did best in our measurements.
    public_weight : "balanced" or float, default="balanced"
        What the public rows weigh in a party's fit, beside its own rows (weight one
        each): ``"balanced"``, together as much as the party's rows, or the median
        party's where it holds fewer (each public row's weight spread over the classes
        by its soft labels), so that a party learns its own rows as much as the
        federation's labels; a float, the weight of each public row (``1.0``: as much
        as one of the party's rows, whatever their numbers).
    party_weight : {"rows", "equal"}, default="rows"
        Each party's weight in the server's average of the probabilities: ``"rows"``,
        its rows (none counting more than 20 times the median party nor more than the
        others together, since a party's rows are its own claim); ``"equal"``, one
        each, as the paper averages.
    match_shares : bool, default=True
        Whether the server scales the averaged probabilities, class by class, so that
        their mean over the public rows is the federation's class shares (the parties'
        class counts, which they send in the sum): parties that hold few rows of a
        class shrink its probabilities, and the rounds would otherwise shrink it
        further.
    tol : float, default=1e-3
        The soft labels have settled when they moved by at most this much in a round:
        their mean total-variation distance per public row.
    n_iter_no_change : int, default=1
        Stop once the soft labels have settled in this many consecutive rounds (the
        local models then already learned them).
    voting : {"hard", "soft"}, default="soft"
        How the parties' final models predict together: ``"soft"`` averages their
        ``predict_proba``; ``"hard"`` gives their vote shares. Either way ``predict``
        is the argmax of ``predict_proba``. With ``distill=True``, the final model
        gives its own probabilities.
    distill : bool, default=False
        The federation's model. ``False``: the parties' vote, which needs every party's
        final model (each party sends it in the final step); each party has learned its
        own rows and the federation's soft labels, so their vote can pass what a model
        of the public rows alone learns. ``True``: one model (a seeded clone of
        `final_estimator`) fitted by the server on the public rows with the average of
        the parties' last probabilities; no party's model is needed, so it runs under
        secure aggregation, which keeps every party's model at the party (there
        ``distill=False`` is refused). Refused with ``n_rounds=0``.
    final_estimator : estimator, default=None
        With ``distill=True``: the final model. ``None`` means a clone of `estimator`
        (a list or dict `estimator` needs one).
    n_jobs : int, default=None
        Number of jobs for fitting the parties' models of a round in parallel.
    random_state : int, RandomState instance or None, default=None
        Controls one seed per party and round (set on every ``random_state`` parameter
        of a clone).
    verbose : int, default=0
        If positive, `fit` prints how far every round moved the soft labels; larger
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
    estimators_ : list of estimator
        The final model of every party, aligned with ``parties_``, each trained on the
        positions ``0..k-1`` of the ``k`` classes its rows held (so its own predictions
        are not labels of ``classes_``). Empty where no party sent its model (with
        ``distill=True`` under secure aggregation).
    final_estimator_ : estimator
        With ``distill=True``: the final model, fitted on the public rows with
        `soft_labels_`.
    soft_labels_ : ndarray of shape (n_public, n_classes)
        The parties' averaged probabilities of the public rows in the last round that
        sent them, weighted, matched to the class shares and sharpened as the server
        does every round.
    n_rounds_ : int
        Rounds of soft labels run.
    history_ : list of dict
        Per round: ``round``, ``soft_labels_changed`` (the mean total-variation distance
        per public row the round moved the soft labels), ``train_accuracy`` (the mean
        accuracy of the parties' models, refit on these soft labels, on their own rows)
        and ``bytes_sent`` (what each party shared: a float64 per public row and class).
    upload_bytes_ : ndarray of int of shape (n_parties,)
        Bytes each party sent over all rounds, aligned with ``parties_``: with `fit`,
        the arrays of its sums (its probabilities, 8 bytes per public row and class,
        and its accuracy; its final model and the soft labels broadcast back are not
        counted); with `fit_server`, the size of each party's final upload file. Under
        secure aggregation, the keys, sealed shares, masked sums and unmasking shares
        of its secure sums.
    left_out_parties_ : dict
        Only after `fit_server`: the uploads it left out under ``min_parties``, with the
        reason, keyed by party (or file).
    $tier_fits

    Notes
    -----
    Across organisations, every round runs `fit_party` on each party's machine and
    `server_round` on their uploads, whose message goes back to every party; when it
    says done, `fit_server` assembles the parties' final models. `fit` is exactly these
    steps in one process, so both give the same model for the same `random_state`.

    The parties' probabilities travel in the sum: the server averages their total
    alone. Under ``skfedkt.set_config(secure_aggregation=True)`` (at least three
    parties) a secure sum adds them, and only ``distill=True`` runs, giving the model
    it gives without.

    Privacy: DS-FL has no private level. A party's probabilities of the public rows can
    all move with one of its training examples, so noise sized for that change would
    drown them; the membership audit (`skfedkt.privacy.membership_audit`) measures what
    they let out. Use `FedKTClassifier` or `FedCTClassifier` with ``privacy=`` for a
    stated epsilon.

    Every round refits a fresh clone of each party's estimator, so a round's result
    does not depend on fitting history.

    References
    ----------
    .. [1] S. Itahara, T. Nishio, Y. Koda, M. Morikura and K. Yamamoto,
       "Distillation-Based Semi-Supervised Federated Learning for Communication-Efficient
       Collaborative Training with Non-IID Private Data", IEEE Transactions on Mobile
       Computing 22(1), 2023 (online 2021).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.model_selection import train_test_split
    >>> from sklearn.tree import DecisionTreeClassifier
    >>> from skfedkt import DSFLClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    >>> X_train, X_public, y_train, _ = train_test_split(X_train, y_train, random_state=0)
    >>> party = np.arange(len(y_train)) % 5
    >>> clf = DSFLClassifier(DecisionTreeClassifier(max_depth=4), n_rounds=3,
    ...                      random_state=0)
    >>> clf.fit(X_train, y_train, groups=party, X_unlabeled=X_public)
    DSFLClassifier(estimator=DecisionTreeClassifier(max_depth=4), n_rounds=3,
                   random_state=0)
    >>> len(clf.estimators_), clf.soft_labels_.shape
    (5, (107, 2))
    >>> print(f"{clf.score(X_test, y_test):.2f}")
    0.9...
    """

    _plan_type = DSFLPlan
    _party_type = DSFLParty
    _uploads = Uploads(check=_upload_check, sent_bytes=nothing_in_the_clear,
                       message_check=_message_check, fields=FIELDS,
                       party_weights=party_weights)
    _releases = Releases(of_fit=_fit_releases, of_upload=_upload_releases)

    runs_rounds = True

    _private_fitted = ("_models", "_final_model")

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), list, dict, None],
        "n_rounds": [Interval(Integral, 0, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "public_weight": [StrOptions({"balanced"}),
                          Interval(Real, 0, None, closed="neither")],
        "party_weight": [StrOptions({"rows", "equal"})],
        "match_shares": ["boolean"],
        "tol": [Interval(Real, 0, 1, closed="both")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "voting": [StrOptions({"hard", "soft"})],
        "distill": ["boolean"],
        "final_estimator": [HasMethods(["fit", "predict"]), None],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        estimator=None,
        *,
        n_rounds=5,
        temperature=1.0,
        public_weight="balanced",
        party_weight="rows",
        match_shares=True,
        tol=1e-3,
        n_iter_no_change=1,
        voting="soft",
        distill=False,
        final_estimator=None,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.n_rounds = n_rounds
        self.temperature = temperature
        self.public_weight = public_weight
        self.party_weight = party_weight
        self.match_shares = match_shares
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.voting = voting
        self.distill = distill
        self.final_estimator = final_estimator
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # --- the algorithm's steps (see BaseFederatedClassifier) ---------------------------

    def _party_step(self, context: PartyContext[DSFLPlan],
                    parties: Sequence[DSFLParty]) -> PartyStepResult:
        uploads = party_round(context.plan, parties, context.data, context.message,
                              context.manifests, context.share_model)
        for party, upload in zip(parties, uploads):
            # in process, for the membership audit of what the upload lets out
            upload.local_model = GlobalLabelClassifier(party.model, context.data.classes)
        return PartyStepResult(uploads)

    def _server_round(self, context: ServerContext[DSFLPlan],
                      uploads: Sequence[Message]) -> PartyUpload:
        server = DSFLServer(context.plan, num_samples(context.X_public),
                            len(context.known_classes))
        return server.round(uploads, context.message, context.sums)

    def _server_step(self, context: ServerContext[DSFLPlan],
                     uploads: Sequence[Message]) -> dict[str, Any]:
        assert context.message is not None  # the rounds end on the server's message
        return finished(context.plan, uploads, context.message, context.known_classes,
                        context.sums, context.X_public, context.root)

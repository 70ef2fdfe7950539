"""FedAvgClassifier: its parameters, and `fit`, which runs the rounds of both steps."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.metrics import accuracy_score
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._engine._compat import HasMethods, Interval
from .._base import BaseFederatedClassifier, Releases, Uploads, _if_offered, shared_docs
from .._deployment._received import UploadChecker
from .._deployment._upload import SUMS, PartyUpload
from .._engine._context import (
    CheckContext,
    Message,
    PartyContext,
    PartyStepResult,
    ServerContext,
)
from .._engine._class_codes import ClassCodeModel
from .._engine._validation import FederatedData, warn_if_classes_lost
from .._engine._weights import model_of, weight_shapes_of
from .._privacy._release import Release, final_model_release, models_release
from ._party import FedAvgParty, first_round, party_round

from ._plan import FedAvgPlan, base_estimator
from ._sums import SUMS as SUM_FIELDS, channel_of, party_weights_of, refusal
from ._server import check_party_upload, check_server_message, finished, server_round


def _upload_check(context: ServerContext[FedAvgPlan],
                  final: bool) -> Callable[[UploadChecker], Any]:
    plan = context.plan
    own = partial(check_party_upload, final=final)
    if plan.init is None or plan.init_plan is None or final:
        return own
    # round 0's uploads are the first round's, checked as that algorithm checks them:
    # with its own plan and what else a check reads (`CheckContext`)
    first = plan.init._uploads.check(
        ServerContext(plan.init_plan, context.X_public, context.root, context.classes), True)
    return lambda checker: (first if checker.manifest("round") == 0 else own)(checker)


def _message_check(context: CheckContext[FedAvgPlan]) -> Callable[[UploadChecker], Any]:
    plan = context.plan
    return partial(check_server_message, plan=plan, shapes_of=weight_shapes_of(plan.estimator))


def _sent_bytes(clf: FedAvgClassifier) -> np.ndarray:
    # nothing in the clear (the base adds what each party sent in the sum)
    return np.zeros(len(clf.parties_))


def _weights_release(clf: FedAvgClassifier, party: Any, weights: list[np.ndarray],
                     n_classes: int) -> Release:
    model = model_of(FedAvgPlan.of(clf).estimator, weights, n_classes)
    return models_release("upload", party, [ClassCodeModel(model, np.arange(n_classes))],
                          n_classes)


def _fit_releases(clf: FedAvgClassifier) -> list[Release]:
    """What FedAvg lets out (see `skfedkt.privacy.membership_audit`): every party's
    weights of the last round, the longest trained of the weights the server sees every
    round, and the final model. Under secure aggregation, after `fit_server` (a
    deployed server keeps no party's weights) and when the last round is a one-shot
    first round (`init`), the final model alone; `skfedkt.privacy.party_membership_audit`
    attacks a party's upload."""
    n_classes = len(clf.classes_)
    return [*(_weights_release(clf, party, weights, n_classes)
              for party, weights in clf._party_weights.items()),
            final_model_release(clf)]


def _upload_releases(clf: FedAvgClassifier, upload: PartyUpload,
                     n_classes: int) -> list[Release]:
    """What one party's upload of a round lets out: the model its weights make."""
    sums = upload.payload.get(SUMS)
    return [] if not sums else [_weights_release(clf, upload.party, party_weights_of(sums),
                                                 n_classes)]


@shared_docs
class FedAvgClassifier(BaseFederatedClassifier):
    """Federated averaging: the parties train one model together, round after round.

    Every party starts from the same weights, trains its copy for `local_epochs` epochs
    on its own rows and sends the weights; the server averages them, each party's
    weighted by its rows, and sends the average back as the next round's start. After
    `n_rounds` rounds the average is the model. No public set is needed. FedAvg is the
    iterative algorithm the FedKT paper measures against; with one round it is the
    one-shot baseline of its Table 1. Three variants, each a parameter:

    - FedProx (``proximal_mu > 0``): a party's local loss adds
      ``proximal_mu / 2 * ||w - w_global||^2``, which keeps skewed parties' weights near
      the global ones;
    - FedDF (``distill_epochs > 0``): the server trains the average further on the
      public set (`X_unlabeled`), labelled by the parties' models' mean probabilities;
    - FedKT as the first round (``init=FedKTClassifier(...)``, the FedKT paper's
      "FedKT-Prox" with ``proximal_mu``): round 1 is that one-shot algorithm, whose final
      model starts the averaging rounds (train it about as long as a round's local
      training, through FedKT's ``final_estimator``: a model fitted longer to the public
      set is a worse start).

    Only models that learn epoch by epoch and whose parameters can be averaged qualify:
    scikit-learn's `~sklearn.neural_network.MLPClassifier` (solver ``"adam"`` or
    ``"sgd"``) and `~sklearn.linear_model.SGDClassifier`, and skorch's
    ``NeuralNetClassifier`` (a PyTorch network, on its own ``device``), each alone or
    after stateless Pipeline steps (``FunctionTransformer``). Trees, forests and
    boosting have no averageable parameters: use `FedKTClassifier` or
    `OneShotEnsembleClassifier`.

    Parameters
    ----------
    estimator : MLPClassifier, SGDClassifier or skorch NeuralNetClassifier, default=None
        The model every party trains, alone or as the last step of a Pipeline whose
        other steps hold no state. ``None`` means the FedKT paper's MLP:
        ``MLPClassifier(hidden_layer_sizes=(100, 100), batch_size=32)`` (ReLU, Adam with
        learning rate 0.001). Every class of ``y`` gets an output, also at a party that
        has none of its rows (a skorch module needs one output per class).
    n_rounds : int, default=10
        Communication rounds: the server averages the parties' weights this many times.
    local_epochs : int, default=1
        Epochs (passes over its rows, one ``partial_fit`` each) a party trains in every
        round. The FedKT paper uses 10 for FedAvg.
    proximal_mu : float, default=0.0
        FedProx's proximal weight ``mu`` (the FedKT paper uses 0.1); 0 is FedAvg. The
        term's gradient is added to an MLPClassifier's or a skorch net's in every step
        of its optimizer (round 0's anchor: the shared initial weights); refused for
        SGDClassifier.
    distill_epochs : int, default=0
        FedDF: epochs the server trains every round's average on the public set
        `X_unlabeled` (which `fit` then requires), labelled by the winning class of the
        parties' models' mean probabilities; 0 is FedAvg. FedDF's own distillation
        matches those probabilities; scikit-learn's models learn hard labels.
    init : FedKTClassifier or OneShotEnsembleClassifier, default=None
        A one-shot algorithm run as the first round, whose final model (a model like
        `estimator`) starts the averaging rounds: round 1 is its party and server
        steps, on the public set `X_unlabeled` (which `fit` then requires), and the
        remaining ``n_rounds - 1`` rounds average. None: round 1 averages from the
        shared initialisation.
    max_weight_norm : float, default=None
        The largest L2 norm of a party's trained weights (all arrays together): each
        party scales its weights down to it before sending them, as distributed
        differential privacy clips an update, and the server refuses a party's weights
        times rows beyond its rows times this norm (per array). Under validated sums
        (:doc:`/validated_sums`) each array's norm is proved on shares, so that one
        party's weights move the average by at most its rows times this norm. Weights
        within it are sent unchanged. None: no bound beyond each weight's 2**20.
    n_jobs : int, default=None
        Number of parties trained in parallel in a round.
    random_state : int, RandomState instance or None, default=None
        Controls the shared initial weights (every party's first round starts from the
        same ones) and every party's seed in every round.
    verbose : int, default=0
        If positive, `fit` prints every round's training accuracy.

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
    estimator_ : estimator
        The final model, carrying the last average of the parties' weights. It was
        trained on the positions ``0..k-1`` of the ``k`` classes of `classes_`, so its
        own predictions are positions, not labels of `classes_`.
    n_rounds_ : int
        Communication rounds run.
    history_ : list of dict
        Per round: ``round``, ``train_accuracy`` (the parties' accuracy on their own rows
        after their local training, weighted by their rows; None for a first round of
        `init`) and ``bytes_sent`` (the bytes of the weights each party sent; for a
        first round of `init`, its largest upload).
    upload_bytes_ : ndarray of int of shape (n_parties,)
        Bytes each party sent over all rounds, aligned with ``parties_``: with `fit`,
        the arrays of its sums (its weights times its rows, its rows and its rows
        predicted right; the average broadcast back is not counted); with
        `fit_server`, the size of each party's final upload file.
        Under secure aggregation, the keys, sealed shares, masked words and unmasking
        shares of its secure sum of every round.
    left_out_parties_ : dict
        Only after `fit_server`: the uploads it left out under ``min_parties``, with the
        reason, keyed by party (or file).
    $tier_fits

    Notes
    -----
    Across organisations, every round runs `fit_party` on each party's machine and
    `server_round` on their uploads, whose message goes back to every party; when it
    says done, the parties' final uploads (their rows, no weights) and that message give
    the model to `fit_server`. `fit` is exactly these steps in one process, so both give
    the same model for the same `random_state`.

    Every round trains a fresh clone from the global weights, with a fresh optimizer
    state (Adam's moments restart), so a round's result depends only on the weights
    it starts from.

    Each party sends its weights times its rows, its rows and its rows predicted right
    (with FedDF, its model's class probabilities on the public set) in the sum, which
    holds weights up to 2**20 in magnitude (a party whose weights exceed it is
    refused); the server averages from their total. Without secure aggregation it sees
    every party's sums, hence its weights, after every round: FedAvg gives no privacy
    guarantee. `skfedkt.privacy.party_membership_audit` attacks what a party's
    upload lets out; `skfedkt.privacy.membership_audit` attacks every party's weights of
    the last round, the longest trained, which a fitted estimator keeps after `fit` (one
    copy of the model's weights per party) for that audit. Under
    ``skfedkt.set_config(secure_aggregation=True)`` a secure sum adds them, and the
    server sees their total alone, giving the model it gives without; the average
    goes back to every party in the clear, and a first round (`init`) runs as that
    algorithm does under it.

    References
    ----------
    .. [1] H. B. McMahan et al., "Communication-Efficient Learning of Deep Networks from
       Decentralized Data", AISTATS 2017.
    .. [2] Q. Li, B. He and D. Song, "Practical One-Shot Federated Learning for
       Cross-Silo Setting" (FedKT), IJCAI 2021, Table 1 and Section 5.4.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.model_selection import train_test_split
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skfedkt import FedAvgClassifier
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    >>> party = np.arange(len(y_train)) % 4
    >>> clf = FedAvgClassifier(n_rounds=5, local_epochs=2, random_state=0)
    >>> clf.fit(X_train, y_train, groups=party)
    FedAvgClassifier(local_epochs=2, n_rounds=5, random_state=0)
    >>> clf.n_rounds_
    5
    >>> print(f"{clf.score(X_test, y_test):.2f}")
    0.9...
    """

    _plan_type = FedAvgPlan
    _uploads = Uploads(check=_upload_check, sent_bytes=_sent_bytes,
                       message_check=_message_check, fields=SUM_FIELDS,
                       channel_of=channel_of, refusal=refusal)
    _releases = Releases(of_fit=_fit_releases, of_upload=_upload_releases)

    runs_rounds = True

    _parameter_objects = ("init",)

    _private_fitted = ("_model", "_round_weights", "_party_weights")

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],  # the plan says which
        "n_rounds": [Interval(Integral, 1, None, closed="left")],
        "local_epochs": [Interval(Integral, 1, None, closed="left")],
        "proximal_mu": [Interval(Real, 0, None, closed="left")],
        "distill_epochs": [Interval(Integral, 0, None, closed="left")],
        "init": [HasMethods(["fit_party", "fit_server"]), None],  # the plan says which
        "max_weight_norm": [Interval(Real, 0, None, closed="neither"), None],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, estimator=None, *, n_rounds=10, local_epochs=1, proximal_mu=0.0,
                 distill_epochs=0, init=None, max_weight_norm=None, n_jobs=None,
                 random_state=None, verbose=0):
        self.estimator = estimator
        self.n_rounds = n_rounds
        self.local_epochs = local_epochs
        self.proximal_mu = proximal_mu
        self.distill_epochs = distill_epochs
        self.init = init
        self.max_weight_norm = max_weight_norm
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _base_estimators(self) -> list[Any]:
        # an init that is no algorithm of this package is refused by the plan
        first_round: list[Any] = getattr(self.init, "_base_estimators", list)()
        return [base_estimator(self.estimator), *first_round]

    # --- the algorithm's steps (see BaseFederatedClassifier) ---------------------------

    def _parties(self, context: PartyContext[FedAvgPlan],
                 random_state_of: Callable[[Any], np.random.RandomState],
                 ) -> list[FedAvgParty]:
        plan, data = context.plan, context.data
        # the first round's parties draw from the streams its own fit gives them
        init_parties = ([None] * len(data.parties)
                        if plan.init is None or plan.init_plan is None else
                        plan.init._parties(context.with_plan(plan.init_plan),
                                           random_state_of))
        return [FedAvgParty(plan, party, rows, random_state_of(party), init_party)
                for party, rows, init_party in zip(data.parties, data.party_rows,
                                                   init_parties)]

    def _party_step(self, context: PartyContext[FedAvgPlan],
                    parties: Sequence[FedAvgParty]) -> PartyStepResult:
        if context.message is None and context.plan.init is not None:
            return PartyStepResult(first_round(context, parties))
        return PartyStepResult(party_round(context.plan, parties, context.data, context.root,
                                           context.message, context.manifests))

    def _server_round(self, context: ServerContext[FedAvgPlan],
                      uploads: Sequence[Message]) -> PartyUpload:
        return server_round(context, uploads)

    def _server_step(self, context: ServerContext[FedAvgPlan],
                     uploads: Sequence[Message]) -> dict[str, Any]:
        assert context.message is not None  # the rounds end on the server's message
        # in fit every round's global weights, for the staged predictions
        return finished(context.plan, context.message, context.known_classes,
                        context.rounds, context.last_round_uploads)

    def _after_fit(self, context: ServerContext[FedAvgPlan], uploads: Sequence[Message],
                   data: FederatedData | None) -> None:
        if data is None:
            return  # a deployed server holds no labelled rows
        predicted = self._predict_codes(data.X)
        # distorted shares are common after few rounds under skew; one class is a failure
        if np.unique(predicted).size == 1:
            warn_if_classes_lost(
                self.classes_, predicted, "The averaged model predicts on the training rows",
                data.y, "their labels",
                "a network learns slowly from unscaled features: scale them the same way "
                "at every party (a FunctionTransformer with the public set's statistics, "
                "say), or give it more n_rounds or local_epochs.",
            )

    # --- the predict side ---------------------------------------------------------------

    def _round_models(self) -> Iterator[ClassCodeModel]:
        """The global model after each round, as `fit` saw them (after `fit_server`,
        the last)."""
        n_classes = len(self.classes_)
        codes = np.arange(n_classes)
        for weights in self._round_weights:
            yield ClassCodeModel(model_of(base_estimator(self.estimator), weights, n_classes),
                                 codes)

    @available_if(_if_offered("predict_proba"))
    @shared_docs
    def staged_predict_proba(self, X):
        """Class probabilities of the global model after each round: the accuracy
        against rounds (the FedKT paper's Figure 2) without refitting.

        After `fit_server`, which sees only the server's last message, the final
        model alone.

        Parameters
        ----------
        $predict_data

        Yields
        ------
        proba : ndarray of shape (n_samples, n_classes)
            The probabilities after round 1, 2, ..., columns in the order of
            ``classes_``.
        """
        check_is_fitted(self)
        X = self._validate_predict_data(X)
        for model in self._round_models():
            yield model.predict_proba(X, len(self.classes_))

    @shared_docs
    def staged_predict(self, X):
        """Predicted classes of the global model after each round (see
        `staged_predict_proba`).

        Parameters
        ----------
        $predict_data

        Yields
        ------
        y : ndarray of shape (n_samples,)
            The predictions after round 1, 2, ..., among ``classes_``.
        """
        check_is_fitted(self)
        X = self._validate_predict_data(X)
        for model in self._round_models():
            yield self.classes_[model.predict(X)]

    def staged_score(self, X, y, sample_weight=None):
        """Accuracy of the global model after each round (see `staged_predict_proba`).

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            Test samples.
        y : array-like of shape (n_samples,)
            Their true labels.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Yields
        ------
        score : float
            The accuracy after round 1, 2, ...
        """
        for y_pred in self.staged_predict(X):
            yield accuracy_score(y, y_pred, sample_weight=sample_weight)

    def _offers(self, method: str) -> bool:
        # SGDClassifier offers probabilities only with a probabilistic loss
        return hasattr(base_estimator(self.estimator), method)

    def _proba(self, X: Any) -> np.ndarray:
        return self._model.predict_proba(X, len(self.classes_))

    def _decision_scores(self, X: Any) -> np.ndarray:
        return self._model.decision_function(X, len(self.classes_))

    def _predict_codes(self, X: Any) -> np.ndarray:
        return self._model.predict(X)

"""FedAvgClassifier: its parameters, and `fit`, which runs the rounds of both steps."""

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import HasMethods, Interval

from .._base import BaseFederatedClassifier
from .._engine._fitting import ClassCodeModel
from .._engine._weights import model_of
from .._privacy._release import final_model_release, models_release
from ._party import FedAvgParty, party_round
from ._plan import FedAvgPlan, base_estimator
from ._server import check_party_upload, check_server_message, finished, server_round


class FedAvgClassifier(BaseFederatedClassifier):
    """Federated averaging: the parties train one model together, round after round.

    Every party starts from the same weights, trains its copy for `local_epochs` epochs
    on its own rows and sends the weights; the server averages them, each party's
    weighted by its rows, and sends the average back as the next round's start. After
    `n_rounds` rounds the average is the model. No public data is needed. FedAvg is the
    iterative algorithm the FedKT paper measures against; with one round it is the
    one-shot baseline of its Table 1.

    Only models that learn epoch by epoch and whose parameters can be averaged qualify:
    scikit-learn's `~sklearn.neural_network.MLPClassifier` (solver ``"adam"`` or
    ``"sgd"``) and `~sklearn.linear_model.SGDClassifier`. Trees, forests and boosting
    have no averageable parameters: use `FedKTClassifier` or
    `OneShotEnsembleClassifier`.

    Parameters
    ----------
    estimator : MLPClassifier or SGDClassifier, default=None
        The model every party trains. ``None`` means the FedKT paper's MLP:
        ``MLPClassifier(hidden_layer_sizes=(100, 100), batch_size=32)`` (ReLU, Adam with
        learning rate 0.001). Every class of ``y`` gets an output, also at a party that
        has none of its rows.
    n_rounds : int, default=10
        Communication rounds: the server averages the parties' weights this many times.
    local_epochs : int, default=1
        Epochs (passes over its rows, one ``partial_fit`` each) a party trains in every
        round. The FedKT paper uses 10 for FedAvg.
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
        after their local training, weighted by their rows) and ``bytes_sent`` (the
        bytes of the weights each party sent).
    upload_bytes_ : ndarray of int of shape (n_parties,)
        Bytes each party sent over all rounds, aligned with ``parties_``: with `fit`,
        the sum of ``bytes_sent`` in `history_` (the average broadcast back is not
        counted); with `fit_server`, the size of each party's final upload file.
    left_out_parties_ : dict
        Only after `fit_server`: the uploads it left out under ``min_parties``, with the
        reason, keyed by party (or file).

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

    What the server sees is every party's weights after every round: FedAvg gives no
    privacy guarantee. `skfedkt.privacy.party_membership_audit` attacks what a party's
    upload lets out.

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

    runs_rounds = True

    _needs_public_set = False

    _private_fitted = ("_model",)

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), None],  # the plan says which
        "n_rounds": [Interval(Integral, 1, None, closed="left")],
        "local_epochs": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, estimator=None, *, n_rounds=10, local_epochs=1, n_jobs=None,
                 random_state=None, verbose=0):
        self.estimator = estimator
        self.n_rounds = n_rounds
        self.local_epochs = local_epochs
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _base_estimators(self):
        return [base_estimator(self.estimator)]

    # --- the algorithm's steps (see BaseFederatedClassifier) ---------------------------

    def _check_public_set(self, plan, X_unlabeled, step):
        """FedAvg uses no public data: a public set is not needed, and ignored."""

    def _parties(self, plan, data, random_state_of):
        return [FedAvgParty(plan, party, rows, random_state_of(party))
                for party, rows in zip(data.parties, data.party_rows)]

    def _party_step(self, plan, parties, data, root, message, manifests, share_model=True):
        return party_round(plan, parties, data, root, message, manifests), None

    def _message_check(self, plan, X_public):
        return lambda checker: check_server_message(checker, plan)

    def _upload_check(self, plan, X_public, root, final):
        return lambda checker: check_party_upload(checker, plan, final=final)

    def _server_round(self, plan, uploads, message, X_public, root, classes, manifest):
        return server_round(plan, uploads, message, manifest)

    def _server_step(self, plan, uploads, X_public, root, classes, message, reused):
        return finished(plan, message, classes)

    _upload_kind = "weights"

    def _uploaded_estimators(self, plan, party):
        return []  # weights only: arrays, which any upload file holds

    def _sent_bytes(self):
        # every round, the weights
        return np.full(len(self.parties_),
                       sum(entry["bytes_sent"] for entry in self.history_))

    def _membership_releases(self):
        """What FedAvg lets out (see `skfedkt.privacy.membership_audit`): the final
        model. Every party's weights of every round reach the server too; the fitted
        estimator does not keep them: `skfedkt.privacy.party_membership_audit` attacks
        a party's upload."""
        return [final_model_release(self)]

    def _upload_releases(self, upload, n_classes):
        """What one party's upload of a round lets out: the model its weights make."""
        weights = upload.payload["weights"]
        if weights is None:
            return []
        model = model_of(FedAvgPlan.of(self).estimator, weights, n_classes)
        return [models_release("upload", upload.party,
                               [ClassCodeModel(model, np.arange(n_classes))], n_classes)]

    # --- the predict side ---------------------------------------------------------------

    def _offers(self, method):
        # SGDClassifier offers probabilities only with a probabilistic loss
        return hasattr(base_estimator(self.estimator), method)

    def _proba(self, X):
        return self._model.predict_proba(X, len(self.classes_))

    def _decision_scores(self, X):
        return self._model.decision_function(X, len(self.classes_))

    def _predict_codes(self, X):
        return self._model.predict(X)

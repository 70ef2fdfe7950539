"""FedCTClassifier: its parameters, and `fit`, which runs the rounds of both steps."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
)
from sklearn.utils.validation import _num_samples, check_is_fitted

from .._engine._base import _SKEWED_PARTIES_REMEDY, BaseFederatedClassifier, stack_rows
from .._engine._fitting import ensemble_proba
from .._engine._seeds import derived_random_state, root_seed
from ..privacy._mechanisms import BitFlips
from ..privacy._release import Release, final_model_release, models_release
from ._party import _FedCTParty, _FedCTPartyStep
from ._server import _FedCTServer, _FedCTServerStep


class FedCTClassifier(_FedCTPartyStep, _FedCTServerStep, BaseFederatedClassifier):
    """Federated co-training: parties agree on labels for public data, round after round.

    In round 0 every party fits its own model on its own rows. In every round after,
    each party labels the public unlabelled data with its model and shares those hard
    labels (nothing else); the server forms the consensus by majority vote and sends it
    back; every party refits its model on its own rows plus the public data with the
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
        ``predict_proba``, as scikit-learn requires.
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
        one class has a constant ``DummyClassifier``.
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
        training rows after the round's refit) and ``bytes_sent`` (bytes each party sent:
        its one-hot label matrix, one bit per public example and class).
    upload_bytes_ : ndarray of int of shape (n_parties,)
        Bytes each party sent over all rounds, aligned with ``parties_``: with `fit`,
        the sum of ``bytes_sent`` in `history_` (the consensus broadcast back is not
        counted); with `fit_server`, the size of each party's final upload file.
    left_out_parties_ : dict
        Only after `fit_server`: the uploads it left out under ``min_parties``, with the
        reason, keyed by party (or file).
    privacy_report_ : skfedkt.privacy.BitFlipPrivacyReport or None
        The guarantee when `privacy` is set.
    epsilon_ : float
        ``privacy_report_.epsilon``; ``inf`` without bit-flip noise.

    Notes
    -----
    Across organisations, every round runs `fit_party` on each party's machine and
    `server_round` on their uploads, whose message goes back to every party; when it
    says done, `fit_server` assembles the parties' final models. `fit` is exactly these
    steps in one process, so both give the same model for the same `random_state`.

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

    _private_fitted = ("_models",)

    _parameter_objects = ("privacy",)

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), list, dict, None],
        "n_rounds": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, 1, closed="both")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "voting": [StrOptions({"hard", "soft"})],
        "privacy": [BitFlips, None],
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
        self.privacy = privacy
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _base_estimators(self):
        if self.estimator is None:
            return [DecisionTreeClassifier()]
        if isinstance(self.estimator, dict):
            return list(self.estimator.values())
        if isinstance(self.estimator, list):
            return self.estimator
        return [self.estimator]

    def _check_estimator_entries(self):
        """Every entry of a list or dict `estimator` must be an estimator."""
        if not isinstance(self.estimator, (list, dict)):
            return
        entries = (self.estimator.items() if isinstance(self.estimator, dict)
                   else enumerate(self.estimator))
        for key, entry in entries:
            if not (hasattr(entry, "fit") and hasattr(entry, "predict")):
                raise InvalidParameterError(
                    f"The 'estimator' parameter of {type(self).__name__} must hold "
                    f"estimators with fit and predict; entry {key!r} is {entry!r} of type "
                    f"{type(entry).__name__}."
                )

    def _party_estimators(self):
        """One (unfitted) estimator per party, aligned with ``parties_``."""
        if isinstance(self.estimator, dict):
            parties = self.parties_.tolist()
            missing = [p for p in parties if p not in self.estimator]
            unknown = [p for p in self.estimator if p not in parties]
            if missing or unknown:
                raise ValueError(
                    "estimator must have one entry per party of groups: "
                    f"missing {missing}, unknown {unknown}; parties are {parties}."
                )
            return [self.estimator[p] for p in parties]
        if isinstance(self.estimator, list):
            if len(self.estimator) != len(self.parties_):
                raise ValueError(
                    f"estimator is a list of {len(self.estimator)} estimators but groups "
                    f"has {len(self.parties_)} parties; give one per party, in the order "
                    f"of the sorted party labels {self.parties_.tolist()}."
                )
            return self.estimator
        return self._base_estimators() * len(self.parties_)

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y, groups=None, X_unlabeled=None):
        """Run federated co-training.

        Every round composes the party step (`fit_party`) of every party, their models
        in one flat parallel batch, and the server's round (`server_round`); the end is
        `fit_server`'s. The model equals the one the deployed steps give for the same
        `random_state`.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The training rows of all parties.
        y : array-like of shape (n_samples,)
            Their labels (any type: strings, integers, booleans).
        groups : array-like of shape (n_samples,), default=None
            The party of each row. ``None`` means a single party (self-training).
        X_unlabeled : {array-like, sparse matrix, DataFrame} or PublicSet, default=None
            The public unlabelled data, of shape (n_public, n_features). ``None`` uses
            the rows of `X` without labels (no privacy). Wrap it in `PublicSet` inside
            cross-validation when it may have exactly as many rows as `X`.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        self._check_estimator_entries()
        self._clear_fitted_state()
        data = self._validate_federated_data(X, y, groups, X_unlabeled)
        n_rows = len(data.y)
        n_public = _num_samples(data.X_public)
        root = root_seed(self.random_state)
        steps = [
            _FedCTParty(self, party, estimator, rows, data.y,
                        derived_random_state(root, "party", party))
            for party, estimator, rows in zip(
                self.parties_.tolist(), self._party_estimators(), data.party_rows
            )
        ]
        # the parties' rows, then the public rows: tasks index one matrix
        X_all = stack_rows(data.X, data.X_public)
        public_rows = n_rows + np.arange(n_public)
        server = _FedCTServer(self, n_public, len(self.classes_), root)
        message, fitted_round = None, None
        while True:
            consensus, round_ = server.instructions(message)
            if round_ != fitted_round:  # the final round may be the one just fit
                uploads = self._party_round(steps, X_all, public_rows, consensus, round_,
                                            data.X_public, len(self.classes_), final=False)
                fitted_round = round_
            if message is not None and message.manifest["done"]:
                break
            message = server.round(uploads, message)
        self._finish(uploads, message, [step.model for step in steps])
        self.upload_bytes_ = np.full(len(self.parties_), self.n_rounds_ * server.bytes_sent)
        self._warn_if_classes_lost(
            ensemble_proba(self._models, data.X_public, len(self.classes_),
                           self.voting).argmax(axis=1),
            "The parties' vote predicts on the public set", data.y, "the training rows",
            _SKEWED_PARTIES_REMEDY,
        )
        return self

    def _sensitivity(self, n_public):
        sensitivity = None if self.privacy is None else self.privacy.sensitivity
        return 2.0 * n_public if sensitivity is None else float(sensitivity)

    def _membership_releases(self):
        """What FedCT lets out (see `skfedkt.privacy.membership_audit`): every party's
        shared labels (through its bit flips, covered by ``epsilon_``) as labels of rows
        the attacker chooses, which is the server's power to pick the public set; every
        party's final local model, which the voting ensemble needs; and that ensemble."""
        report = self.privacy_report_
        sensitivity = None if report is None else report.sensitivity
        delta = 0.0 if report is None else report.delta
        n_classes = len(self.classes_)
        releases = []
        for party, model in zip(self.parties_.tolist(), self._models):
            releases += [
                self._labels_release(party, model, n_classes, sensitivity, self.epsilon_,
                                     delta),
                models_release("local model", party, [model], n_classes),
            ]
        return [*releases, final_model_release(self)]

    def _upload_releases(self, upload, n_classes):
        """What one party's upload of a round lets out: its labels, as labels of rows the
        attacker chooses (where the party's model is at hand, ``upload.local_model``),
        and its model when the upload carries it."""
        releases = []
        local_model = getattr(upload, "local_model", None)
        if local_model is not None:
            n_public = len(upload.payload["labels"])
            epsilon = np.inf if self.privacy is None else self.privacy.epsilon
            releases.append(self._labels_release(
                upload.party, local_model.model, n_classes, self._sensitivity(n_public),
                epsilon, 0.0,
            ))
        if upload.payload["model"] is not None:
            releases.append(models_release(
                "local model", upload.party,
                [upload.model()], n_classes,
            ))
        return releases

    def _labels_release(self, party, model, n_classes, sensitivity, epsilon, delta):
        def shared_votes(X):
            # the same flips every time: the attacker sees one release
            labels = self._share_labels(model.predict(X), n_classes, sensitivity,
                                        np.random.RandomState(0))
            return (labels[:, None] == np.arange(n_classes)).astype(float)

        return Release("labels", party, "labels", shared_votes, epsilon, delta)

    def predict_proba(self, X):
        """Vote shares (``voting="hard"``) or averaged probabilities of the parties' models.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The input samples.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        check_is_fitted(self)
        return ensemble_proba(
            self._models, self._validate_predict_data(X), len(self.classes_), self.voting
        )

    def _predict_codes(self, X):
        # the parties' majority (or soft) vote: the argmax of predict_proba, as
        # scikit-learn requires
        return ensemble_proba(self._models, X, len(self.classes_), self.voting).argmax(axis=1)

"""FedCTClassifier: its parameters, and `fit`, which runs the rounds of both steps."""

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context, clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import _num_samples, check_is_fitted

from .._base import BaseFederatedClassifier, shared_docs
from .._deployment._protocol import (
    checked_message,
    collect_uploads,
    require_public_set,
    server_expectations,
)
from .._deployment._upload import UploadError
from .._engine._fitting import GlobalLabelClassifier, StackedRows, ensemble_proba
from .._engine._seeds import derived_random_state, party_random_state, root_seed
from .._engine._validation import (
    _SKEWED_PARTIES_REMEDY,
    warn_if_classes_lost,
)
from .._privacy._mechanisms import BitFlips
from .._privacy._release import Release, final_model_release, models_release
from ._party import FedCTParty, party_round, share_labels
from ._plan import FedCTPlan, base_estimators
from ._server import FedCTServer, check_party_upload, check_server_message, finished


class FedCTClassifier(BaseFederatedClassifier):
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

    _plan_type = FedCTPlan

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
        return base_estimators(self.estimator)

    @_fit_context(prefer_skip_nested_validation=False)
    @shared_docs
    def fit(self, X, y, groups=None, X_unlabeled=None):
        """Run federated co-training.

        Every round composes the party step (`fit_party`) of every party, their models
        in one flat parallel batch, and the server's round (`server_round`); the end is
        `fit_server`'s. The model equals the one the deployed steps give for the same
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
        n_rows, n_classes = len(data.y), len(self.classes_)
        n_public = _num_samples(data.X_public)
        root = root_seed(self.random_state)
        parties = [
            FedCTParty(plan, party, estimator, rows, data.y,
                       derived_random_state(root, "party", party, scratch=True))
            for party, estimator, rows in zip(
                self.parties_.tolist(), plan.party_estimators(self.parties_.tolist()),
                data.party_rows,
            )
        ]
        # the parties' rows, then the public rows: tasks index one matrix
        X_all = StackedRows(data.X, data.X_public)
        public_rows = n_rows + np.arange(n_public)
        server = FedCTServer(plan, n_public, n_classes, root)
        message, fitted_round = None, None
        while True:
            consensus, round_ = server.instructions(message)
            if round_ != fitted_round:  # the final round may be the one just fit
                uploads = party_round(plan, parties, X_all, public_rows, consensus, round_,
                                      data.X_public, n_classes, final=False)
                fitted_round = round_
            if message is not None and message.manifest["done"]:
                break
            message = server.round(uploads, message)
        fitted = finished(plan, uploads, message, [party.model for party in parties],
                          self.classes_)
        fitted["upload_bytes_"] = np.full(len(parties),
                                          fitted["n_rounds_"] * server.bytes_sent)
        warn_if_classes_lost(
            self.classes_,
            ensemble_proba(fitted["_models"], data.X_public, n_classes,
                           plan.voting).argmax(axis=1),
            "The parties' vote predicts on the public set", data.y, "the training rows",
            _SKEWED_PARTIES_REMEDY,
        )
        vars(self).update(fitted)
        return self

    @shared_docs
    def fit_party(self, X, y, *, party, classes, X_unlabeled, message=None,
                  share_model=None, party_seed=None):
        """A party's step of one round, on its own machine.

        Without `message` (round 0) the party fits its model on its own rows; with the
        server's consensus `message` it refits on its rows plus the public rows with the
        consensus labels. Either way it uploads its labels of the public set (through
        bit flips with `privacy`) and its training accuracy; when the message says
        training is done, the party refits its final model and uploads it if
        `share_model`. This estimator is not modified.

        Parameters
        ----------
        $party_data
        X_unlabeled : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
            The agreed public unlabelled data.
        message : str, path-like, bytes or PartyUpload, default=None
            The server's message of the previous round (`server_round`), checked like
            an upload; None for round 0.
        share_model : bool, default=None
            Whether the final round uploads the party's model, so that the server can
            assemble `fit`'s voting ensemble. None means True in the final round. The
            party keeps its model either way, in ``upload.local_model``.
        party_seed : int, default=None
            Seed of the party's draws (model seeds, bit flips); None derives them from
            `random_state` and `party`, as `fit` does. With `privacy`, a server that
            knows `random_state` could recompute the flips: pass a secret seed.

        Returns
        -------
        upload : skfedkt.PartyUpload
            Save it with ``upload.save(path)`` and send the file to the server.
        """
        plan, data = self._party_inputs(X, y, party, classes, X_unlabeled,
                                        public_step="FedCT's party step")
        estimator = plan.own_estimator(data.party)
        if plan.privacy is not None and party_seed is None:
            warnings.warn(
                "With BitFlips the party's bit flips come from party_seed; without one "
                "they derive from random_state and the party's name, which a server "
                "knowing random_state can recompute. Pass a secret party_seed.",
                UserWarning,
            )
        n_rows, n_public = len(data.y), _num_samples(data.X_public)
        if message is not None:
            message = checked_message(
                message, data.expectations(self), check=lambda checker:
                check_server_message(checker, n_public, plan.n_rounds))
        consensus, round_ = FedCTServer(plan, n_public, len(data.classes), None).instructions(
            message)
        party = FedCTParty(plan, data.party, estimator, np.arange(n_rows), data.y,
                           party_random_state(self.random_state, data.party, party_seed))
        final = message is not None and message.manifest["done"]
        (upload,) = party_round(
            plan, [party], StackedRows(data.X, data.X_public), n_rows + np.arange(n_public),
            consensus, round_, data.X_public, len(data.classes),
            final=final and share_model is not False, manifest=data.manifest(self),
        )
        upload.local_model = GlobalLabelClassifier(party.model, data.classes)
        return upload

    @shared_docs
    def server_round(self, uploads, X_unlabeled, *, message=None, classes=None,
                     trusted=(), min_parties=None, limits=None):
        """The server's step of one round: the consensus of the parties' labels.

        Parameters
        ----------
        uploads : list of str, path-like, bytes or PartyUpload
            The parties' uploads of this round, checked like `FedKTClassifier.fit_server`'s.
        X_unlabeled : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
            The agreed public unlabelled data.
        message : PartyUpload, str or path-like, default=None
            The server's own message of the previous round (its state); None after
            round 0.
        $upload_checks

        Returns
        -------
        message : skfedkt.PartyUpload
            What to send every party (``message.save(path)``): the consensus, the round
            to fit next, and ``manifest["done"]`` once training stopped, when the
            parties fit and send their final models for `fit_server`.
        """
        self._validate_params()
        plan = FedCTPlan.of(self)
        require_public_set(X_unlabeled, "FedCT's server round")
        expected, _ = server_expectations(clone(self), X_unlabeled, classes)
        n_public = _num_samples(X_unlabeled)
        if message is not None:
            message = checked_message(message, expected, limits, check=lambda checker:
                                      check_server_message(checker, n_public, plan.n_rounds))
            expected["classes"] = message.manifest["classes"]
        uploads, _ = collect_uploads(
            uploads, dict(expected, round=0 if message is None else message.manifest["round"]),
            trusted=trusted, min_parties=min_parties, limits=limits,
            check=lambda checker: check_party_upload(checker, n_public, final=False),
        )
        classes = uploads[0].manifest["classes"]
        server = FedCTServer(plan, n_public, len(classes), root_seed(self.random_state))
        return server.round(uploads, message, manifest=dict(expected, classes=classes))

    @shared_docs
    def fit_server(self, uploads, X_unlabeled, *, message, classes=None, trusted=(),
                   min_parties=None, limits=None):
        """Assemble the parties' final models into `fit`'s voting classifier.

        Parameters
        ----------
        $uploads
        X_unlabeled : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
            The agreed public unlabelled data.
        message : PartyUpload, str or path-like
            The server's last message, the one that said done.
        $upload_checks

        Returns
        -------
        self : object
            The fitted classifier.
        """
        plan, expected, _ = self._server_inputs(X_unlabeled, classes,
                                                public_step="FedCT's server step")
        n_public = _num_samples(X_unlabeled)
        message = checked_message(
            message, expected, limits, check=lambda checker: check_server_message(
                checker, n_public, plan.n_rounds))
        if not message.manifest["done"]:
            raise ValueError(
                f"The server's message of round {message.manifest['round']} does not say "
                "done: run the rounds until server_round says done, then pass its message."
            )
        uploads, left_out = collect_uploads(
            uploads, dict(expected, classes=message.manifest["classes"],
                          round=message.manifest["round"]),
            trusted=trusted, min_parties=min_parties, limits=limits,
            check=lambda checker: check_party_upload(checker, n_public, final=True),
        )
        missing = [upload.party for upload in uploads if upload.payload.get("model") is None]
        if missing:
            raise UploadError(
                f"Parties {missing} sent no model (share_model=False): the server cannot "
                "assemble the voting classifier without every party's model.",
                party=missing[0], field="model",
            )
        classes = np.array(message.manifest["classes"])
        self._set_server_fit(
            finished(plan, uploads, message, [upload.model() for upload in uploads], classes),
            uploads, classes, left_out,
        )
        return self

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
                upload.party, local_model.model, n_classes,
                FedCTPlan.of(self).sensitivity(n_public), epsilon, 0.0,
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
            labels = share_labels(self.privacy, model.predict(X), n_classes, sensitivity,
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

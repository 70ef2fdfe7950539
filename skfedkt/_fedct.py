"""FedCT: federated co-training by sharing hard labels on public data."""

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context, clone
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
)
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._base import _SKEWED_PARTIES_REMEDY, BaseFederatedClassifier, stack_rows
from ._federation import (
    PartyData,
    collect_uploads,
    derived_random_state,
    party_random_state,
    require_public_set,
    root_seed,
    server_expectations,
)
from ._fitting import (
    ClassCodeModel,
    GlobalLabelClassifier,
    Task,
    code_dtype,
    draw_seeds,
    ensemble_proba,
    fit_clones,
)
from ._upload import PartyUpload, UploadError, read_upload
from ._voting import count_votes, plurality_vote
from .privacy import (
    BitFlipPrivacyReport,
    bit_flip_epsilon,
    bit_flip_probability,
    guarantee_strength,
)


def _checked_message(message, expected):
    """The server's message of a round, read and checked like an upload."""
    if not isinstance(message, PartyUpload):
        message = read_upload(message, name="the server's message")
    (message,), _ = collect_uploads([message], dict(expected, party="server"))
    return message


class _FedCTParty:
    """A party's step of a FedCT round: its model on its rows plus the consensus-labelled
    public rows, and its (bit-flipped) labels of the public set.

    Stateless across rounds: the draws of round ``r`` depend only on the party's stream
    and ``r``, so that a party's machine can run each round as a separate command.
    `FedCTClassifier.fit_party` runs one party's; ``fit`` runs every party's, their
    models of a round in one flat parallel batch.
    """

    def __init__(self, config, party, estimator, rows, y, random_state):
        self.config, self.party, self.estimator, self.rows, self.y = (
            config, party, estimator, rows, y
        )
        (self.base_seed,) = draw_seeds(random_state, 1)
        self.model = None

    def round_seed(self, round_):
        """The seed of the round's model; the round's bit flips follow in its stream."""
        self._round_rng = derived_random_state(int(self.base_seed), "round", round_)
        (seed,) = draw_seeds(self._round_rng, 1)
        return seed

    def task(self, consensus, public_rows):
        labelled = consensus >= 0
        return Task(self.estimator, np.concatenate([self.y[self.rows], consensus[labelled]]),
                    np.concatenate([self.rows, public_rows[labelled]]))

    def upload(self, model, predictions, accuracy, round_, n_classes, final, manifest):
        """The round's labels and training accuracy; the model itself if `final`."""
        self.model = model
        labels = self.config._share_labels(predictions, n_classes, len(predictions),
                                           self._round_rng)
        return PartyUpload(
            manifest=dict(manifest, round=int(round_), training_accuracy=float(accuracy)),
            payload={
                "labels": labels.astype(code_dtype(n_classes)),
                "model": model.estimator if final else None,
                "codes": model.codes if final else None,
            },
        )


class _FedCTServer:
    """The server's step of a FedCT round: the consensus of the parties' labels, and
    whether to go on.

    Its state between rounds travels in its message to the parties (round, consensus,
    history, stalled rounds, the seed of its tie breaks), so each round can run as a
    separate command.
    """

    def __init__(self, config, n_public, n_classes, root):
        self.config, self.n_public, self.n_classes, self.root = (
            config, n_public, n_classes, root
        )
        self.bytes_sent = int(np.ceil(n_public * n_classes / 8))

    def instructions(self, message):
        """The consensus labels (codes, -1 for none) and round the parties fit next."""
        if message is None:
            return np.full(self.n_public, -1), 0
        return np.asarray(message.payload["consensus"]), int(message.manifest["round"])

    def round(self, uploads, message, manifest=None):
        """The message after the parties' uploads of the round `message` asked for."""
        config = self.config
        consensus, fitted = self.instructions(message)
        state = dict(server_seed=self.root, history=[], stalled=0) if message is None else {
            key: message.manifest[key] for key in ("server_seed", "history", "stalled")
        }
        history = [dict(entry) for entry in state["history"]]
        accuracy = float(np.mean([upload.manifest["training_accuracy"] for upload in uploads]))
        if fitted >= 1:  # the accuracy of the models refit on the previous consensus
            history[fitted - 1]["train_accuracy"] = accuracy

        def reply(next_consensus, next_round, last, done, stalled):
            return PartyUpload(
                manifest=dict(manifest or {}, party="server", n_rows=0, round=int(next_round),
                              done=bool(done), stalled=int(stalled), history=history,
                              server_seed=int(state["server_seed"])),
                payload={"consensus": np.asarray(next_consensus, dtype=np.int64),
                         "last_consensus": np.asarray(last, dtype=np.int64)},
            )

        if fitted == config.n_rounds:  # n_rounds=0: local models only
            return reply(consensus, fitted, consensus, True, state["stalled"])
        # the tie keys are drawn once per fit, so a tied example keeps its label
        tie_keys = derived_random_state(state["server_seed"], "server").random_sample(
            (self.n_public, self.n_classes)
        )
        labels = np.stack([upload.payload["labels"] for upload in uploads])
        new_consensus = plurality_vote(count_votes(labels, self.n_classes), tie_keys)
        changed = float(np.mean(new_consensus != consensus))
        stalled = state["stalled"] + 1 if changed <= config.tol else 0
        history.append(dict(round=fitted + 1, consensus_changed=changed, train_accuracy=None,
                            bytes_sent=self.bytes_sent))
        config._say(f"round {fitted + 1}: {changed:.1%} of the consensus labels changed")
        if stalled >= config.n_iter_no_change:
            # the models just fit already learned this consensus: they are final
            history[-1]["train_accuracy"] = accuracy
            return reply(consensus, fitted, new_consensus, True, stalled)
        done = fitted + 1 == config.n_rounds
        return reply(new_consensus, fitted + 1, new_consensus, done, stalled)

    @staticmethod
    def completed_history(message, final_uploads):
        """The message's history, with the final models' training accuracy filled in."""
        history = [dict(entry) for entry in message.manifest["history"]]
        if history and history[-1]["train_accuracy"] is None:
            history[-1]["train_accuracy"] = float(np.mean(
                [upload.manifest["training_accuracy"] for upload in final_uploads]
            ))
        return history


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
    dp_epsilon : float, default=None
        If set, every party flips each bit of its one-hot label matrix independently with
        probability ``p = 1 / (1 + exp(dp_epsilon / dp_sensitivity))`` before sharing,
        which makes each round's release ``dp_epsilon``-differentially private when one
        training example changes at most ``dp_sensitivity`` bits.
    dp_sensitivity : float, default=None
        Bits of a party's label matrix one training example may change. ``None`` means
        the worst case ``2 * len(X_unlabeled)`` (every public label flips, two bits
        each).
    dp_delta : float, default=1e-5
        The delta of the composed (epsilon, delta) guarantee reported.
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
        clone they were trained on integer class codes (indices into ``classes_``); a
        party whose training labels held one class has a constant ``DummyClassifier``.
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
        The guarantee when `dp_epsilon` is set.
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

    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict"]), list, dict, None],
        "n_rounds": [Interval(Integral, 0, None, closed="left")],
        "tol": [Interval(Real, 0, 1, closed="both")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "voting": [StrOptions({"hard", "soft"})],
        "dp_epsilon": [Interval(Real, 0, None, closed="neither"), None],
        "dp_sensitivity": [Interval(Real, 0, None, closed="neither"), None],
        "dp_delta": [Interval(Real, 0, 1, closed="neither")],
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
        dp_epsilon=None,
        dp_sensitivity=None,
        dp_delta=1e-5,
        n_jobs=None,
        random_state=None,
        verbose=0,
    ):
        self.estimator = estimator
        self.n_rounds = n_rounds
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.voting = voting
        self.dp_epsilon = dp_epsilon
        self.dp_sensitivity = dp_sensitivity
        self.dp_delta = dp_delta
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

    def fit_party(self, X, y, *, party, classes, X_unlabeled, message=None,
                  share_model=None, party_seed=None):
        """A party's step of one round, on its own machine.

        Without `message` (round 0) the party fits its model on its own rows; with the
        server's consensus `message` it refits on its rows plus the public rows with the
        consensus labels. Either way it uploads its labels of the public set (through
        bit flips with `dp_epsilon`) and its training accuracy; when the message says
        training is done, the party refits its final model and uploads it if
        `share_model`. This estimator is not modified.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The party's rows.
        y : array-like of shape (n_samples,)
            Their labels, all among `classes`.
        party : str or int
            The party's name, as the server knows it. With a dict `estimator`, the
            party's own entry is used; a list `estimator` is refused here.
        classes : array-like of shape (n_classes,)
            The class labels every party and the server agreed on.
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
            `random_state` and `party`, as `fit` does. With `dp_epsilon`, a server that
            knows `random_state` could recompute the flips: pass a secret seed.

        Returns
        -------
        upload : skfedkt.PartyUpload
            Save it with ``upload.save(path)`` and send the file to the server.
        """
        self._validate_params()
        self._check_estimator_entries()
        require_public_set(X_unlabeled, "FedCT's party step")
        data = PartyData(self, X, y, classes, X_unlabeled, party)
        if isinstance(self.estimator, list):
            raise ValueError(
                "A list estimator is aligned with the sorted party labels, which a party "
                "does not know: give a dict keyed by party name to fit_party."
            )
        if isinstance(self.estimator, dict) and data.party not in self.estimator:
            raise ValueError(
                f"estimator has no entry for party {data.party!r}; its keys are "
                f"{list(self.estimator)}."
            )
        if self.dp_epsilon is not None and party_seed is None:
            warnings.warn(
                "With dp_epsilon the party's bit flips come from party_seed; without one "
                "they derive from random_state and the party's name, which a server "
                "knowing random_state can recompute. Pass a secret party_seed.",
                UserWarning,
            )
        expected = data.expectations(self)
        if message is not None:
            message = _checked_message(message, expected)
        server = _FedCTServer(self, _num_samples(data.X_public), len(data.classes), None)
        consensus, round_ = server.instructions(message)
        estimator = (self.estimator[data.party] if isinstance(self.estimator, dict)
                     else self._base_estimators()[0])
        step = _FedCTParty(self, data.party, estimator, np.arange(len(data.y)), data.y,
                           party_random_state(self.random_state, data.party, party_seed))
        n_rows, n_public = len(data.y), _num_samples(data.X_public)
        final = message is not None and message.manifest["done"]
        (upload,) = self._party_round(
            [step], stack_rows(data.X, data.X_public), n_rows + np.arange(n_public),
            consensus, round_, data.X_public, len(data.classes),
            final=final and share_model is not False,
            manifest=data.manifest(self),
        )
        upload.local_model = GlobalLabelClassifier(step.model, data.classes)
        return upload

    def server_round(self, uploads, X_unlabeled, *, message=None, classes=None,
                     trusted=(), min_parties=None):
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
        classes : array-like, default=None
            The agreed classes; ``None`` takes them from the first upload.
        trusted : sequence of str, default=()
            Type names to load beyond scikit-learn's and XGBoost's.
        min_parties : int, default=None
            If given, uploads that fail a check are left out as long as this many
            parties remain; if None, any failure raises.

        Returns
        -------
        message : skfedkt.PartyUpload
            What to send every party (``message.save(path)``): the consensus, the round
            to fit next, and ``manifest["done"]`` once training stopped, when the
            parties fit and send their final models for `fit_server`.
        """
        self._validate_params()
        require_public_set(X_unlabeled, "FedCT's server round")
        expected, _ = server_expectations(clone(self), X_unlabeled, classes)
        if message is not None:
            message = _checked_message(message, expected)
            expected["classes"] = message.manifest["classes"]
        uploads, _ = collect_uploads(
            uploads, dict(expected, round=0 if message is None else message.manifest["round"]),
            trusted=trusted, min_parties=min_parties,
        )
        classes = uploads[0].manifest["classes"]
        server = _FedCTServer(self, _num_samples(X_unlabeled), len(classes),
                              root_seed(self.random_state))
        return server.round(uploads, message, manifest=dict(expected, classes=classes))

    def fit_server(self, uploads, X_unlabeled, *, message, classes=None, trusted=(),
                   min_parties=None):
        """Assemble the parties' final models into `fit`'s voting classifier.

        Parameters
        ----------
        uploads : list of str, path-like, bytes or PartyUpload
            The parties' final uploads, holding their models (`fit_party` after the
            server's message said done).
        X_unlabeled : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
            The agreed public unlabelled data.
        message : PartyUpload, str or path-like
            The server's last message, the one that said done.
        classes, trusted, min_parties
            As in `server_round`.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        self._validate_params()
        require_public_set(X_unlabeled, "FedCT's server step")
        expected, _ = server_expectations(self, X_unlabeled, classes)
        message = _checked_message(message, expected)
        if not message.manifest["done"]:
            raise ValueError(
                f"The server's message of round {message.manifest['round']} does not say "
                "done: run the rounds until server_round says done, then pass its message."
            )
        uploads, self.left_out_parties_ = collect_uploads(
            uploads, dict(expected, classes=message.manifest["classes"],
                          round=message.manifest["round"]),
            trusted=trusted, min_parties=min_parties,
        )
        missing = [upload.party for upload in uploads if upload.payload.get("model") is None]
        if missing:
            raise UploadError(
                f"Parties {missing} sent no model (share_model=False): the server cannot "
                "assemble the voting classifier without every party's model.",
                party=missing[0], field="model",
            )
        self.classes_ = np.array(message.manifest["classes"])
        self.parties_ = np.array([upload.party for upload in uploads])
        self._finish(uploads, message, [
            ClassCodeModel(upload.payload["model"], upload.payload["codes"])
            for upload in uploads
        ])
        self.upload_bytes_ = np.array([upload.n_bytes for upload in uploads])
        return self

    def _party_round(self, steps, X_all, public_rows, consensus, round_, X_public,
                     n_classes, *, final, manifest=None):
        """Every party's model of `round_` (one flat parallel batch), and its upload."""
        fits = fit_clones(
            [step.task(consensus, public_rows) for step in steps],
            X_all,
            n_classes=n_classes,
            seeds=[step.round_seed(round_) for step in steps],
            n_jobs=self.n_jobs,
            verbose=max(self.verbose - 1, 0),
            X_predict=X_public,
            score_training=True,
        )
        return [
            step.upload(model, labels, accuracy, round_, n_classes, final,
                        manifest or dict(party=step.party, n_rows=len(step.rows)))
            for step, model, labels, accuracy in zip(
                steps, fits.models, fits.predictions, fits.training_accuracy
            )
        ]

    def _finish(self, uploads, message, models):
        """The fitted attributes, from the final uploads and the server's last message."""
        self._models = models
        self.estimators_ = [model.estimator for model in models]
        self.history_ = _FedCTServer.completed_history(message, uploads)
        self.n_rounds_ = len(self.history_)
        last = np.asarray(message.payload["last_consensus"])
        self.consensus_mask_ = last >= 0
        self.consensus_labels_ = self.classes_[last[self.consensus_mask_]]
        self.privacy_report_ = self._privacy_report(len(last))
        self.epsilon_ = np.inf if self.privacy_report_ is None else self.privacy_report_.epsilon

    def _sensitivity(self, n_public):
        return 2.0 * n_public if self.dp_sensitivity is None else float(self.dp_sensitivity)

    def _share_labels(self, predictions, n_classes, n_public, rng):
        """What a party sends: its labels, through bit-flip noise when private.

        Returns class codes of shape (n_public,); ``-1`` where a noisy one-hot row does
        not hold exactly one 1 (an abstention).
        """
        if self.dp_epsilon is None:
            return predictions
        one_hot = predictions[..., None] == np.arange(n_classes)
        flip = rng.random_sample(one_hot.shape) < bit_flip_probability(
            self.dp_epsilon, self._sensitivity(n_public)
        )
        noisy = one_hot ^ flip
        return np.where(noisy.sum(axis=-1) == 1, noisy.argmax(axis=-1), -1)

    def _privacy_report(self, n_public):
        if self.dp_epsilon is None:
            return None
        sensitivity = self._sensitivity(n_public)
        pure = self.n_rounds_ * self.dp_epsilon
        rdp = bit_flip_epsilon(
            self.n_rounds_, epsilon=self.dp_epsilon, sensitivity=sensitivity,
            delta=self.dp_delta,
        )
        epsilon = min(pure, rdp)
        guarantee = (
            f"({epsilon:.4g}, 0)" if pure <= rdp else f"({epsilon:.4g}, {self.dp_delta:g})"
        )
        statement = (
            f"Every party's shared labels are {guarantee}-differentially private for its "
            f"training examples over {self.n_rounds_} round(s), "
            f"{guarantee_strength(epsilon)}: each round flips every "
            f"bit of its one-hot label matrix with probability "
            f"{bit_flip_probability(self.dp_epsilon, sensitivity):.4g}, which is "
            f"{self.dp_epsilon:g}-DP per round for a sensitivity of {sensitivity:g} bits "
            + ("(the default worst case 2 * len(X_unlabeled))" if self.dp_sensitivity is None
               else "(as given)")
            + f". Pure composition gives {pure:.4g}; composing the per-bit randomized "
            f"responses (RDP, delta {self.dp_delta:g}) gives {rdp:.4g}."
        )
        return BitFlipPrivacyReport(
            epsilon_per_round=self.dp_epsilon, sensitivity=sensitivity,
            flip_probability=bit_flip_probability(self.dp_epsilon, sensitivity),
            n_rounds=self.n_rounds_, delta=self.dp_delta, pure_epsilon=pure,
            rdp_epsilon=rdp, epsilon=epsilon, statement=statement,
        )

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

    def predict(self, X):
        """Majority vote (or soft vote) of the parties' final models.

        Parameters
        ----------
        X : {array-like, sparse matrix, DataFrame} of shape (n_samples, n_features)
            The input samples.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            The predicted classes.
        """
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]

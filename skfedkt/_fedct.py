"""FedCT: federated co-training by sharing hard labels on public data."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
)
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._base import _SKEWED_PARTIES_REMEDY, BaseFederatedClassifier, stack_rows
from ._fitting import Task, draw_seeds, ensemble_proba, fit_clones
from ._voting import count_votes, plurality_vote
from .privacy import (
    BitFlipPrivacyReport,
    bit_flip_epsilon,
    bit_flip_probability,
    guarantee_strength,
)


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
        Bytes each party sent over all rounds, aligned with ``parties_`` (the sum of
        ``bytes_sent`` in `history_`; the consensus broadcast back is not counted).
    privacy_report_ : skfedkt.privacy.BitFlipPrivacyReport or None
        The guarantee when `dp_epsilon` is set.
    epsilon_ : float
        ``privacy_report_.epsilon``; ``inf`` without bit-flip noise.

    Notes
    -----
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
        estimators = self._party_estimators()
        n_classes, n_rows = len(self.classes_), len(data.y)
        n_public = _num_samples(data.X_public)
        rng = check_random_state(self.random_state)
        # own streams for the bit flips and the consensus's tie breaks; the tie keys are
        # drawn once, so a tied example keeps its label from round to round
        flip_rng, tie_rng = (np.random.RandomState(seed) for seed in draw_seeds(rng, 2))
        tie_keys = tie_rng.random_sample((n_public, n_classes))
        # the parties' rows, then the public rows: tasks index one matrix
        X_all = stack_rows(data.X, data.X_public)
        public_rows = n_rows + np.arange(n_public)
        bytes_sent = int(np.ceil(n_public * n_classes / 8))

        def fit_round(consensus):
            labelled = consensus >= 0
            return fit_clones(
                [
                    Task(estimator, np.concatenate([data.y[rows], consensus[labelled]]),
                         np.concatenate([rows, public_rows[labelled]]))
                    for estimator, rows in zip(estimators, data.party_rows)
                ],
                X_all,
                n_classes=n_classes,
                seeds=draw_seeds(rng, len(estimators)),
                n_jobs=self.n_jobs,
                verbose=max(self.verbose - 1, 0),
                X_predict=data.X_public,
                score_training=True,
            )

        consensus = np.full(n_public, -1)
        fits = fit_round(consensus)  # round 0: local data only
        self.history_ = []
        stalled = 0
        for round_ in range(1, self.n_rounds + 1):
            shared = self._share_labels(fits.predictions, n_classes, n_public, flip_rng)
            new_consensus = plurality_vote(count_votes(shared, n_classes), tie_keys)
            changed = float(np.mean(new_consensus != consensus))
            consensus = new_consensus
            stalled = stalled + 1 if changed <= self.tol else 0
            if stalled < self.n_iter_no_change:
                fits = fit_round(consensus)
            self.history_.append(
                {
                    "round": round_,
                    "consensus_changed": changed,
                    "train_accuracy": float(np.mean(fits.training_accuracy)),
                    "bytes_sent": bytes_sent,
                }
            )
            self._say(
                f"round {round_}: {changed:.1%} of the consensus labels changed; mean "
                f"training accuracy {self.history_[-1]['train_accuracy']:.3f}"
            )
            if stalled >= self.n_iter_no_change:
                break
        self.n_rounds_ = len(self.history_)
        self.upload_bytes_ = np.full(len(self.parties_), self.n_rounds_ * bytes_sent)
        self._models = fits.models
        self.estimators_ = [model.estimator for model in self._models]
        self.consensus_mask_ = consensus >= 0
        self.consensus_labels_ = self.classes_[consensus[self.consensus_mask_]]
        self._warn_if_single_class(
            ensemble_proba(self._models, data.X_public, n_classes, self.voting).argmax(axis=1),
            "The parties' vote predicts on the public set", data.y, "the training rows",
            _SKEWED_PARTIES_REMEDY,
        )
        self.privacy_report_ = self._privacy_report(n_public)
        self.epsilon_ = np.inf if self.privacy_report_ is None else self.privacy_report_.epsilon
        return self

    def _sensitivity(self, n_public):
        return 2.0 * n_public if self.dp_sensitivity is None else float(self.dp_sensitivity)

    def _share_labels(self, predictions, n_classes, n_public, rng):
        """What the parties send: their labels, through bit-flip noise when private.

        Returns class codes of shape (n_parties, n_public); ``-1`` where a noisy one-hot
        row does not hold exactly one 1 (an abstention).
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

"""The base class every algorithm extends, and the one place its steps are composed:
`fit`, `fit_party`, `server_round` and `fit_server` are written here once over the
algorithm's hooks and declarations (see `BaseFederatedClassifier`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar
from abc import ABCMeta, abstractmethod
from dataclasses import replace

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    MetaEstimatorMixin,
    clone,
    is_regressor,
)
from sklearn.utils import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ._engine._compat import constructor_parameters, fit_context
from ._agreements import ConsortiumAgreements
from ._config import get_config
from ._declarations import (
    _COMMON_PARAMETERS,
    _DECLARATIONS,
    InClear,
    InSum,
    Releases,
    Uploads,
)
from ._deployment._channel import outgoing
from ._deployment._protocol import (
    PartyData,
    checked_message,
    require_public_set,
    server_expectations,
)
from ._deployment._upload import PartyUpload, check_uploadable
from ._deployment._received import UploadChecker
from ._deployment._secure import secure_parties
from ._deployment._secure_stages import session_parties
from ._deployment._summed import received, sent_securely, summed_in_fit
from ._engine._context import (
    CheckContext,
    Message,
    Party,
    PartyContext,
    PartyStepResult,
    ServerContext,
)
from ._engine._plan import Plan
from ._engine._fitting import recording_tiers
from ._engine._transport import warnings_once_per_call
from ._engine._seeds import (
    derived_random_state,
    party_random_state,
    party_seed_of,
    root_seed,
)
from ._engine._validation import (
    FederatedData,
    refuse_an_untransformed_public_set,
    validate_federated_data,
    warn_about_assumptions,
)
from ._predict_side import PredictSide, _if_offered
from ._shared_docs import shared_docs

# the algorithm packages import the declarations and the docstring tool from here
__all__ = ["BaseFederatedClassifier", "InClear", "InSum", "Releases", "Uploads",
           "_if_offered", "shared_docs"]


class BaseFederatedClassifier(ConsortiumAgreements, PredictSide, ClassifierMixin,
                              MetaEstimatorMixin, BaseEstimator, metaclass=ABCMeta):
    """Base class of the federated meta-estimators: one interface for every algorithm.

    `fit`, `fit_party`, `server_round` (algorithms with rounds), `fit_server` and the
    predict side are written here once, as imbalanced-learn's ``fit_resample`` over
    ``_fit_resample``; `fit` composes exactly the steps a deployment runs. An algorithm
    declares its plan (``_plan_type``: what its parameters imply, the public set and
    what an upload holds included), whether its server runs rounds (``runs_rounds``),
    what crosses and how it is checked (``_uploads``, an `Uploads`: every field, in
    the clear or in the sum) and what it lets out (``_releases``, a `Releases`), and
    defines the hooks below: the abstract ones always, ``_server_round`` with rounds. A
    class that lacks one is refused, naming it: at its creation for the round hook, when
    it is instantiated for the others. The steps are functions of the frozen plan that
    read nothing else of the estimator; each takes the side's context object
    (`PartyContext`, `ServerContext`).

    What the parties send in the sum reaches the server steps as its total alone
    (``ServerContext.sums``), added in the clear or, under secure aggregation, by a
    secure sum: the algorithm's steps are the same either way, and so is the model.
    """

    runs_rounds: ClassVar[bool] = False

    _plan_type: ClassVar[type[Plan]]
    _uploads: ClassVar[Uploads[Any]]
    _releases: ClassVar[Releases]

    # requested by default so that metadata routing sends them to fit
    __metadata_request__fit = {"groups": True, "X_unlabeled": True}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.runs_rounds:
            return
        missing = []
        if cls._server_round is BaseFederatedClassifier._server_round:
            missing.append("_server_round")
        # a class without _uploads at all is refused when it is instantiated
        uploads = getattr(cls, "_uploads", None)
        if uploads is not None and uploads.message_check is None:
            missing.append("_uploads.message_check")
        if missing:
            raise TypeError(
                f"{cls.__name__} runs rounds (runs_rounds = True) but does not define "
                f"{' and '.join(missing)}: see BaseFederatedClassifier's hooks."
            )

    # the constructor parameters every algorithm takes (`_COMMON_PARAMETERS`)
    estimator: Any
    n_jobs: int | None
    random_state: Any
    verbose: int

    def __new__(cls, *args, **kwargs):
        missing = [name for name in _DECLARATIONS if not hasattr(cls, name)]
        if missing:
            raise TypeError(f"{cls.__name__} does not declare {', '.join(missing)}: see "
                            "BaseFederatedClassifier's declarations.")
        absent = [name for name in _COMMON_PARAMETERS
                  if name not in constructor_parameters(cls)]
        if absent:
            raise TypeError(f"{cls.__name__}.__init__ does not take {', '.join(absent)}: "
                            f"every algorithm's constructor takes {', '.join(_COMMON_PARAMETERS)} "
                            "(the base model first), which fit, the command line and the "
                            "Flower apps read.")
        return super().__new__(cls)

    # --- the hooks an algorithm defines ----------------------------------------------

    @abstractmethod
    def _base_estimators(self) -> list[Any]:
        """The (unfitted) estimators whose input requirements this estimator inherits:
        `fit` validates ``X``, ``y``, ``groups`` and ``X_unlabeled`` against what all
        of them accept."""

    @abstractmethod
    def _parties(self, context: PartyContext[Any],
                 random_state_of: Callable[[Any], np.random.RandomState]) -> Sequence[Party]:
        """The state of each party of ``context.data`` (every party in `fit`, one on
        its own machine), refusing sizes it cannot fit before any work.
        ``random_state_of(party)`` is the party's own RandomState: draw what the party
        needs from it here, at once (in `fit` one RandomState is reseeded per party)."""

    @abstractmethod
    def _party_step(self, context: PartyContext[Any], parties: Sequence[Any]) -> PartyStepResult:
        """What every party of `parties` uploads, their models in one flat parallel
        batch per tier: a `PartyStepResult`. Each upload holds every field the
        algorithm declares (``_uploads.fields``), its sums under the payload's
        ``"sums"``, with secure aggregation on or off."""

    def _server_round(self, context: ServerContext[Any],
                      uploads: Sequence[Message]) -> PartyUpload:
        """With rounds: the server's message of one round (a `PartyUpload`), from the
        parties' `uploads` (without their sums), the total of their sums
        (``context.sums``) and ``context.message``, the previous round's. Its manifest
        holds the algorithm's own fields: ``round`` (the round the parties fit next),
        ``done`` (whether training stopped) and any state the next round reads; the
        base adds the agreed fields, the sender and its rows."""
        raise NotImplementedError

    @abstractmethod
    def _server_step(self, context: ServerContext[Any],
                     uploads: Sequence[Message]) -> dict[str, Any]:
        """The fitted attributes, by name, from the parties' `uploads` (without their
        sums), the total of their sums (``context.sums``) and, in `fit`, every round's
        message (``context.rounds``; none on a deployed server)."""

    def _after_fit(self, context: ServerContext[Any], uploads: Sequence[Message],
                   data: FederatedData | None) -> None:
        """Warnings about the fitted model (`data`: the pooled rows in `fit`, None in
        `fit_server`); none by default."""

    # --- validation and fitted state ------------------------------------------------------

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # fit reports estimators that are not estimators; tags need not fail on them
        base_tags = [get_tags(estimator) for estimator in self._base_estimators()
                     if hasattr(estimator, "fit")]
        tags.input_tags.sparse = all(t.input_tags.sparse for t in base_tags)
        tags.input_tags.allow_nan = all(t.input_tags.allow_nan for t in base_tags)
        return tags

    # private attributes a fit sets, beyond the public ones that end in "_" (and
    # `_upload_bytes` and `_sums_bytes`, which every fit sets)
    _private_fitted: tuple[str, ...] = ()
    # what each party sent in `fit`, measured when `upload_bytes_` is first read, and
    # the bytes of the sums it sent
    _upload_bytes: np.ndarray | None
    _sums_bytes: np.ndarray

    def _clear_fitted_state(self):
        """Forget everything an earlier fit set, before a new one sets its own: a refit
        with other options leaves no attribute of the earlier one behind."""
        # only names this package owns: scikit-learn keeps private state of its own
        # (callback contexts, metadata requests, output configuration)
        for name in list(vars(self)):
            if (name.endswith("_") and not name.startswith("_")
                    or name in self._private_fitted
                    or name in ("_upload_bytes", "_sums_bytes")):
                delattr(self, name)

    @property
    def upload_bytes_(self):
        """Bytes each party sent, aligned with ``parties_`` (see the class's Attributes):
        after `fit`, its upload's payload as skops writes it, measured when first read,
        and the arrays of its sums; after `fit_server`, the size of each upload file."""
        check_is_fitted(self)
        if self._upload_bytes is None:
            self._upload_bytes = self._uploads.sent_bytes(self) + self._sums_bytes
        return self._upload_bytes

    # parameters that take the package's parameter objects, which check their own
    _parameter_objects: tuple[str, ...] = ()

    def _validate_params(self):
        super()._validate_params()
        for name in self._parameter_objects:
            value = getattr(self, name)
            if isinstance(value, BaseEstimator):
                value._validate_params()

    def _plan(self):
        """The frozen plan: every option resolved and checked before any work."""
        estimator = getattr(self, "estimator", None)
        # FedCT takes one estimator per party too
        for model in estimator if isinstance(estimator, (list, tuple)) else [estimator]:
            if hasattr(model, "fit") and is_regressor(model):
                raise ValueError(
                    f"The estimator {type(model).__name__} should be a classifier: "
                    f"{type(self).__name__} trains a classifier of the labels at every "
                    "party. Pass a classifier as estimator."
                )
        return self._plan_type.of(self)

    def _checked_plan(self):
        """The frozen plan, refused where it cannot run with secure aggregation on, or
        off, as it is (`Uploads.refuse_in_mode`): the model is what the parameters
        say, whoever sees the sums."""
        plan = self._plan()
        self._uploads.refuse_in_mode(type(self).__name__, plan,
                                     get_config()["secure_aggregation"])
        return plan

    def _set_fitted(self, fitted):
        """Set every fitted attribute that a step returned, by name."""
        for name, value in fitted.items():
            setattr(self, name, value)

    # --- the algorithm's steps composed in one process ---------------------------------

    @fit_context(prefer_skip_nested_validation=False)
    @shared_docs
    @warnings_once_per_call
    def fit(self, X, y, groups=None, X_unlabeled=None):
        """Run the algorithm: every party's step, in one flat parallel batch per tier,
        then the server's (round after round where the algorithm has rounds).

        The model is the one the deployed steps (`fit_party` on each party's machine,
        `fit_server` on their uploads) give for the same `random_state`.

        Parameters
        ----------
        $fit_data
        $public_set

        Returns
        -------
        self : object
            The fitted classifier.
        """
        plan = self._checked_plan()
        refuse_an_untransformed_public_set(self, X_unlabeled)
        self._clear_fitted_state()
        data = validate_federated_data(self, X, y, groups, X_unlabeled)
        if len(self.classes_) < 2:  # one party alone may hold one class, all of them not
            raise ValueError(
                f"y holds one class only ({self.classes_.tolist()[0]!r}): a classifier "
                "needs at least two classes among the parties' rows."
            )
        uses_public_set = plan.public_set_use is not None
        warn_about_assumptions(type(self).__name__, groups, X_unlabeled, uses_public_set,
                               data)
        # the rows of X where no public set was given; none where the steps use none
        X_public = data.X_public if uses_public_set or X_unlabeled is not None else None
        root = root_seed(self.random_state)
        secure = get_config()["secure_aggregation"]
        channel = self._uploads.channel(plan)
        sum_parties, bound = (secure_parties(channel, plan, data, secure == "validated")
                              if secure else (None, 0.0))
        party_context = PartyContext(
            plan, data, root, [dict(party=party, n_rows=len(rows))
                               for party, rows in zip(data.parties, data.party_rows)],
            secure=sum_parties)
        server_context = ServerContext(plan, X_public, root, self.classes_)
        parties = self._parties(party_context, lambda party: derived_random_state(
            root, "party", party, scratch=True))
        message, messages, sent = None, [], np.zeros(len(data.parties), dtype=np.int64)
        round_uploads: Sequence[Message] = ()
        with recording_tiers() as tier_fits:
            while True:
                step = self._party_step(self._answering(party_context, message), parties)
                sent_uploads = [outgoing(upload, channel, plan, secure)
                                for upload in step.uploads]
                # the server gets the sums' total alone, added in the clear or securely
                uploads, sums, round_sent = summed_in_fit(sent_uploads, channel, plan,
                                                          sum_parties, bound)
                sent += round_sent
                server_context = replace(server_context, sums=sums)
                if not self.runs_rounds or message is not None and message.manifest["done"]:
                    break
                message = self._round_message(server_context.with_message(message), uploads)
                messages.append(message)
                # what the server saw of each party: in the clear, its sums too
                round_uploads = uploads if secure else sent_uploads
            server_context = replace(server_context, message=message, rounds=tuple(messages),
                                     last_round_uploads=tuple(round_uploads))
            fitted = self._server_step(server_context, uploads)
        fitted.update(tier_fits_=tier_fits)
        # what each party sent in the clear is measured when asked for: skops takes far
        # longer than the fits of small models; under secure aggregation, its secure
        # sum's messages are all it sent
        self._set_fitted(dict(fitted, _upload_bytes=sent if secure else None,
                              _sums_bytes=sent))
        self._after_fit(server_context, uploads, data)
        return self

    # --- the deployed steps --------------------------------------------------------------

    @shared_docs
    @warnings_once_per_call
    def fit_party(self, X, y, *, party, classes, X_unlabeled=None, message=None,
                  share_model=None, party_seed=None, secure_session=None, identity=None):
        """The party step, on one party's machine; returns what the party sends.

        This estimator is not modified.

        Parameters
        ----------
        $party_data
        X_unlabeled : {array-like, sparse matrix, DataFrame}, default=None
            The agreed public set, of shape (n_public, n_features);
            required by every algorithm but a one-shot ensemble that does not distil.
        message : str, path-like, bytes or PartyUpload, default=None
            Algorithms with rounds (``runs_rounds``): the server's message of the
            previous round (`server_round`), checked like an upload; None for round 0.
        share_model : bool, default=None
            Algorithms with rounds: whether the final round's upload carries the
            party's own model (None: it does). The party keeps its model either way, in
            ``upload.local_model``.
        party_seed : int, default=None
            Seed of this party's own draws (partitions, clone seeds, noise, ties).
            ``None`` derives them from `random_state` and `party`, as `fit` does; with
            a privacy mechanism whose noise a party adds, a server that knows
            `random_state` could then recompute it: pass a secret seed there. Under
            secure aggregation, with such a mechanism, ``None`` draws the party's seed
            from the operating system instead (its step is then not repeatable).
        secure_session : SecureSession, default=None
            Under secure aggregation, the consortium's session (`secure_session`):
            the upload then withholds what secure aggregation keeps at the party, its
            sums go through the secure sum, and its ``secure_state`` answers the
            secure sum's stages (:doc:`/secure_aggregation`).
        identity : PartyIdentity, default=None
            With `secure_session`, required: this party's private identity key
            (`skfedkt.PartyIdentity.load`), whose public key the session names for the
            party; it signs the party's keys of the secure sum.

        Returns
        -------
        upload : skfedkt.PartyUpload
            Save it with ``upload.save(path)`` and send the file to the server.

        Examples
        --------
        Three parties and a server, and `fit` on their pooled rows, give one model:

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
        self._validate_params()
        plan = self._checked_plan()
        if not self.runs_rounds and (message is not None or share_model is not None):
            raise TypeError(
                f"{type(self).__name__} runs one round: message and share_model are for "
                "algorithms with rounds (runs_rounds); leave them out."
            )
        self._check_public_set(plan, X_unlabeled, "party step")
        data = PartyData(self, X, y, classes, X_unlabeled, party)
        context = PartyContext(plan, data, root_seed(self.random_state),
                               [data.manifest(self)], share_model=share_model is not False,
                               secure=session_parties(secure_session, data.party, len(data.y),
                                                      identity))
        secure = context.secure is not None
        # under secure aggregation the models stay at the party
        for estimator in (plan.uploaded_estimators(data.party)
                          if share_model is not False and not secure else ()):
            check_uploadable(estimator, plan.upload_kind, f"{self._name}'s party step")
        if message is not None:
            message = checked_message(message, data.expectations(self),
                                      check=self._message_check(context))
        seed = party_seed_of(party_seed, plan.party_noise, secure)
        parties = self._parties(context, lambda name: party_random_state(
            self.random_state, name, seed))
        (upload,) = self._party_step(self._answering(context, message), parties).uploads
        channel = self._uploads.channel(plan)
        upload = outgoing(upload, channel, plan, secure)
        if not secure:
            return upload
        return sent_securely(upload, channel, plan, secure_session, identity, data, message)

    def _message_check(self, context: CheckContext[Any]) -> Callable[[UploadChecker], Any]:
        """The check of a server's message: a class with rounds declares one (its
        creation refuses it otherwise)."""
        check = self._uploads.message_check
        assert check is not None, f"{type(self).__name__} runs rounds without a message check"
        return check(context)

    def _answering(self, context: PartyContext[Any],
                   message: Message | None) -> PartyContext[Any]:
        """The party context of a step: with rounds, each manifest says the round the
        upload answers (`PartyContext.answering`), so that no algorithm writes it."""
        return context.answering(message) if self.runs_rounds else context.with_message(
            message)

    @available_if(lambda self: self.runs_rounds)
    @shared_docs
    @warnings_once_per_call
    def server_round(self, uploads, X_unlabeled, *, message=None, classes=None,
                     trusted=(), min_parties=None, limits=None, secure_sum=None):
        """The server's step of one round, for algorithms with rounds.

        Parameters
        ----------
        $uploads
        X_unlabeled : {array-like, sparse matrix, DataFrame} of shape (n_public, n_features)
            The agreed public set.
        message : PartyUpload, str or path-like, default=None
            The server's own message of the previous round (its state); None after
            round 0.
        $upload_checks

        Returns
        -------
        message : skfedkt.PartyUpload
            What to send every party (``message.save(path)``): the round to fit next,
            what the parties need for it, and ``manifest["done"]`` once training
            stopped, when the parties run their final step for `fit_server`.
        """
        self._validate_params()
        plan = self._checked_plan()
        self._check_public_set(plan, X_unlabeled, "server round")
        # a clone: the round leaves this estimator unfitted
        expected, X_public = server_expectations(clone(self), X_unlabeled, classes)
        context = ServerContext(plan, X_public, root_seed(self.random_state), deployed=True)
        if message is not None:
            message = checked_message(message, expected, limits,
                                      check=self._message_check(context))
            expected["classes"] = message.manifest["classes"]
        uploads, _, sums = received(
            uploads, dict(expected, round=0 if message is None else message.manifest["round"]),
            self._uploads.channel(plan), plan, self._uploads.check(context, False),
            secure_sum, trusted=trusted, min_parties=min_parties, limits=limits)
        # what the server did not know, it took from the accepted uploads: the message
        # says it to every party
        agreed = {key: uploads[0].manifest[key]
                  for key in ("classes", "n_features", "feature_names")}
        return self._round_message(
            replace(context, classes=agreed["classes"], message=message, sums=sums,
                    manifest=dict(expected, **agreed)), uploads)

    def _round_message(self, context: ServerContext[Any],
                       uploads: Sequence[Message]) -> PartyUpload:
        """`_server_round`'s message with what every server message says: the agreed
        fields of ``context.manifest`` (a deployment's format, classes and features),
        sent by the party "server", of no rows. The algorithm's own fields (the round,
        ``done``, its state) stand as it wrote them."""
        message = self._server_round(context, uploads)
        manifest = dict(context.manifest or {}, **message.manifest, party="server", n_rows=0)
        return replace(message, manifest=manifest)

    @shared_docs
    @warnings_once_per_call
    def fit_server(self, uploads, X_unlabeled=None, *, message=None, classes=None,
                   trusted=(), min_parties=None, limits=None, secure_sum=None):
        """The server step: check every upload before loading it, then fit the model.

        Checks each upload's manifest (format, algorithm parameters, classes, features,
        public-set fingerprint), the types its payload holds and the algorithm's own
        fields, then runs the server step. With the uploads of `fit_party` and the same
        `random_state`, the fitted estimator equals the one `fit` gives on the parties'
        pooled rows.

        Parameters
        ----------
        $uploads
        X_unlabeled : {array-like, sparse matrix, DataFrame}, default=None
            The agreed public set, of shape (n_public, n_features);
            required by every algorithm but a one-shot ensemble that does not distil.
        message : PartyUpload, str or path-like, default=None
            Algorithms with rounds: the server's last message, the one that said done.
        $upload_checks

        Returns
        -------
        self : object
            The fitted classifier.
        """
        self._validate_params()
        self._clear_fitted_state()
        plan = self._checked_plan()
        self._check_public_set(plan, X_unlabeled, "server step")
        expected, X_public = server_expectations(self, X_unlabeled, classes)
        context = ServerContext(plan, X_public, root_seed(self.random_state), deployed=True)
        if self.runs_rounds:
            message = self._final_message(context, message, expected, limits)
            expected.update(classes=message.manifest["classes"],
                            round=message.manifest["round"])
        elif message is not None:
            raise TypeError(f"{type(self).__name__} runs one round: leave message out.")
        uploads, left_out, sums = received(
            uploads, expected, self._uploads.channel(plan), plan,
            self._uploads.check(context, True), secure_sum, trusted=trusted,
            min_parties=min_parties, limits=limits)
        manifest = uploads[0].manifest
        classes = np.array(manifest["classes"])
        if X_public is None:  # the features the parties agreed on
            self.n_features_in_ = manifest["n_features"]
            if manifest["feature_names"] is not None:
                self.feature_names_in_ = np.array(manifest["feature_names"], dtype=object)
        context = replace(context, classes=classes, message=message, sums=sums)
        with recording_tiers() as tier_fits:
            fitted = self._server_step(context, uploads)
        self._set_fitted(dict(
            fitted, classes_=classes, left_out_parties_=left_out, tier_fits_=tier_fits,
            parties_=np.array([upload.party for upload in uploads]),
            _upload_bytes=np.array([upload.n_bytes for upload in uploads]),
        ))
        self._after_fit(context, uploads, None)
        return self

    def _final_message(self, context, message, expected, limits):
        """The server's last message, read and checked: it must say done."""
        if message is None:
            raise TypeError(
                f"{type(self).__name__} runs rounds: pass the server's last message "
                "(the one that said done) as message=."
            )
        message = checked_message(message, expected, limits,
                                  check=self._message_check(context))
        if not message.manifest["done"]:
            raise ValueError(
                f"The server's message of round {message.manifest['round']} does not say "
                "done: run the rounds until server_round says done, then pass its message."
            )
        return message

    def _check_public_set(self, plan, X_unlabeled, step):
        """Refuse a missing public set, before any work, where `step` needs it."""
        if plan.public_set_use is not None:
            require_public_set(X_unlabeled, f"{self._name}'s {step}", plan.public_set_use)

    @property
    def _name(self):
        """The algorithm's name in messages: FedKT, FedCT, OneShotEnsemble."""
        return type(self).__name__.removesuffix("Classifier")

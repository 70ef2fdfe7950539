"""ConsensusDistillClassifier: DS-FL's rounds of shared public-set probabilities."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar, TypedDict, cast

import numpy as np

from skfedkt.algorithm import (
    BaseFederatedClassifier,
    CheckContext,
    ClassCodeModel,
    HasMethods,
    Interval,
    Message,
    PartyContext,
    PartyStepResult,
    PartyUpload,
    Plan,
    Releases,
    ServerContext,
    UploadChecker,
    Uploads,
    derived_random_state,
    draw_seeds,
    final_model_release,
    num_samples,
    sample_weight_param,
    seeded_clone,
    soft_label_rows,
    take_rows,
)


class ConsensusUpload(TypedDict, total=False):
    """A party's upload: its class probabilities on the public set, in every round;
    nothing in the final step."""

    #: shape (n_public, n_classes)
    proba: np.ndarray


class ConsensusMessage(TypedDict):
    """The server's message: the consensus the next round learns."""

    #: the sharpened mean probabilities, shape (n_public, n_classes)
    consensus: np.ndarray


def _upload_payload(upload: Message) -> ConsensusUpload:
    return cast(ConsensusUpload, upload.payload)


def _message_payload(message: Message) -> ConsensusMessage:
    return cast(ConsensusMessage, message.payload)


@dataclass(frozen=True)
class ConsensusParty:
    """One party: its name, its rows and one seed per round, drawn at once."""

    party: Any
    rows: np.ndarray
    seeds: np.ndarray

    def upload(self, manifest: dict[str, Any], proba: np.ndarray | None) -> PartyUpload:
        """Its probabilities on the public set; nothing in the final step (None)."""
        payload = ConsensusUpload() if proba is None else ConsensusUpload(proba=proba)
        return PartyUpload(manifest=dict(manifest), payload=dict(payload))


def _consensus_rows(estimator: Any,
                    consensus: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The public rows, labels and weights `estimator` learns the consensus from: soft
    labels (each row once per class, weighted by its probability) where it takes sample
    weights, else each row's most probable class."""
    if sample_weight_param(estimator) is None:
        return np.arange(len(consensus)), consensus.argmax(axis=1), np.ones(len(consensus))
    return soft_label_rows(consensus)


@dataclass(frozen=True)
class ConsensusPlan(Plan):
    estimator: Any = None
    n_rounds: int = 2
    temperature: float = 0.5

    estimator_name: ClassVar[str] = "ConsensusDistillClassifier"
    upload_kind: ClassVar[str] = "public-set probabilities"

    @classmethod
    def of(cls, estimator: ConsensusDistillClassifier) -> ConsensusPlan:
        return cls(n_jobs=estimator.n_jobs, verbose=estimator.verbose,
                   estimator=estimator.estimator, n_rounds=estimator.n_rounds,
                   temperature=estimator.temperature)


def _upload_check(context: CheckContext[ConsensusPlan],
                  final: bool) -> Callable[[UploadChecker], Any]:
    n_public = num_samples(context.X_public)

    def check(checker: UploadChecker) -> None:
        checker.count("n_rows", positive=True)
        if final:
            if checker.upload.payload:
                checker.refuse("payload", "a final upload after the last round holds "
                               "nothing")
            return
        checker.floats("proba", (n_public, checker.n_classes), bound=1.0)

    return check


def _message_check(context: CheckContext[ConsensusPlan]) -> Callable[[UploadChecker], Any]:
    n_public = num_samples(context.X_public)

    def check(checker: UploadChecker) -> None:
        checker.count("round", positive=True, at_most=context.plan.n_rounds)
        if not isinstance(checker.manifest("done"), bool):
            checker.refuse("done", "not true or false")
        checker.floats("consensus", (n_public, checker.n_classes), bound=1.0)

    return check


def _sent_bytes(clf: ConsensusDistillClassifier) -> np.ndarray:
    return np.full(len(clf.parties_), clf.n_rounds_ * clf._consensus.nbytes)


class ConsensusDistillClassifier(BaseFederatedClassifier):
    """Each round every party fits its model on its rows plus the public rows labelled
    by the last consensus, and shares its class probabilities on the public set; the
    server averages them and sharpens them with a temperature into the next consensus;
    after `n_rounds` rounds a final model learns the consensus labels of the public
    set."""

    runs_rounds = True
    _plan_type = ConsensusPlan
    _uploads = Uploads(check=_upload_check, sent_bytes=_sent_bytes,
                       message_check=_message_check)
    _releases = Releases(of_fit=lambda clf: [final_model_release(clf)],
                         # probabilities on the public rows: no model of a party's rows
                         of_upload=lambda clf, upload, n_classes: [])
    _private_fitted = ("_consensus", "_final_model")
    _parameter_constraints = {
        "estimator": [HasMethods(["fit", "predict_proba"])],
        "n_rounds": [Interval(Integral, 1, None, closed="left")],
        "temperature": [Interval(Real, 0, None, closed="neither")],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(self, estimator, *, n_rounds=2, temperature=0.5, n_jobs=None,
                 random_state=None, verbose=0):
        self.estimator = estimator
        self.n_rounds = n_rounds
        self.temperature = temperature
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _base_estimators(self) -> list[Any]:
        return [self.estimator]

    def _parties(self, context: PartyContext[ConsensusPlan],
                 random_state_of: Callable[[Any], np.random.RandomState],
                 ) -> list[ConsensusParty]:
        # a party's draws are made here, at once: one seed per round
        return [ConsensusParty(party, rows, draw_seeds(random_state_of(party),
                                                       context.plan.n_rounds + 1))
                for party, rows in zip(context.data.parties, context.data.party_rows)]

    def _party_step(self, context: PartyContext[ConsensusPlan],
                    parties: Sequence[ConsensusParty]) -> PartyStepResult:
        data, plan, message = context.data, context.plan, context.message
        n_classes = len(data.classes)
        if message is not None and message.manifest["done"]:  # the final step: nothing
            return PartyStepResult([party.upload(manifest, None)
                                    for party, manifest in zip(parties, context.manifests)])
        round_ = 0 if message is None else int(message.manifest["round"])
        uploads = []
        for party, manifest in zip(parties, context.manifests):
            rows = party.rows
            X, y, weights = data.X[rows], data.y[rows], np.ones(len(rows))
            if message is not None:  # its rows plus the public set's consensus
                public, labels, shares = _consensus_rows(
                    plan.estimator, _message_payload(message)["consensus"])
                X = np.vstack([X, take_rows(context.X_public, public)])
                y, weights = np.concatenate([y, labels]), np.concatenate([weights, shares])
            model = ClassCodeModel.fit(seeded_clone(plan.estimator, party.seeds[round_]), X,
                                       y, n_classes, weights)
            uploads.append(party.upload(manifest,
                                        model.predict_proba(context.X_public, n_classes)))
        return PartyStepResult(uploads)

    def _server_round(self, context: ServerContext[ConsensusPlan],
                      uploads: Sequence[Message]) -> PartyUpload:
        # DS-FL's entropy reduction: the mean probabilities sharpened by a temperature
        mean = np.mean([_upload_payload(upload)["proba"] for upload in uploads], axis=0)
        sharpened = mean ** (1 / context.plan.temperature)
        consensus = sharpened / sharpened.sum(axis=1, keepdims=True)
        fitted = 0 if context.message is None else int(context.message.manifest["round"])
        return PartyUpload(manifest=dict(round=fitted + 1,
                                         done=fitted + 1 == context.plan.n_rounds),
                           payload=dict(ConsensusMessage(consensus=consensus)))

    def _server_step(self, context: ServerContext[ConsensusPlan], uploads: Sequence[Message],
                     reused: Any) -> dict[str, Any]:
        assert context.message is not None  # an algorithm with rounds ends on a message
        consensus = _message_payload(context.message)["consensus"]
        seed = draw_seeds(derived_random_state(context.root, "final model"), 1)[0]
        public, labels, shares = _consensus_rows(context.plan.estimator, consensus)
        final_model = ClassCodeModel.fit(
            seeded_clone(context.plan.estimator, seed), take_rows(context.X_public, public), labels,
            len(context.known_classes), shares)
        return {"_final_model": final_model, "_consensus": consensus,
                "n_rounds_": int(context.message.manifest["round"])}

    def _proba(self, X: Any) -> np.ndarray:
        return self._final_model.predict_proba(X, len(self.classes_))

    def _predict_codes(self, X: Any) -> np.ndarray:
        return self._proba(X).argmax(axis=1)

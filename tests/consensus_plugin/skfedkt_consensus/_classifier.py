"""ConsensusDistillClassifier: DS-FL's rounds of shared public-set probabilities."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np

from skfedkt.algorithm import (
    BaseFederatedClassifier,
    CheckContext,
    HasMethods,
    InSum,
    Interval,
    Message,
    PartyContext,
    PartyStepResult,
    PartyUpload,
    Releases,
    ServerContext,
    UploadChecker,
    Uploads,
    final_model_release,
    num_samples,
    rows_summing_to,
)

from ._party import ConsensusParty, parties, party_step
from ._plan import ConsensusPlan
from ._server import server_round, server_step


def _upload_check(context: CheckContext[ConsensusPlan],
                  final: bool) -> Callable[[UploadChecker], Any]:
    # its probabilities are a sum, which the base checks against FIELDS
    def check(checker: UploadChecker) -> None:
        checker.count("n_rows", positive=True)
        if final and checker.upload.payload:
            checker.refuse("payload", "a final upload after the last round holds nothing")

    return check


FIELDS = (InSum("proba", "its class probabilities on the public rows", "float",
                lambda plan, max_rows: 1.0, valid=rows_summing_to(lambda plan: 1.0)),)


def _message_check(context: CheckContext[ConsensusPlan]) -> Callable[[UploadChecker], Any]:
    n_public = num_samples(context.X_public)

    def check(checker: UploadChecker) -> None:
        checker.count("round", positive=True, at_most=context.plan.n_rounds)
        if not isinstance(checker.manifest("done"), bool):
            checker.refuse("done", "not true or false")
        checker.probabilities("consensus", n_public)

    return check


def _sent_bytes(clf: ConsensusDistillClassifier) -> np.ndarray:
    # nothing in the clear: the base counts the sums
    return np.zeros(len(clf.parties_))


class ConsensusDistillClassifier(BaseFederatedClassifier):
    """Each round every party fits its model on its rows plus the public rows labelled
    by the last consensus, and shares its class probabilities on the public set; the
    server averages them and sharpens them with a temperature into the next consensus;
    after `n_rounds` rounds a final model learns the consensus labels of the public
    set."""

    runs_rounds = True
    _plan_type = ConsensusPlan
    _uploads = Uploads(check=_upload_check, sent_bytes=_sent_bytes,
                       message_check=_message_check, fields=FIELDS)
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
        return parties(context, random_state_of)

    def _party_step(self, context: PartyContext[ConsensusPlan],
                    parties: Sequence[ConsensusParty]) -> PartyStepResult:
        return party_step(context, parties)

    def _server_round(self, context: ServerContext[ConsensusPlan],
                      uploads: Sequence[Message]) -> PartyUpload:
        return server_round(context, uploads)

    def _server_step(self, context: ServerContext[ConsensusPlan],
                     uploads: Sequence[Message]) -> dict[str, Any]:
        return server_step(context)

    def _proba(self, X: Any) -> np.ndarray:
        return self._final_model.predict_proba(X, len(self.classes_))

    def _predict_codes(self, X: Any) -> np.ndarray:
        return self._proba(X).argmax(axis=1)

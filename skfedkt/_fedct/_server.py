"""FedCT's server step: what runs on the server in every round, and at the end.

Functions of a frozen `FedCTPlan`: `FedCTServer` runs a round on the total of the
parties' sums, `finished` gives the fitted attributes from the parties' final uploads
(the parties' vote, or a model fitted on the public rows with the last consensus),
`privacy_report` accounts for the bit flips.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._deployment._party_models import (
    check_model_upload,
    check_round_state,
    final_models,
    mean_accuracy,
)
from .._deployment._received import UploadChecker
from .._deployment._upload import PartyUpload
from .._engine._class_codes import ClassCodeModel
from .._engine._context import Message
from .._engine._fitting import Task, TierJob, fit_clones
from .._engine._seeds import derived_random_state, draw_seeds
from .._engine._voting import plurality_vote
from .._privacy._accounting import ONE_VOTE_L2
from .._privacy._bit_flips import bit_flip_epsilon, bit_flip_probability
from .._privacy._gaussian import gaussian_epsilon, unanimous_flip_probability
from .._privacy._reports import BitFlipPrivacyReport, guarantee_strength, TeacherVotesPrivacyReport
from ._party import instructions
from ._payloads import FedCTMessage, fedct_message, fedct_upload
from ._plan import FedCTPlan
from ._sums import check_sums


class FedCTServer:
    """The server's step of a FedCT round: the consensus of the parties' labels, and
    whether to go on.

    Its state between rounds travels in its message to the parties (round, consensus,
    history, stalled rounds, the seed of its tie breaks), so each round can run as a
    separate command.
    """

    def __init__(self, plan: FedCTPlan, n_public: int, n_classes: int, root: int) -> None:
        self.plan, self.n_public, self.n_classes, self.root = plan, n_public, n_classes, root
        self.bytes_sent = label_bytes(n_public, n_classes)

    def round(self, uploads: Sequence[Message], message: Message | None,
              sums: dict[str, np.ndarray]) -> PartyUpload:
        """The message after the parties' uploads of the round `message` asked for,
        from the total of their `sums` alone."""
        plan = self.plan
        consensus, fitted = instructions(message, self.n_public)
        state: dict[str, Any] = (
            dict(server_seed=self.root, history=[], stalled=0) if message is None else
            {key: message.manifest[key] for key in ("server_seed", "history", "stalled")})
        history = [dict(entry) for entry in state["history"]]
        check_sums(sums, len(uploads))
        accuracy = mean_accuracy(sums, len(uploads))
        if fitted >= 1:  # the accuracy of the models refit on the previous consensus
            history[fitted - 1]["train_accuracy"] = accuracy

        def reply(next_consensus: np.ndarray, next_round: int, last: np.ndarray,
                  done: bool, stalled: int) -> PartyUpload:
            return PartyUpload(
                manifest=dict(round=int(next_round), done=bool(done), stalled=int(stalled),
                              history=history, server_seed=int(state["server_seed"])),
                payload=dict(FedCTMessage(
                    consensus=np.asarray(next_consensus, dtype=np.int64),
                    last_consensus=np.asarray(last, dtype=np.int64))),
            )

        if fitted == plan.n_rounds:  # n_rounds=0: local models only
            return reply(consensus, fitted, consensus, True, state["stalled"])
        # the tie keys are drawn once per fit, so a tied example keeps its label
        tie_keys = derived_random_state(state["server_seed"], "server").random_sample(
            (self.n_public, self.n_classes)
        )
        votes = sums["label_counts" if plan.teacher_votes is None else "vote_counts"]
        new_consensus = (plurality_vote(votes, tie_keys) if plan.teacher_votes is None
                         else self.confident_consensus(votes, len(uploads), tie_keys))
        changed = float(np.mean(new_consensus != consensus))
        stalled = state["stalled"] + 1 if changed <= plan.tol else 0
        history.append(dict(round=fitted + 1, consensus_changed=changed, train_accuracy=None,
                            bytes_sent=self.bytes_sent))
        plan.say(f"round {fitted + 1}: {changed:.1%} of the consensus labels changed")
        if stalled >= plan.n_iter_no_change:
            # the models just fit already learned this consensus: they are final
            history[-1]["train_accuracy"] = accuracy
            return reply(consensus, fitted, new_consensus, True, stalled)
        done = fitted + 1 == plan.n_rounds
        return reply(new_consensus, fitted + 1, new_consensus, done, stalled)

    def confident_consensus(self, summed: np.ndarray, n_parties: int,
                            tie_keys: np.ndarray) -> np.ndarray:
        """The consensus of the `n_parties` parties' noisy teacher vote counts on the
        queries, `summed`: the top class of the sum where it leads the runner-up by
        `threshold` standard deviations of the summed noise (the difference of two sums
        of `n_parties` noisy counts), -1 elsewhere. Post-processing of what the parties
        released: it costs no privacy."""
        votes = self.plan.known_teacher_votes
        queries = self.plan.queries(self.n_public, self.root)
        # one class has no runner-up: its noisy count must clear the threshold itself
        runner_up = np.sort(summed, axis=1)[:, -2] if self.n_classes > 1 else 0.0
        noise = self.plan.vote_sigma(len(queries)) * np.sqrt(2 * n_parties)
        confident = summed.max(axis=1) - runner_up > votes.threshold * noise
        consensus = np.full(self.n_public, -1)
        consensus[queries[confident]] = plurality_vote(summed, tie_keys[queries])[confident]
        return consensus


def label_bytes(n_public: int, n_classes: int) -> int:
    """The bytes of a party's labels in one round: one bit per public row and class."""
    return int(np.ceil(n_public * n_classes / 8))


def finished(plan: FedCTPlan, uploads: Sequence[Message], message: Message,
             classes: np.ndarray, sums: dict[str, np.ndarray], X_public: Any,
             root: int) -> dict[str, Any]:
    """The fitted attributes of `FedCTClassifier`, from the parties' final `uploads`
    (each with its model, where the party sent it), the total of their `sums` and the
    server's last `message`: the parties' vote, or with ``distill=True`` a model fitted
    on the public rows with the last consensus (`distilled`)."""
    check_sums(sums, len(uploads))
    accuracy = mean_accuracy(sums, len(uploads))
    payloads = [fedct_upload(upload) for upload in uploads]
    # aligned with the parties: None where a party kept its model
    local = final_models(uploads, [payload.get("model") for payload in payloads],
                         [payload.get("codes") for payload in payloads], plan.distill)
    last = np.asarray(fedct_message(message)["last_consensus"])
    final = (distilled(plan, X_public, last, len(classes), root) if plan.distill
             else None)
    history = [dict(entry) for entry in message.manifest["history"]]
    if history and history[-1]["train_accuracy"] is None:
        # the training accuracy of the final models
        history[-1]["train_accuracy"] = accuracy
    privacy = privacy_report(plan, len(last), len(history), len(classes))
    return dict(
        _models=local,
        _final_model=final,
        estimators_=[model.estimator for model in local if model is not None],
        **({} if final is None else dict(final_estimator_=final.estimator)),
        history_=history,
        n_rounds_=len(history),
        consensus_mask_=last >= 0,
        consensus_labels_=classes[last[last >= 0]],
        privacy_report_=privacy,
        epsilon_=np.inf if privacy is None else privacy.epsilon,
    )


def distilled(plan: FedCTPlan, X_public: Any, last: np.ndarray, n_classes: int,
              root: int) -> ClassCodeModel:
    """The final model of ``distill=True``: a seeded clone of the plan's final
    estimator, fitted on the public rows with a consensus code in `last` (-1: none)."""
    labelled = np.flatnonzero(last >= 0)
    if not labelled.size:
        raise ValueError(
            "No public row has a consensus label after the last round, and with "
            "distill=True the final model learns that consensus alone: use more public "
            "rows or, with privacy, a larger epsilon (less noise).")
    (model,) = fit_clones(
        [Task(plan.final, last[labelled], labelled, name="the final model")],
        TierJob(X_public, n_classes), draw_seeds(derived_random_state(root, "final"), 1),
        tier="final model", **plan.clone_fitting,
    ).models
    return model


def check_party_upload(checker: UploadChecker, plan: FedCTPlan, *, final: bool) -> None:
    """A FedCT party's upload in the clear: its rows, its round and, in the final round,
    its model (where secure aggregation does not keep it at the party). What it shares
    and its training accuracy are in its sums, which the base checks."""
    check_model_upload(checker, plan.n_rounds, fedct_upload(checker.upload).get("model"),
                       final=final)


def check_server_message(checker: UploadChecker, n_public: int, n_rounds: int) -> None:
    """The server's message, as a party reads it: the consensus codes of every public
    row (-1 for none), the round to fit and the server's state."""
    checker.labels("consensus", n_public, low=-1)
    checker.labels("last_consensus", n_public, low=-1)
    check_round_state(checker, n_rounds)
    checker.count("server_seed")


def privacy_report(plan: FedCTPlan, n_public: int, n_rounds: int,
                   n_classes: int) -> BitFlipPrivacyReport | TeacherVotesPrivacyReport | None:
    """The guarantee of what every party shared over `n_rounds` rounds, or None
    without privacy."""
    if plan.teacher_votes is not None:
        return teacher_votes_report(plan, n_public, n_rounds, n_classes)
    flips = plan.privacy
    if flips is None:
        return None
    sensitivity = plan.sensitivity(n_public)
    flip_probability = bit_flip_probability(flips.epsilon, sensitivity)
    pure = n_rounds * flips.epsilon
    rdp = bit_flip_epsilon(n_rounds, epsilon=flips.epsilon, sensitivity=sensitivity,
                           delta=flips.delta)
    epsilon = min(pure, rdp)
    guarantee = f"({epsilon:.4g}, 0)" if pure <= rdp else f"({epsilon:.4g}, {flips.delta:g})"
    statement = (
        f"Every party's shared labels are {guarantee}-differentially private for its "
        f"training examples over {n_rounds} round(s), "
        f"{guarantee_strength(epsilon)}: each round flips every "
        f"bit of its one-hot label matrix with probability {flip_probability:.4g}, "
        f"which is {flips.epsilon:g}-DP per round for a sensitivity of {sensitivity:g} "
        "bits " + ("(the default worst case 2 * len(X_unlabeled))"
                   if flips.sensitivity is None else "(as given)")
        + f". Pure composition gives {pure:.4g}; composing the per-bit randomized "
        f"responses (RDP, delta {flips.delta:g}) gives {rdp:.4g}."
    )
    return BitFlipPrivacyReport(
        epsilon_per_round=flips.epsilon, sensitivity=sensitivity,
        flip_probability=flip_probability, n_rounds=n_rounds, delta=flips.delta,
        pure_epsilon=pure, rdp_epsilon=rdp, epsilon=epsilon, statement=statement,
    )


def teacher_votes_report(plan: FedCTPlan, n_public: int, n_rounds: int,
                         n_classes: int) -> TeacherVotesPrivacyReport:
    """The guarantee of `TeacherVotes`: every party's noisy teacher vote counts on the
    queries, over `n_rounds` rounds, composed exactly (Gaussian DP)."""
    votes = plan.known_teacher_votes
    n_queries = min(votes.n_queries, n_public)
    sigma = plan.vote_sigma(n_queries)
    n_releases = n_queries * n_rounds
    epsilon = gaussian_epsilon(n_releases, sigma=sigma, delta=votes.delta,
                               sensitivity=ONE_VOTE_L2)
    flip = unanimous_flip_probability(votes.n_teachers, n_classes, sigma)
    statement = (
        f"Every party's shared vote counts are ({epsilon:.4g}, {votes.delta:g})-"
        f"differentially private for its training examples over {n_rounds} round(s), "
        f"{guarantee_strength(epsilon)}: each round, up to {votes.n_teachers} teachers "
        f"on disjoint parts of the party's rows vote on {n_queries} public rows, and "
        f"Gaussian noise of standard deviation {sigma:.4g} is added to every count. One "
        f"example is in one teacher, so it moves one vote per row (L2 sensitivity "
        f"sqrt(2)); the {n_releases} noisy histograms compose exactly (Gaussian DP). "
        f"The noise turns a row on which {votes.n_teachers} teachers agree to another "
        f"class with probability {flip:.3g}."
    )
    return TeacherVotesPrivacyReport(
        sigma=sigma, n_queries=n_queries, n_rounds=n_rounds, n_releases=n_releases,
        flip_probability=flip, delta=votes.delta, epsilon=epsilon, statement=statement,
    )

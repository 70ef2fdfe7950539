"""FedCT's server step: what runs on the server in every round, and at the end."""


import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import _num_samples

from .._deployment._protocol import (
    checked_message,
    collect_uploads,
    require_public_set,
    server_expectations,
)
from .._deployment._upload import PartyUpload, UploadError
from .._engine._seeds import derived_random_state, root_seed
from .._engine._voting import count_votes, plurality_vote
from ..privacy._accounting import (
    BitFlipPrivacyReport,
    bit_flip_epsilon,
    bit_flip_probability,
    guarantee_strength,
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


def _check_party_upload(checker, n_public, *, final):
    """A FedCT party's upload: its rows, its labels of every public row among the
    agreed classes, its training accuracy and, in the final round, its model."""
    checker.count("n_rows", positive=True)
    checker.labels("labels", n_public, low=-1)  # -1: a bit-flipped abstention
    checker.number("training_accuracy", 0.0, 1.0)
    if checker.optional_model() is None and final:
        return  # fit_server names every party that kept its model
    if not final and checker.upload.payload.get("model") is not None:
        checker.refuse("model", "a model before the server's message said done")


def check_server_message(checker, n_public, n_rounds):
    """The server's message, as a party reads it: the consensus codes of every public
    row (-1 for none), the round to fit and the server's state."""
    checker.labels("consensus", n_public, low=-1)
    checker.labels("last_consensus", n_public, low=-1)
    checker.count("round", at_most=n_rounds)
    checker.count("stalled")
    checker.count("server_seed")
    if not isinstance(checker.manifest("done"), bool):
        checker.refuse("done", "not true or false")
    history = checker.manifest("history")
    if not isinstance(history, list) or len(history) > n_rounds or not all(
        isinstance(entry, dict) for entry in history
    ):
        checker.refuse("history", f"not a list of at most {n_rounds} rounds")


class _FedCTServerStep:
    """FedCTClassifier's server side, run by `server_round` and `fit_server` on
    the parties' uploads and by `fit` in one process."""

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
        classes : array-like, default=None
            The agreed classes; ``None`` takes those of most uploads, and refuses the
            others.
        trusted : sequence of str, default=()
            Type names to load beyond scikit-learn's and XGBoost's.
        limits : skfedkt.UploadLimits, default=None
            Bounds on every file read (size, inflated size, manifest, payload objects);
            None means ``UploadLimits()``.
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
        n_public = _num_samples(X_unlabeled)
        if message is not None:
            message = checked_message(message, expected, limits, check=lambda checker:
                                      check_server_message(checker, n_public, self.n_rounds))
            expected["classes"] = message.manifest["classes"]
        uploads, _ = collect_uploads(
            uploads, dict(expected, round=0 if message is None else message.manifest["round"]),
            trusted=trusted, min_parties=min_parties, limits=limits,
            check=lambda checker: _check_party_upload(checker, n_public, final=False),
        )
        classes = uploads[0].manifest["classes"]
        server = _FedCTServer(self, _num_samples(X_unlabeled), len(classes),
                              root_seed(self.random_state))
        return server.round(uploads, message, manifest=dict(expected, classes=classes))

    def fit_server(self, uploads, X_unlabeled, *, message, classes=None, trusted=(),
                   min_parties=None, limits=None):
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
        classes, trusted, min_parties, limits
            As in `server_round`.

        Returns
        -------
        self : object
            The fitted classifier.
        """
        self._validate_params()
        self._clear_fitted_state()
        require_public_set(X_unlabeled, "FedCT's server step")
        expected, _ = server_expectations(self, X_unlabeled, classes)
        message = checked_message(
            message, expected, limits, check=lambda checker: check_server_message(
                checker, _num_samples(X_unlabeled), self.n_rounds))
        if not message.manifest["done"]:
            raise ValueError(
                f"The server's message of round {message.manifest['round']} does not say "
                "done: run the rounds until server_round says done, then pass its message."
            )
        uploads, self.left_out_parties_ = collect_uploads(
            uploads, dict(expected, classes=message.manifest["classes"],
                          round=message.manifest["round"]),
            trusted=trusted, min_parties=min_parties, limits=limits,
            check=lambda checker: _check_party_upload(
                checker, _num_samples(X_unlabeled), final=True),
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
        self._finish(uploads, message, [upload.model() for upload in uploads])
        self.upload_bytes_ = np.array([upload.n_bytes for upload in uploads])
        return self

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

    def _privacy_report(self, n_public):
        flips = self.privacy
        if flips is None:
            return None
        sensitivity = self._sensitivity(n_public)
        flip_probability = bit_flip_probability(flips.epsilon, sensitivity)
        pure = self.n_rounds_ * flips.epsilon
        rdp = bit_flip_epsilon(self.n_rounds_, epsilon=flips.epsilon, sensitivity=sensitivity,
                               delta=flips.delta)
        epsilon = min(pure, rdp)
        guarantee = f"({epsilon:.4g}, 0)" if pure <= rdp else f"({epsilon:.4g}, {flips.delta:g})"
        statement = (
            f"Every party's shared labels are {guarantee}-differentially private for its "
            f"training examples over {self.n_rounds_} round(s), "
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
            flip_probability=flip_probability, n_rounds=self.n_rounds_, delta=flips.delta,
            pure_epsilon=pure, rdp_epsilon=rdp, epsilon=epsilon, statement=statement,
        )

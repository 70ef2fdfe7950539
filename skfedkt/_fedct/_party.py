"""FedCT's party step: what runs on a party's machine in every round."""

import warnings

import numpy as np
from sklearn.utils.validation import _num_samples

from .._deployment._protocol import PartyData, checked_message, require_public_set
from .._deployment._upload import PartyUpload
from .._engine._base import stack_rows
from .._engine._fitting import GlobalLabelClassifier, Task, code_dtype, fit_clones
from .._engine._seeds import derived_random_state, draw_seeds, party_random_state
from ..privacy._accounting import bit_flip_probability
from ._server import _FedCTServer, check_server_message


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
        labels = self.config._share_labels(
            predictions, n_classes, self.config._sensitivity(len(predictions)), self._round_rng
        )
        return PartyUpload(
            manifest=dict(manifest, round=int(round_), training_accuracy=float(accuracy)),
            payload={
                "labels": labels.astype(code_dtype(n_classes)),
                "model": model.estimator if final else None,
                "codes": model.codes if final else None,
            },
        )


class _FedCTPartyStep:
    """FedCTClassifier's party side, run by `fit_party` on one party's machine
    and by `fit` for every party."""

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
            `random_state` and `party`, as `fit` does. With `privacy`, a server that
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
        if self.privacy is not None and party_seed is None:
            warnings.warn(
                "With BitFlips the party's bit flips come from party_seed; without one "
                "they derive from random_state and the party's name, which a server "
                "knowing random_state can recompute. Pass a secret party_seed.",
                UserWarning,
            )
        expected = data.expectations(self)
        if message is not None:
            message = checked_message(
                message, expected, check=lambda checker: check_server_message(
                    checker, _num_samples(data.X_public), self.n_rounds))
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

    def _share_labels(self, predictions, n_classes, sensitivity, rng):
        """What a party sends: its labels, through bit-flip noise when private.

        Returns class codes of shape (n_public,); ``-1`` where a noisy one-hot row does
        not hold exactly one 1 (an abstention).
        """
        if self.privacy is None:
            return predictions
        one_hot = predictions[..., None] == np.arange(n_classes)
        flip = rng.random_sample(one_hot.shape) < bit_flip_probability(
            self.privacy.epsilon, sensitivity
        )
        noisy = one_hot ^ flip
        return np.where(noisy.sum(axis=-1) == 1, noisy.argmax(axis=-1), -1)

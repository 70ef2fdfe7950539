"""FedCT's party step: what runs on a party's machine in every round.

Functions of a frozen `FedCTPlan`: `party_round` fits the round's models of many
parties in one batch and returns their uploads; `share_labels` is the bit-flip mechanism.
"""

import numpy as np
from sklearn.utils.validation import _num_samples

from .._deployment._upload import PartyUpload
from .._engine._fitting import StackedRows, Task, code_dtype, fit_clones
from .._engine._seeds import derived_random_state, draw_seeds
from .._privacy._accounting import bit_flip_probability


def instructions(message, n_public):
    """What the server's `message` asks the parties to fit: the consensus labels (codes,
    -1 for none) and the round; round 0 without consensus where there is no message."""
    if message is None:
        return np.full(n_public, -1), 0
    return np.asarray(message.payload["consensus"]), int(message.manifest["round"])


class FedCTParty:
    """A party's step of a FedCT round: its model on its rows plus the consensus-labelled
    public rows, and its (bit-flipped) labels of the public set.

    Stateless across rounds: the draws of round ``r`` depend only on the party's stream
    and ``r``, so that a party's machine can run each round as a separate command.
    `FedCTClassifier.fit_party` runs one party's; ``fit`` runs every party's, their
    models of a round in one flat parallel batch (`party_round`).
    """

    def __init__(self, plan, party, estimator, rows, y, random_state):
        self.plan, self.party, self.estimator, self.rows, self.y = (
            plan, party, estimator, rows, y
        )
        (self.base_seed,) = draw_seeds(random_state, 1)
        self.model, self.round = None, None

    def round_seed(self, round_):
        """The seed of the round's model; the round's bit flips follow in its stream."""
        self._round_rng = derived_random_state(int(self.base_seed), "round", round_)
        (seed,) = draw_seeds(self._round_rng, 1)
        return seed

    def task(self, consensus, public_rows):
        labelled = consensus >= 0
        return Task(self.estimator, np.concatenate([self.y[self.rows], consensus[labelled]]),
                    np.concatenate([self.rows, public_rows[labelled]]))

    def fitted(self, model, predictions, accuracy, round_, n_classes):
        """Keep the round's model and training accuracy, and the labels the party shares
        (bit-flipped with the plan's privacy)."""
        self.model, self.accuracy, self.round = model, accuracy, round_
        self.labels = share_labels(self.plan.privacy, predictions, n_classes,
                                   self.plan.sensitivity(len(predictions)),
                                   self._round_rng).astype(code_dtype(n_classes))

    def upload(self, manifest, with_model):
        """The round's labels and training accuracy; the model itself if `with_model`."""
        return PartyUpload(
            manifest=dict(manifest, round=int(self.round),
                          training_accuracy=float(self.accuracy)),
            payload={
                "labels": self.labels,
                "model": self.model.estimator if with_model else None,
                "codes": self.model.codes if with_model else None,
            },
        )


def party_round(plan, parties, data, message, manifests, share_model=True):
    """The round `message` asks for (round 0 without one): every party's model on its
    rows plus the consensus-labelled public rows, in one flat parallel batch, and its
    upload, with its model in the final round (the message says done) if `share_model`.

    Parties that fit this very round already (in ``fit``, where the last round's models
    are final) are not fit again.
    """
    n_rows, n_public, n_classes = len(data.y), _num_samples(data.X_public), len(data.classes)
    consensus, round_ = instructions(message, n_public)
    if any(party.round != round_ for party in parties):
        fits = fit_clones(
            [party.task(consensus, n_rows + np.arange(n_public)) for party in parties],
            # the parties' rows, then the public rows: tasks index one matrix
            StackedRows(data.X, data.X_public),
            n_classes=n_classes,
            seeds=[party.round_seed(round_) for party in parties],
            X_predict=data.X_public,
            score_training=True,
            **plan.clone_fitting,
        )
        for party, model, labels, accuracy in zip(
            parties, fits.models, fits.predictions, fits.training_accuracy
        ):
            party.fitted(model, labels, accuracy, round_, n_classes)
    final = message is not None and message.manifest["done"] and share_model
    return [party.upload(manifest, final) for party, manifest in zip(parties, manifests)]


def share_labels(privacy, predictions, n_classes, sensitivity, rng):
    """What a party sends: its labels, through bit-flip noise with `privacy`
    (`BitFlips`, or None for none).

    Returns class codes of shape (n_public,); ``-1`` where a noisy one-hot row does
    not hold exactly one 1 (an abstention).
    """
    if privacy is None:
        return predictions
    one_hot = predictions[..., None] == np.arange(n_classes)
    flip = rng.random_sample(one_hot.shape) < bit_flip_probability(privacy.epsilon,
                                                                   sensitivity)
    noisy = one_hot ^ flip
    return np.where(noisy.sum(axis=-1) == 1, noisy.argmax(axis=-1), -1)
